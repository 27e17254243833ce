"""A batch-size ramp (`train.batch_ramp.start`): the first steps train on fewer sequences, the batch growing to
`train.batch_size` over the ramp, as Cramming (Geiping & Goldstein 2022) grows its batch during a budget.

    mapnet pretrain shards/ --out runs/r --preset mini --steps 2000 --set train.batch_ramp.start=8 \\
        --set train.batch_ramp.steps=600                     # 8, 16, 24, 32 sequences, 200 steps each
    mapnet pretrain shards/ --out runs/r --preset mini --time-budget 20m --set train.batch_ramp.start=8 \\
        --set train.batch_ramp.fraction=0.3                  # the same over the budget's first 30%

The sizes, derived. With B the batch, b_0 the ramp's start (B a multiple of it, k = B / b_0 >= 2) and p the
position along the ramp (p = step / R for a ramp of R steps; under a budget, the training time spent before the
step over the ramp's share of the budget, f x B_seconds), the linear ramp b_0 + (B - b_0) p is taken in whole
multiples of b_0, rounded down:

    b(p) = b_0 (1 + floor((k - 1) p))   for p < 1,        b(p) = B   for p >= 1

so each of the k - 1 sizes below B holds for 1 / (k - 1) of the ramp (a ramp of R steps from 8 to 32: 8 for
steps 0 .. R/3 - 1, 16, then 24, then 32 from step R on). Whole multiples of b_0 keep every step's batch
divisible by the world size and a stratified strategy's copies whenever b_0 is (checked when the run starts),
so the 1 x 8 = 2 x 4 process equivalence holds for every size. With steps, the integer form
1 + (k - 1) step // R is used (exact); under a budget the size at a step is decided from the time counted
before it, as the sequence-length warm-up's end is, so a modelled clock (below) makes it exact too.

Data and masks. A step of b sequences takes the next b of the data stream (the position saved in every
checkpoint counts sequences, so resume is exact) into the batch's first b slots; masks are keyed by
(seed, step, slot), so the sequences a ramped step shares with a full one get the same masks.

The modelled clock (`train.step_seconds`). A step of b sequences counts b / B of the step's cost: the
proportional model. Measured at `mini` (experiments/hour-levers, step costs): a batch of 16 costs 0.533 of a
batch of 32, not 0.5, so the model counts the ramp's small steps ~6% cheaper than they are and a ramped budget
buys a few more of them than the wall clock would; on the wall clock each step counts what it took.

Compiled models (`train.compile`, on by default on CUDA) see a new batch shape at each of the k sizes: torch
compiles again once per size, k - 1 more compilations in all (unmeasured on a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchRamp:
    start: int      # b_0, sequences of the first step
    full: int       # B, train.batch_size
    steps: int = 0  # R, the ramp's length in steps (without a budget)
    seconds: float = 0.0  # the ramp's length in counted seconds (under a budget: fraction x budget)

    @classmethod
    def from_settings(cls, train, budget_seconds: float | None) -> "BatchRamp | None":
        if not train.batch_ramp.start:
            return None
        if budget_seconds is not None:
            return cls(train.batch_ramp.start, train.batch_size, seconds=train.batch_ramp.fraction * budget_seconds)
        return cls(train.batch_ramp.start, train.batch_size, steps=train.batch_ramp.steps)

    def size(self, step: int, elapsed: float) -> int:
        """The global batch of `step`, which starts after `elapsed` counted seconds of training."""
        k = self.full // self.start
        if self.steps:
            return self.full if step >= self.steps else self.start * (1 + (k - 1) * step // self.steps)
        p = elapsed / self.seconds
        return self.full if p >= 1 else self.start * (1 + int((k - 1) * p))


__all__ = ["BatchRamp"]
