"""A run's schedule: what the loop asks about time, answered in one place.

    schedule = make_schedule(settings, optimizer, seq_len)   # StepSchedule, or TimeSchedule for train.time_budget
    schedule.start(step, end)                                  # the loop begins (or resumes) at `step`
    while not schedule.done(step):
        schedule.begin(step)                                   # the learning rate (budget), the warm-up's switch
        pieces, size = schedule.pieces(step), schedule.batch(step)
        ...
        schedule.finish(step, seconds, pieces, size, info)     # the clock: measured, or modelled (budget.py)

Whether the run is done or complete, each step's sequence pieces (`train.short_seq.len`) and batch (the batch
ramp), the learning rate's schedule (`lr`, stepped by `train_step`), the modelled clock's known end, the progress
total, and what a checkpoint keeps (`state_dict`). A step run counts steps (`train.steps`, `train.short_seq.steps`,
`train.batch_ramp.steps`); a budget run counts training time (`train.time_budget` and its fractions), derived in
budget.py. The strategy is told the step's pieces; nothing rewrites another object's settings.
"""

from __future__ import annotations

import copy

from .. import distributed
from ..errors import MapnetError
from .batch_ramp import BatchRamp
from .budget import Budget, TimeLR, rank0_seconds
from .optim import build_scheduler


class StepSchedule:
    """train.steps decides: the warm-ups and the ramp are counted in steps; the clock only measures."""

    reads_every_step = False  # only log, evaluation and checkpoint steps bring the loss back

    def __init__(self, settings, optimizer, seq_len: int):
        self.train, self.seq_len = settings.train, seq_len
        self.lr = build_scheduler(optimizer, settings.optim, settings.train.steps)
        self.ramp = BatchRamp.from_settings(settings.train, None)
        self.end = settings.train.steps
        self.elapsed = 0.0  # the steps' seconds, as counted (measured, for a step run)
        self.wall = 0.0  # the steps' seconds on the wall clock
        self.last_dt = 0.0  # the last step's counted seconds

    def start(self, step: int, end: int) -> None:
        """The loop begins at `step` and stops at `end` at the latest (train.steps, or --stop-at's)."""
        self.end = end

    def done(self, step: int) -> bool:
        return step >= self.end

    def complete(self, step: int) -> bool:
        """Whether `step` (just taken) ends the run itself, not only this start of it."""
        return step == self.train.steps

    def may_end_after(self, step: int) -> bool:
        """Whether `step` may be the last one this start takes (it then logs its line)."""
        return step + 1 == self.end

    def begin(self, step: int) -> None:
        pass

    def pieces(self, step: int) -> int:
        return self.train.pieces_per_sequence(step, self.seq_len)

    def batch(self, step: int) -> int:
        """The global batch of `step` (sequences, copies included): train.batch_size, or less on a ramp."""
        return self.ramp.size(step, self.elapsed) if self.ramp is not None else self.train.batch_size

    def finish(self, step: int, seconds: float, pieces: int, size: int, info: distributed.DistInfo) -> None:
        self.wall += seconds
        self.last_dt = seconds
        self.elapsed += seconds

    def total(self, step: int) -> int:
        """The steps the run will have taken (the progress display's total)."""
        return self.train.steps

    def state_dict(self) -> dict:
        return {"scheduler": self.lr.state_dict(), "elapsed": self.elapsed, "wall_elapsed": self.wall}

    def load_state_dict(self, state: dict, ckpt) -> None:
        if "time_budget_seconds" in state["scheduler"]:
            raise MapnetError(
                f"--resume: {ckpt} was trained to a train.time_budget; it continues with one "
                "(a budget run cannot switch to train.steps)"
            )
        self.lr.load_state_dict(state["scheduler"])
        self.elapsed = state["elapsed"]
        self.wall = state.get("wall_elapsed", self.elapsed)  # older checkpoints: the wall clock was the one counted

    def record(self, step: int) -> dict | None:
        """run.json's `budget` (none for a step run)."""
        return None


