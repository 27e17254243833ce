"""Training to a wall-clock budget (`train.time_budget`): the schedule laid out in training time, as Cramming does.

    mapnet pretrain shards/ --out runs/hour --preset mini --time-budget 60m     # the recipe's warm-ups, in time
    mapnet pretrain shards/ --out runs/hour --preset mini --time-budget 60m --set optim.warmup.fraction=0.05

What counts. The budget B is *training time*: the seconds the loop spends on optimizer steps (making the
step's batches, forward, backward, the update), measured by the loop's clock around each step and summed
into the schedule's `elapsed` (train/schedule.py). Held-out evaluation, variance snapshots, checkpoints, metrics lines and progress output
happen between steps and are not counted, so how often a run evaluates does not change what it trains.
A compiled model's first steps (compilation) are steps, and count. The budget is spent when the summed
step time reaches B; that step is the last, and it is evaluated and checkpointed like any final step.
A budget its first step spends is refused in one line, with no checkpoint written: one update (at
learning rate 0 when there is a warm-up, see below) is not a training run. So is a budget too small for its
warm-up, one whose first step spends the warm-up's share w B: the warm-up would hold only that update at rate 0
and the next would start at about the peak (`Budget.check_first_step`).
Every step of a budget run is read back (`step.train_step`'s `read`): on a GPU the host would otherwise
time only the launching of kernels, and the last step, found only once it has run, must be checked finite
before its checkpoint is written. With several processes rank 0's clock is the one every rank uses (one
float summed over ranks per step), so all of them apply the same learning rate and stop at the same step.

The schedule, derived. A step run's learning rate multiplier for the update after k completed updates
(`optim.lr_factor`) is, with W warm-up steps of S,

    f(k) = (k + 1) / W            for k < W       (linear warm-up)
    f(k) = (S - k) / (S - W)      for k >= W      (linear decay to zero at S)

It depends on k only through the position k / S along the run. Cramming (Geiping & Goldstein 2022) keeps
the shape and measures the position in time instead: with T_k the training time spent before update k + 1
and B the budget, the position is p_k = min(T_k / B, 1), the fraction of the budget spent so far. Writing
w = W / S for the warm-up's share (`optim.warmup.fraction`) and substituting p for k / S:

    f(p) = p / w                  for p < w       (linear warm-up, reaching 1 at p = w)
    f(p) = (1 - p) / (1 - w)      for p >= w      (linear decay, reaching 0 at p = 1)

continuous at p = w (both are 1), and (`optim.schedule = "constant"`) f(p) = 1 after the warm-up. The
integral of f over the run is B / 2 whatever w is, as it is S / 2 steps for a step run: the budget's
"learning-rate mass" does not depend on how fast a step is. The one difference from the step formula is
the first update: at p_0 = 0 the warm-up gives f = 0 (a step run gives 1 / W, as small), so with a warm-up
the first update moves Adam's moment estimates but not the weights.

The sequence-length warm-up (`train.short_seq.len`) is laid out the same way: update k trains on short
pieces while p_k < s (`train.short_seq.fraction`). Its end is decided once, at the first step that starts
at or past s * B, and kept (`short_seq_end`, in the checkpoint), so every later step and a resumed run see
the same switch step.

Resume. The spent time is in every checkpoint (`elapsed`), so `--resume` continues the same budget: the
position is recomputed from the stored seconds, not from the step, and the run stops when the total
training time over all its starts reaches B. A resumed run cannot be bitwise identical to an uninterrupted
one (its steps take other times, so its learning rates and switch step differ by the clock's noise); it is
honest instead: the checkpoint records the seconds, the step and the switch, and run.json the steps bought.
A longer budget on resume stretches the rest of the schedule from the time already spent, as a larger
`--steps` does for a step run.

The modelled clock (`train.step_seconds`, `train.short_step_seconds`). Equal wall time is equal work only on
machines of the same speed under the same load, and a 2-core machine is neither between sittings: one idle VM
timed the same step at 582-708 ms within nine hours, and the same 20-minute baseline bought 15-18% fewer steps
one sitting later (experiments/hour-levers). With a modelled clock every step counts a fixed cost instead of
its measured time: c_f seconds for a step on whole sequences, c_s for a step of the sequence-length warm-up.
Everything above holds with T_k the sum of the counted costs, so the run is the one the wall clock would give
on a machine whose steps always take c_f and c_s: a warm-up to fraction s is the first n_s = ceil(s B / c_s)
steps (the steps that start before s B), and the budget then buys n_f = ceil((B - n_s c_s) / c_f) more (the
last one crosses B). The steps bought, the learning rates and the switch step are then functions of the
settings alone, so the run is reproducible (same seed, same machine and threads, same result), load changes how long it
takes and nothing else, and a baseline trained in one sitting stays comparable with an arm trained in another.
What it gives up is the measurement in the run itself: the costs must be measured (benchmarks/step_costs.py:
each arm's full and short step against a reference arm's, the two trained in lock-step on an otherwise idle machine),
and a comparison is only as good as those ratios, whose spread the benchmark prints. run.json's `budget` says
which clock counted (`clock`) and, beside the counted seconds, the wall seconds the steps took.

The clock is a parameter (`clock=`, `time.perf_counter` by default) so the schedule and the stopping rule
can be tested exactly with a fake one, and `lr_factor_at` is a pure function of the position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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
    text: str                 # as the settings spell it ("60m")
    warmup_fraction: float
    schedule: str
    short_seq_fraction: float
    step_seconds: float = 0.0        # > 0: the modelled clock's cost of a step (0: the wall clock times it)
    short_step_seconds: float = 0.0  # its cost of a step of the sequence-length warm-up

    @classmethod
    def from_settings(cls, settings) -> "Budget | None":
        t, o = settings.train, settings.optim
        if not t.time_budget:
            return None
        return cls(t.budget_seconds, t.time_budget, o.warmup.fraction, o.schedule, t.short_seq.fraction,
                   t.step_seconds, t.short_step_seconds)

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
            raise MapnetError(f"train.time_budget {self.text} was spent by the first step alone ({seconds:.3g} s of "
                              "training): it buys no training; give a longer budget")
        warmup = self.warmup_fraction * self.seconds
        if self.warmup_fraction and seconds >= warmup:
            raise MapnetError(f"train.time_budget {self.text} is too short for its warm-up: the first step alone "
                              f"({seconds:.3g} s of training) spent the warm-up's share (optim.warmup.fraction "
                              f"{self.warmup_fraction:g}: {warmup:.3g} s), so the learning rate would jump from 0 to "
                              "its peak; give a longer budget or a larger optim.warmup.fraction (0: no warm-up); a "
                              "compiled model's first step includes its compilation (train.compile=false, or a "
                              "modelled clock: train.step_seconds)")

    def short_seq_over(self, seconds: float) -> bool:
        """Whether a step starting after `seconds` of training is past the sequence-length warm-up."""
        return seconds >= self.short_seq_fraction * self.seconds

    def record(self, spent: float, steps: int, wall: float) -> dict:
        """run.json's `budget`: what was asked, what was spent (counted, and the steps' wall time), what it bought."""
        clock = ({"clock": "wall"} if not self.step_seconds else
                 {"clock": "modelled", "step_seconds": self.step_seconds, "short_step_seconds": self.short_step_seconds})
        return {"time_budget": self.text, "seconds": self.seconds, "spent_seconds": round(spent, 3),
                "steps": steps, "finished": self.spent(spent), "warmup_fraction": self.warmup_fraction,
                "short_seq_fraction": self.short_seq_fraction, **clock, "wall_seconds": round(wall, 3),
                "counted": "optimizer steps only: evaluation, checkpoints and logging excluded"}


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
            raise MapnetError("--resume: this run was trained by steps (no train.time_budget); a budget cannot be "
                              "added on resume: start a new run (--init-from RUN keeps its weights)")
        self.base_lrs = [float(lr) for lr in state["base_lrs"]]


def rank0_seconds(seconds: float, info: distributed.DistInfo) -> float:
    """Rank 0's `seconds` on every rank: the clock all ranks schedule and stop by (one float summed over ranks)."""
    if not info.distributed:
        return seconds
    box = torch.tensor([seconds if info.is_main else 0.0], dtype=torch.float64, device=info.device)
    return float(distributed.all_reduce_sum(box, info).item())


__all__ = ["Budget", "Clock", "TimeLR", "lr_factor_at", "rank0_seconds"]
