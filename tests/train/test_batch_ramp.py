"""The batch-size ramp (train/batch_ramp.py): its sizes against the docstring's formula, the data it consumes, exact
resume and prefetch, the modelled clock's share of a step, and the one-line refusals."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from tiny_shards import write_tiny_shards

from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve
from mapnet_cli.train import loop, pretrain
from mapnet_cli.train.batch_ramp import BatchRamp
from mapnet_cli.train.run_loader import load_run

TINY = [
    "train.recipe=paper",
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.eval_every=0",
    "train.eval_sequences=16",
    "train.checkpoint_every=0",
    "optim.warmup.steps=0",
    "optim.lr=3e-3",
    "logging.log_every=1",
    "logging.progress=false",
]
MASKED = 5  # masked positions in each 32-token sequence of the tiny shards at 15%


class FakeClock:
    def __init__(self, tick: float):
        self.now, self.tick = 1000.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


def settings(*extra: str):
    return resolve(None, {"model": {"preset": "tiny"}}, [*TINY, *extra])


def train_lines(run: Path) -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "train"]


def weights(ckpt: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(ckpt / "model.safetensors"))


def formula(start: int, full: int, p: float) -> int:
    """The docstring's b(p) = b_0 (1 + floor((k - 1) p)) below the ramp's end, B from it on."""
    return full if p >= 1 else start * (1 + math.floor((full // start - 1) * p))


def test_the_sizes_follow_the_formula_in_steps_and_in_time():
    by_steps = BatchRamp(8, 32, steps=300)
    assert [by_steps.size(s, 0.0) for s in (0, 99, 100, 199, 200, 299, 300, 10_000)] == [8, 8, 16, 16, 24, 24, 32, 32]
    assert all(by_steps.size(s, 0.0) == formula(8, 32, s / 300) for s in range(0, 400, 7))
    by_time = BatchRamp(8, 32, seconds=3.0)
    assert [by_time.size(0, e) for e in (0.0, 0.99, 1.0, 2.0, 2.99, 3.0, 9.0)] == [8, 8, 16, 24, 24, 32, 32]


def test_a_ramped_run_trains_and_consumes_each_steps_batch_and_resumes_and_prefetches_exactly(
    shards, tmp_path, monkeypatch
):
    ramp = ["train.steps=8", "train.batch_ramp.start=2", "train.batch_ramp.steps=6"]
    straight = pretrain(settings(*ramp), shards, tmp_path / "a")
    sizes = [formula(2, 8, s / 6) for s in range(8)]
    assert sizes == [2, 2, 4, 4, 6, 6, 8, 8]
    assert [r["masked_tokens"] for r in train_lines(tmp_path / "a")] == [MASKED * b for b in sizes]
    assert load_run(straight, weights=False).state("cpu")["data_position"] == sum(sizes)  # each step's own batch
    pretrain(settings(*ramp), shards, tmp_path / "b", stop_at=3)
    resumed = pretrain(settings(*ramp), shards, tmp_path / "b", resume=True)
    # Every batch made ahead is used: a wrong key (a size guessed wrong) would make that step's batches again.
    made = []
    make = loop.Run.batches
    monkeypatch.setattr(loop.Run, "batches", lambda run, *key: made.append(key) or make(run, *key))
    ahead = pretrain(settings(*ramp, "train.prefetch=true"), shards, tmp_path / "c")
    monkeypatch.undo()
    train_keys = [key for key in made if len(key) == 4]  # (step, position, pieces, size): the training batches
    assert [(k[0], k[3]) for k in train_keys] == list(enumerate(sizes))
    wa = weights(straight)
    for other in (resumed, ahead):
        wb = weights(other)
        assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # Without the ramp the first step trains the whole batch: the ramp is what changed the run.
    pretrain(settings("train.steps=1"), shards, tmp_path / "full")
    assert train_lines(tmp_path / "full")[0]["masked_tokens"] == MASKED * 8


def test_under_a_modelled_budget_a_ramped_step_counts_its_share_and_resumes_and_prefetches_exactly(shards, tmp_path):
    full, budget, fraction = 0.125, 1.0, 0.5  # powers of two: every sum below is exact
    # No learning-rate warm-up: the paper recipe's (1% of the budget) is shorter than the first step, and refused.
    s_extra = [
        "train.time_budget=1s",
        "optim.warmup.fraction=0",
        f"train.step_seconds={full}",
        "train.batch_ramp.start=2",
        f"train.batch_ramp.fraction={fraction}",
    ]
    s = settings(*s_extra)
    slow = pretrain(s, shards, tmp_path / "slow", clock=FakeClock(0.3))
    fast = pretrain(s, shards, tmp_path / "fast", clock=FakeClock(0.01))
    # The steps, by the docstring: each step's size from the time counted before it, costing b / B of a step.
    elapsed, sizes, counted = 0.0, [], []
    while elapsed < budget:
        b = formula(2, 8, elapsed / (fraction * budget))
        sizes.append(b)
        elapsed += full * b / 8
        counted.append(elapsed)
    # Ramp thirds of 1/6 s: 6 steps of 2 (1/32 s each), 3 of 4, 2 of 6, then 4 full steps past 1 s.
    assert sizes == [2] * 6 + [4] * 3 + [6] * 2 + [8] * 4
    lines = train_lines(tmp_path / "slow")
    assert [r["masked_tokens"] for r in lines] == [MASKED * b for b in sizes]
    assert [r["elapsed"] for r in lines] == counted
    assert slow.name == fast.name == f"step-{len(sizes):08d}"
    ws, wf = weights(slow), weights(fast)
    assert all(torch.equal(ws[k], wf[k]) for k in ws)  # the machine's speed changed nothing
    # Stopped inside the ramp and resumed (the counted time carries over), or with batches made ahead (a size
    # guessed before the step's time is known is made again where wrong): the same run.
    pretrain(s, shards, tmp_path / "stopped", clock=FakeClock(0.3), stop_at=7)
    resumed = pretrain(s, shards, tmp_path / "stopped", clock=FakeClock(0.01), resume=True)
    ahead = pretrain(settings(*s_extra, "train.prefetch=true"), shards, tmp_path / "ahead", clock=FakeClock(0.3))
    for other in (resumed, ahead):
        assert other.name == slow.name
        wo = weights(other)
        assert all(torch.equal(ws[k], wo[k]) for k in ws)
    assert [r["masked_tokens"] for r in train_lines(tmp_path / "stopped")] == [MASKED * b for b in sizes]


@pytest.mark.parametrize(
    "extra, says",
    [
        (["train.batch_ramp.start=2"], "turns the batch-size ramp on: give its length, train.batch_ramp.steps"),
        (
            ["train.batch_ramp.start=3", "train.batch_ramp.steps=5"],
            "must be smaller than train.batch_size (8) and divide it",
        ),
        (
            ["train.batch_ramp.start=8", "train.batch_ramp.steps=5"],
            "must be smaller than train.batch_size (8) and divide it",
        ),
        (["train.batch_ramp.start=2", "train.batch_ramp.fraction=0.5"], "applies to a train.time_budget"),
        (["train.batch_ramp.steps=5"], "train.batch_ramp.steps = 5 would be ignored: train.batch_ramp.start is 0"),
        (
            [
                "train.time_budget=1m",
                "train.batch_ramp.start=2",
                "train.batch_ramp.steps=5",
                "train.batch_ramp.fraction=0.5",
            ],
            "train.batch_ramp.steps (5) counts steps, which a train.time_budget does not fix",
        ),
        (["train.time_budget=1m", "train.batch_ramp.start=2", "train.batch_ramp.fraction=1.5"], "must be in [0, 1]"),
        (
            ["train.time_budget=1m", "train.batch_ramp.start=2"],
            "under a train.time_budget give its share of the budget",
        ),
        (["train.batch_ramp.start=-2"], "must be >= 0"),
        (
            ["train.steps=4", "train.batch_ramp.start=2", "train.batch_ramp.steps=5"],
            "would never reach train.batch_size",
        ),
    ],
)
def test_a_ramp_that_cannot_be_what_was_asked_is_refused_in_one_line(extra, says):
    with pytest.raises(MapnetError) as exc:
        settings(*extra)
    assert says in str(exc.value)


def test_a_ramp_mapnet_or_a_stratified_batch_cannot_follow_is_refused_with_the_settings():
    ramp = ["train.steps=4", "train.batch_ramp.start=2", "train.batch_ramp.steps=2"]
    with pytest.raises(MapnetError, match="not available with masking.strategy 'mapnet'"):
        settings(*ramp, "masking.strategy=mapnet")
    with pytest.raises(MapnetError, match=r"divisible by masking.stratified.copies \(4\)"):  # 2 cannot hold 4 copies
        settings(*ramp, "masking.strategy=stratified", "masking.stratified.copies=4")
    # One micro-batch a step, as static_graph requires, whatever the ramp's size: allowed.
    assert settings(*ramp, "distributed.static_graph=true").distributed.static_graph
    assert settings(*ramp, "masking.strategy=stratified", "masking.stratified.copies=2").train.batch_ramp.start == 2


def test_a_ramp_the_processes_cannot_split_is_refused_before_training(shards, tmp_path):
    from mapnet_cli import distributed
    from mapnet_cli.train.loop import Run

    s = settings("train.steps=4", "train.batch_size=12", "train.batch_ramp.start=3", "train.batch_ramp.steps=2")
    with pytest.raises(MapnetError, match=r"divisible by the world size \(2\)"):
        Run(s, shards, tmp_path / "r", distributed.DistInfo(world_size=2), False, [])
