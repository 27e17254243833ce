"""The run's warm-ups, in one shape: each a table whose length is `steps` for a step run and `fraction` of the
training time for a `train.time_budget` run, the other left at 0.

    [optim.warmup]       steps, fraction            the learning rate's linear warm-up
    [train.short_seq]    len, steps, fraction       the sequence-length warm-up: pieces of `len` tokens (0: off)
    [train.batch_ramp]   start, steps, fraction     the batch-size ramp from `start` sequences (0: off)

One rule checks all three (`span_problems`); what each warm-up does is in train/schedule.py, train/budget.py
(fractions of a budget, derived) and train/batch_ramp.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from .field import setting


@dataclass(frozen=True, kw_only=True)
class WarmupSettings:
    steps: int = setting(10_000, "linear warm-up steps of a step run (paper: 10k); 0 under a train.time_budget")
    fraction: float = setting(
        0.0,
        "with train.time_budget: the warm-up's share of the budget's training time, in [0, 1) (the recipes give a "
        "budget run theirs: fast 0.14, paper 0.01); 0 without a budget",
    )


@dataclass(frozen=True, kw_only=True)
class ShortSeqSettings:
    len: int = setting(
        0,
        "pieces of this many tokens (it must divide the shards' length): the warm-up's steps train on the same tokens "
        "in shorter sequences; 0: off (train/batches.py says why)",
    )
    steps: int = setting(0, "the warm-up's steps in a step run; 0 under a train.time_budget")
    fraction: float = setting(
        0.0,
        "with train.time_budget: the warm-up's share of the budget's training time, in [0, 1) (the fast recipe gives "
        "a budget run 0.23); 0 without a budget",
    )


@dataclass(frozen=True, kw_only=True)
class BatchRampSettings:
    start: int = setting(
        0,
        "the first steps train on this many sequences, the batch growing in whole multiples of it to train.batch_size "
        "(a multiple of it); 0: off (train/batch_ramp.py)",
    )
    steps: int = setting(0, "the ramp's steps in a step run; 0 under a train.time_budget")
    fraction: float = setting(
        0.0, "with train.time_budget: the ramp's share of the budget's training time, in (0, 1]; 0 without a budget"
    )


def span_problems(
    name: str, span, budgeted: bool, what: str, on: str | None = None, whole_run: bool = False, off_because: str = ""
) -> list[str]:
    """The one rule of every warm-up `span` (table `name`, `what` it is in words): its length in steps for a step
    run, as a fraction of the budget for a budget run, never both; `on`: the key that turns it on (0: off, and then
    nothing else may be set; `off_because` says why it is 0, where a layer set it so); `whole_run`: a fraction of
    1 (the whole budget) is allowed."""
    out = []
    if span.steps < 0:
        out.append(f"{name}.steps must be >= 0 (got {span.steps})")
    top = "1]" if whole_run else "1)"
    if not (0.0 <= span.fraction <= 1.0 if whole_run else 0.0 <= span.fraction < 1.0):
        out.append(f"{name}.fraction must be in [0, {top} (got {span.fraction})")
    switch = getattr(span, on) if on else None
    if switch is not None and switch < 0:
        out.append(f"{name}.{on} must be >= 0 (got {switch})")
    if out:
        return out
    if switch == 0:
        return [
            f"{name}.{key} = {value} would be ignored: {name}.{on} is 0 (no {what}{off_because}): set "
            f"{name}.{on} too, or leave {name}.{key} at 0"
            for key, value in (("steps", span.steps), ("fraction", span.fraction))
            if value
        ]
    if budgeted:
        if span.steps:
            return [
                f"{name}.steps ({span.steps}) counts steps, which a train.time_budget does not fix: give the {what}'s "
                f"share of the budget as {name}.fraction (0: none) and leave {name}.steps at 0"
            ]
        if switch and not span.fraction:
            return [
                f"{name}.{on} = {switch} turns the {what} on: under a train.time_budget give its share of the "
                f"budget, {name}.fraction (e.g. 0.1), or {name}.{on} = 0 to turn it off"
            ]
    else:
        if span.fraction:
            return [
                f"{name}.fraction applies to a train.time_budget (got {span.fraction}); without one the {what} is "
                f"{name}.steps"
            ]
        if switch and not span.steps:
            return [
                f"{name}.{on} = {switch} turns the {what} on: give its length, {name}.steps, or {name}.{on} = 0 "
                "to turn it off"
            ]
    return out


__all__ = ["WarmupSettings", "ShortSeqSettings", "BatchRampSettings", "span_problems"]
