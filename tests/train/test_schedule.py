"""The run's schedule (train/schedule.py): what the loop asks about time, answered without a model or data.

A step schedule's pieces and batches are a function of the step; a time schedule's follow the seconds counted
(here a modelled clock, so every figure is exact), and its replay — the end the progress display shows before
the run — must be the step the counted seconds really end at.
"""

from __future__ import annotations

import pytest
import torch

from mapnet_cli.distributed import DistInfo
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve
from mapnet_cli.train.schedule import StepSchedule, TimeSchedule, make_schedule

ONE = DistInfo()  # one process, on the CPU


def schedule(*sets: str):
    settings = resolve(None, {"model": {"preset": "tiny"}}, ["train.recipe=paper", "train.batch_size=8", *sets])
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    return make_schedule(settings, optimizer, seq_len=32)


def walk(sched, start: int = 0, seconds: float = 0.0):
    """Run `sched` as the loop does, each step taking `seconds`; [(step, pieces, batch, lr)]."""
    seen, step = [], start
    while not sched.done(step):
        sched.begin(step)
        pieces, size = sched.pieces(step), sched.batch(step)
        seen.append((step, pieces, size, sched.lr.optimizer.param_groups[0]["lr"]))
        sched.finish(step, seconds, pieces, size, ONE)
        sched.lr.optimizer.step()  # as train_step: the update, then the schedule's step
        sched.lr.step()
        step += 1
    return seen


def test_a_step_schedule_counts_its_warm_ups_and_ramp_in_steps():
    sched = schedule(
        "train.steps=8",
        "optim.warmup.steps=2",
        "train.short_seq.len=8",
        "train.short_seq.steps=3",
        "train.batch_ramp.start=4",
        "train.batch_ramp.steps=4",
    )
    assert isinstance(sched, StepSchedule) and not isinstance(sched, TimeSchedule)
    sched.start(0, 8)
    seen = walk(sched, seconds=0.5)
    assert [(p, b) for _, p, b, _ in seen] == [(4, 4), (4, 4), (4, 4), (1, 4), (1, 8), (1, 8), (1, 8), (1, 8)]
    assert [lr for *_, lr in seen] == pytest.approx([0.5, 1.0, 1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    assert sched.complete(8) and not sched.complete(7) and sched.total(3) == 8
    assert sched.state_dict()["elapsed"] == 4.0 and sched.record(8) is None


def test_a_time_schedule_follows_the_modelled_clock_and_its_replay_is_the_real_end():
    sets = (
        "train.time_budget=10s",
        "optim.warmup.steps=0",
        "optim.warmup.fraction=0.2",
        "train.step_seconds=1.0",
        "train.short_seq.len=8",
        "train.short_seq.fraction=0.3",
        "train.short_step_seconds=0.5",
        "train.batch_ramp.start=4",
        "train.batch_ramp.fraction=0.4",
    )
    sched = schedule(*sets)
    assert isinstance(sched, TimeSchedule)
    sched.start(0, 1_000_000)
    predicted = sched.modelled_end
    seen = walk(sched)
    # Short pieces while fewer than 3 s are counted (0.5 s each, or 0.25 s on the ramp's half batch): 12 steps,
    # then whole sequences at 1 s (0.5 s for half a batch until 4 s are counted); the step crossing 10 s is the last.
    assert [p for _, p, _, _ in seen] == [4] * 12 + [1] * (len(seen) - 12)
    assert sched.short_seq_end == 12 and predicted == len(seen) == sched.total(len(seen))
    assert sched.complete(len(seen)) and sched.elapsed >= 10.0 > sched.elapsed - 1.0
    lrs = [lr for *_, lr in seen]
    assert lrs[0] == 0.0 and max(lrs) <= 1.0 and lrs[-1] < lrs[len(lrs) // 2]
    state = sched.state_dict()
    again = schedule(*sets)
    again.load_state_dict(state, "ckpt")
    assert (again.elapsed, again.short_seq_end) == (sched.elapsed, 12)


def test_a_schedule_refuses_the_other_kinds_state():
    steps, budget = schedule("train.steps=8"), schedule("train.time_budget=10s", "optim.warmup.steps=0")
    with pytest.raises(MapnetError, match="was trained to a train.time_budget"):
        steps.load_state_dict(budget.state_dict(), "ckpt")
    with pytest.raises(MapnetError, match="trained by steps"):
        budget.load_state_dict(steps.state_dict(), "ckpt")