class TimeSchedule(StepSchedule):
    """train.time_budget decides: the learning rate, the sequence-length warm-up and the ramp are laid out in
    training time (budget.py), counted by the wall clock or a modelled one. Rank 0's seconds are every rank's."""

    reads_every_step = True  # the clock then times each step's work, not its launch (budget.py)

    def __init__(self, settings, optimizer, seq_len: int):
        self.train, self.seq_len = settings.train, seq_len
        self.budget = Budget.from_settings(settings)
        self.lr = TimeLR(optimizer, self.budget)
        self.ramp = BatchRamp.from_settings(settings.train, self.budget.seconds)
        self.end = settings.train.steps
        self.elapsed = self.wall = self.last_dt = 0.0
        self.short_seq_end: int | None = None  # the first step on whole sequences, once the clock decides it
        self.modelled_end: int | None = None

    def start(self, step: int, end: int) -> None:
        self.end = end
        # On the modelled clock the end is known before the run: the schedule replayed without training.
        self.modelled_end = self._replay(step) if self.budget.step_seconds else None

    def done(self, step: int) -> bool:
        return step >= self.end or self.budget.spent(self.elapsed)

    def complete(self, step: int) -> bool:
        return self.budget.spent(self.elapsed)

    def may_end_after(self, step: int) -> bool:
        # A budget's last step is known only once it has run: one that will likely end it logs its line.
        return step + 1 == self.end or self.budget.spent(self.elapsed + 1.5 * self.last_dt)

    def begin(self, step: int) -> None:
        """Before `step`: its learning rate, and (once) the end of the sequence-length warm-up, from the time spent."""
        self.lr.at(self.elapsed)
        self._decide_short_seq(step)

    def _decide_short_seq(self, step: int) -> None:
        if self.train.short_seq.len and self.short_seq_end is None and self.budget.short_seq_over(self.elapsed):
            self.short_seq_end = step

    def pieces(self, step: int) -> int:
        if not self.train.short_seq.len:
            return 1
        whole = self.short_seq_end is not None and step >= self.short_seq_end
        return 1 if whole else self.seq_len // self.train.short_seq.len

    def finish(self, step: int, seconds: float, pieces: int, size: int, info: distributed.DistInfo) -> None:
        self.wall += seconds
        counted = self.budget.counted(seconds, pieces > 1, size / self.train.batch_size)
        elapsed = rank0_seconds(self.elapsed + counted, info)
        self.last_dt = elapsed - self.elapsed
        if step == 0:
            self.budget.check_first_step(elapsed)
        self.elapsed = elapsed

    def _replay(self, step: int) -> int:
        """The step a modelled-clock budget ends at: this schedule's own rules run forward without training, in
        the loop's order of additions, so the sum and the step it ends at are the loop's, bit for bit."""
        ahead = copy.copy(self)
        while not ahead.done(step):
            ahead._decide_short_seq(step)
            pieces = ahead.pieces(step)
            ahead.elapsed += self.budget.counted(0.0, pieces > 1, ahead.batch(step) / self.train.batch_size)
            step += 1
        return step

    def total(self, step: int) -> int:
        """On the modelled clock known in advance; on the wall clock projected from the fraction spent so far,
        the step itself at the last one (or at --stop-at's)."""
        if self.modelled_end is not None:
            return self.modelled_end
        position = self.budget.position(self.elapsed)
        if self.complete(step) or step >= self.end or position <= 0:
            return step
        return min(self.end, max(step, round(step / position)))

    def state_dict(self) -> dict:
        return {**super().state_dict(), "short_seq_end": self.short_seq_end}

    def load_state_dict(self, state: dict, ckpt) -> None:
        self.lr.load_state_dict(state["scheduler"])  # a step run's is refused there (budget.py)
        self.short_seq_end = state.get("short_seq_end")
        self.elapsed = state["elapsed"]
        self.wall = state.get("wall_elapsed", self.elapsed)

    def record(self, step: int) -> dict:
        return self.budget.record(self.elapsed, step, self.wall)


def make_schedule(settings, optimizer, seq_len: int) -> StepSchedule:
    """The schedule `settings` ask for, over sequences of `seq_len` tokens, driving `optimizer`'s rates."""
    cls = TimeSchedule if settings.train.time_budget else StepSchedule
    return cls(settings, optimizer, seq_len)


__all__ = ["StepSchedule", "TimeSchedule", "make_schedule"]
