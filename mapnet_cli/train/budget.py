"""Training to a wall-clock budget (`train.time_budget`): the schedule laid out in training time, as Cramming does.

    mapnet pretrain shards/ --out runs/hour --preset mini --time-budget 60m     # the recipe's warm-ups, in time
    mapnet pretrain shards/ --out runs/hour --preset mini --time-budget 60m --set optim.warmup.fraction=0.05

The budget B is training time: the seconds of the optimizer steps alone (batches, forward, backward, update),
summed into the schedule's `elapsed`; evaluation, checkpoints and output between steps are not counted. Before
update k + 1 the position is p_k = min(T_k / B, 1), T_k the training time spent, and with w the warm-up's share
(`optim.warmup.fraction`) the learning-rate multiplier is the step schedule with p in place of k / S:

    f(p) = p / w   for p < w,        f(p) = (1 - p) / (1 - w)   for p >= w

Every step is read back, rank 0's clock is every rank's, and `--resume` continues the same budget from the stored
seconds; a modelled clock (`train.step_seconds`) counts a fixed cost per step instead, so the steps bought are a
function of the settings alone. What counts and why, the derivation, resume: docs/internals.md#trainbudgetpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import distributed
from ..errors import MapnetError

Clock = Callable[[], float]


def lr_factor_at(position: float, warmup_fraction: float, schedule: str = "linear") -> float:
    """Multiplier of the peak learning rate at `position` = fraction of the budget spent (clipped to [0, 1])."""
    p = min(max(position, 0.0), 1.0)
    if warmup_fraction and p < warmup_fraction:
        return p / warmup_fraction
    if schedule == "constant":
        return 1.0
    return (1.0 - p) / (1.0 - warmup_fraction)


@dataclass
class Budget:
    """A run's budget: its seconds and the fractions its schedules are laid out in."""

    seconds: float
    text: str  # as the settings spell it ("60m")
    warmup_fraction: float
    schedule: str
    short_seq_fraction: float
    step_seconds: float = 0.0  # > 0: the modelled clock's cost of a step (0: the wall clock times it)
    short_step_seconds: float = 0.0  # its cost of a step of the sequence-length warm-up

    @classmethod
    def from_settings(cls, settings) -> Budget | None:
        t, o = settings.train, settings.optim
        if not t.time_budget:
            return None
        return cls(
            t.budget_seconds,
            t.time_budget,
            o.warmup.fraction,
            o.schedule,
            t.short_seq.fraction,
            t.step_seconds,
            t.short_step_seconds,
        )

    def counted(self, measured: float, short: bool, share: float = 1.0) -> float:
        """The seconds a step counts toward the budget: its `measured` time, or its modelled cost; a step of a
        batch-size ramp (train/batch_ramp.py) trains `share` of the batch and models that share of the cost."""
        if not self.step_seconds:
            return measured
        return (self.short_step_seconds if short else self.step_seconds) * share

    def position(self, spent: float) -> float:
        return min(spent / self.seconds, 1.0)

    def spent(self, seconds: float) -> bool:
        return seconds >= self.seconds

    def check_first_step(self, seconds: float) -> None:
        """Refuse, before any checkpoint, a budget too small for its warm-up: one its first step, `seconds` long,
        spent, or one whose first step spent the learning-rate warm-up's share w * B. That first update
        is taken at rate 0 (f(0) = 0), so the warm-up would hold no update that moves the weights and the second
        would start at about the peak rate: the warm-up the settings ask for would not happen."""
        if self.spent(seconds):  # one update (at learning rate 0 with a warm-up) is no training run
            raise MapnetError(
                f"train.time_budget {self.text} was spent by the first step alone ({seconds:.3g} s of "
                "training): it buys no training; give a longer budget"
            )
        warmup = self.warmup_fraction * self.seconds
        if self.warmup_fraction and seconds >= warmup:
            raise MapnetError(
                f"train.time_budget {self.text} is too short for its warm-up: the first step alone "
                f"({seconds:.3g} s of training) spent the warm-up's share (optim.warmup.fraction "
                f"{self.warmup_fraction:g}: {warmup:.3g} s), so the learning rate would jump from 0 to "
                "its peak; give a longer budget or a larger optim.warmup.fraction (0: no warm-up); a "
                "compiled model's first step includes its compilation (train.compile=false, or a "
                "modelled clock: train.step_seconds)"
            )

    def short_seq_over(self, seconds: float) -> bool:
        """Whether a step starting after `seconds` of training is past the sequence-length warm-up."""
        return seconds >= self.short_seq_fraction * self.seconds

    def record(self, spent: float, steps: int, wall: float) -> dict:
        """run.json's `budget`: what was asked, what was spent (counted, and the steps' wall time), what it bought."""
        clock = (
            {"clock": "wall"}
            if not self.step_seconds
            else {"clock": "modelled", "step_seconds": self.step_seconds, "short_step_seconds": self.short_step_seconds}
        )
        return {
            "time_budget": self.text,
            "seconds": self.seconds,
            "spent_seconds": round(spent, 3),
            "steps": steps,
            "finished": self.spent(spent),
            "warmup_fraction": self.warmup_fraction,
            "short_seq_fraction": self.short_seq_fraction,
            **clock,
            "wall_seconds": round(wall, 3),
            "counted": "optimizer steps only: evaluation, checkpoints and logging excluded",
        }


class TimeLR:
    """The learning rate by time: what a budget run holds where a step run holds its LambdaLR.

    `train_step` calls `step()` after each update, as it does a step run's scheduler; here that does
    nothing: the loop sets the next update's rate with `at(spent)` before it, from the clock. The
    state_dict holds numbers only (checkpoints load with weights_only=True)."""

    def __init__(self, optimizer: torch.optim.Optimizer, budget: Budget):
        self.optimizer, self.budget = optimizer, budget
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]  # MAP-Net's own rate included
        self.position = 0.0
        self.at(0.0)

    def at(self, spent: float) -> float:
        """Set every group's rate for the update that follows `spent` seconds of training; the factor."""
        self.position = self.budget.position(spent)
        factor = lr_factor_at(self.position, self.budget.warmup_fraction, self.budget.schedule)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * factor
        return factor

    def step(self) -> None:
        pass

    def state_dict(self) -> dict:
        return {"time_budget_seconds": self.budget.seconds, "position": self.position, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state: dict) -> None:
        """Only the base rates are taken; the position comes from the checkpoint's spent seconds (`at`)."""
        if "time_budget_seconds" not in state:
            raise MapnetError(
                "--resume: this run was trained by steps (no train.time_budget); a budget cannot be "
                "added on resume: start a new run (--init-from RUN keeps its weights)"
            )
        self.base_lrs = [float(lr) for lr in state["base_lrs"]]


def rank0_seconds(seconds: float, info: distributed.DistInfo) -> float:
    """Rank 0's `seconds` on every rank: the clock all ranks schedule and stop by (one float summed over ranks)."""
    if not info.distributed:
        return seconds
    box = torch.tensor([seconds if info.is_main else 0.0], dtype=torch.float64, device=info.device)
    return float(distributed.all_reduce_sum(box, info).item())


__all__ = ["Budget", "Clock", "TimeLR", "lr_factor_at", "rank0_seconds"]
