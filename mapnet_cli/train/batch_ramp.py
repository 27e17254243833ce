"""A batch-size ramp (`train.batch_ramp.start`): the first steps train on fewer sequences, the batch growing to
`train.batch_size` over the ramp, as Cramming (Geiping & Goldstein 2022) grows its batch during a budget.

    mapnet pretrain shards/ --out runs/r --preset mini --steps 2000 --set train.batch_ramp.start=8 \\
        --set train.batch_ramp.steps=600                     # 8, 16, 24, 32 sequences, 200 steps each
    mapnet pretrain shards/ --out runs/r --preset mini --time-budget 20m --set train.batch_ramp.start=8 \\
        --set train.batch_ramp.fraction=0.3                  # the same over the budget's first 30%

With B the batch, b_0 the start (k = B / b_0 >= 2) and p the position along the ramp (steps, or the training time
counted before the step, over the ramp's length), the linear ramp is taken in whole multiples of b_0, rounded down:

    b(p) = b_0 (1 + floor((k - 1) p))   for p < 1,        b(p) = B   for p >= 1

Whole multiples keep every size divisible by the world size and a stratified strategy's copies; a step of b
sequences counts b / B of a step's cost on the modelled clock. In full: docs/internals.md#trainbatch_ramppy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchRamp:
    start: int  # b_0, sequences of the first step
    full: int  # B, train.batch_size
    steps: int = 0  # R, the ramp's length in steps (without a budget)
    seconds: float = 0.0  # the ramp's length in counted seconds (under a budget: fraction x budget)

    @classmethod
    def from_settings(cls, train, budget_seconds: float | None) -> BatchRamp | None:
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
