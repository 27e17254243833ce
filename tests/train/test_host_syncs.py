"""A training step reads nothing back from the device except on the steps the loop reads (logging,
evaluation, checkpoints); the counter behind that claim sees the syncs it is meant to see."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from tiny_shards import write_tiny_shards

from mapnet_cli import distributed
from mapnet_cli.errors import MapnetError
from mapnet_cli.masking.strategy import UniformTraining, mlm_loss, to_device
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import resolve
from mapnet_cli.train import Run, host_syncs, pretrain, train_step

BASE = [
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.steps=20",
    "train.eval_every=10",
    "train.eval_sequences=16",
    "train.checkpoint_every=10",
    "optim.warmup.steps=3",
    "logging.log_every=5",
    "logging.progress=false",
]


def settings(*extra: str):
    return resolve(None, {"model": {"preset": "tiny"}}, [*BASE, *extra])


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


def step_syncs(run: Run, step: int, read: bool, stats: bool | None = None) -> dict[str, int]:
    """`stats`: collect the strategy's logging statistics (default: on read steps, as a logging step does)."""
    batches = run.batches(step)  # drawn on the host by design: not part of the count
    with_stats = read if stats is None else stats
    with host_syncs.counting() as prof:
        train_step(
            run.ddp,
            run.optimizer,
            run.scheduler,
            batches,
            scale=1 / 8,
            grad_clip=1.0,
            autocast=run.autocast,
            info=run.info,
            batch_size=8,
            loss_fn=run.strategy.loss_fn(step, with_stats=with_stats),
            read=read,
            frozen=run.strategy.frozen(step),
        )
    return host_syncs.count(prof.events())


ARMS = {
    "uniform": ["masking.strategy=uniform"],
    "stratified": ["masking.strategy=stratified"],
    "frequency": ["masking.strategy=frequency", "masking.frequency.mix_uniform=0.5"],
    "whole-word": ["masking.strategy=whole-word"],
    # MAP-Net draws its masks on the device, from the proposal: its randomness, K and the mask's size
    # come from the host (`mapnet.host_draws`), so its step waits for nothing either.
    "mapnet": ["masking.strategy=mapnet", "masking.mapnet.explore_steps=2"],
    "mapnet-ht": [
        "masking.strategy=mapnet",
        "masking.mapnet.importance=ht",
        "masking.mapnet.mix_uniform=0.5",
        "masking.mapnet.explore_start=0",
        "masking.mapnet.explore_end=0",
        "masking.mapnet.target=gradnorm",
    ],
    "mapnet-ht-frozen": [
        "masking.strategy=mapnet",
        "masking.mapnet.importance=ht",
        "masking.mapnet.mix_uniform=0.5",
        "masking.mapnet.explore_start=0",
        "masking.mapnet.explore_end=0",
        "masking.mapnet.train_every=2",
    ],
    # The adaptive table is drawn from on the host; its scores are gathered on the device, read once per update.
    "adaptive": ["masking.strategy=adaptive"],
    "adaptive-soft-ht": [
        "masking.strategy=adaptive",
        "masking.adaptive.score=soft",
        "masking.adaptive.weights=ht",
        "masking.adaptive.mix_uniform=0.5",
    ],
}


@pytest.mark.parametrize("strategy", list(ARMS))
def test_a_step_that_is_not_read_waits_for_nothing_and_a_read_step_once(shards, tmp_path, strategy):
    run = Run(settings(*ARMS[strategy]), shards, tmp_path / "run", distributed.DistInfo(), False, [])
    assert step_syncs(run, 0, read=False) == {"item": 0, "nonzero": 0, "tolist": 0, "cuda": 0}
    # An evaluation or checkpoint step reads once. (A logging step also collects MAP-Net's statistics,
    # whose reads are allowed there and not counted here.)
    assert step_syncs(run, 1, read=True, stats=False) == {"item": 0, "nonzero": 0, "tolist": 1, "cuda": 0}


def test_the_adaptive_table_is_read_once_per_update_and_never_in_between(shards, tmp_path):
    """masking.adaptive.every = 4: the table is updated after steps 2 and 6 (one read of the pooled scores
    each, `AdaptiveTable.update`); the steps in between, unread, wait for nothing, the update included."""
    run = Run(
        settings("masking.strategy=adaptive", "masking.adaptive.every=4"),
        shards,
        tmp_path / "run",
        distributed.DistInfo(),
        False,
        [],
    )
    counts = {}
    for step in range(8):
        batches = run.batches(step)
        with host_syncs.counting() as prof:
            train_step(
                run.ddp,
                run.optimizer,
                run.scheduler,
                batches,
                scale=1 / 8,
                grad_clip=1.0,
                autocast=run.autocast,
                info=run.info,
                batch_size=8,
                loss_fn=run.strategy.loss_fn(step, with_stats=False),
                read=False,
            )
            run.strategy.after_step()
        counts[step] = host_syncs.count(prof.events())
    none, once = dict.fromkeys(host_syncs.KINDS, 0), {**dict.fromkeys(host_syncs.KINDS, 0), "tolist": 1}
    assert counts == {step: once if step in (2, 6) else none for step in range(8)}
    assert int(run.strategy.table.updates) == 2


def test_the_counter_sees_the_reads_of_a_mask_passed_as_bools(shards, tmp_path):
    """Without host-side positions the model finds them with `nonzero` and reads the widest row
    (`query_layout`): the two syncs the host-drawn batch removes, and proof the counter can fail."""
    run = Run(settings(), shards, tmp_path / "run", distributed.DistInfo(), False, [])
    batch = dataclasses.replace(run.batches(0)[0], positions=None, width=None)
    with host_syncs.counting() as prof:
        mlm_loss(run.model, batch, 1 / 8)
    counts = host_syncs.count(prof.events())
    assert counts["nonzero"] >= 1 and counts["tolist"] == 1
    with host_syncs.counting() as prof:
        torch.tensor([1.0]).item()
        with torch.profiler.record_function("mapnet.masks"):  # host-side by design: not counted
            torch.tensor([1, 0]).nonzero()
    assert host_syncs.count(prof.events()) == {"item": 1, "nonzero": 0, "tolist": 0, "cuda": 0}


@pytest.mark.parametrize("strategy", ["uniform", "stratified", "frequency"])
def test_host_positions_give_exactly_the_loss_of_the_bool_mask(shards, tmp_path, strategy):
    run = Run(
        settings(
            f"masking.strategy={strategy}",
            "model.dropout=0.0",
            "model.attention_dropout=0.0",
            *(["masking.frequency.mix_uniform=0.5"] if strategy == "frequency" else []),
        ),
        shards,
        tmp_path / "run",
        distributed.DistInfo(),
        False,
        [],
    )
    batch = run.batches(3)[0]
    assert batch.positions is not None and batch.width is not None  # the loop's batches carry them
    as_bools = dataclasses.replace(batch, positions=None, width=None)
    with torch.no_grad():
        a, b = mlm_loss(run.model, batch, 1 / 8), mlm_loss(run.model, as_bools, 1 / 8)
    for x, y in zip(a, b):
        assert torch.equal(x, y)


def test_to_device_refuses_a_batch_drawn_on_the_device(shards, tmp_path):
    run = Run(settings(), shards, tmp_path / "run", distributed.DistInfo(), False, [])
    batch = dataclasses.replace(run.batches(0)[0], positions=None, width=None)
    fake = dataclasses.replace(batch, mask=batch.mask.to("meta"))
    with pytest.raises(ValueError, match="drawn on the host"):
        to_device(fake, torch.device("cpu"))


@pytest.mark.parametrize("bad, read_by", [(13, "logging"), (19, "checkpoint")])
def test_a_non_finite_step_between_reads_is_named_and_never_checkpointed(shards, tmp_path, monkeypatch, bad, read_by):
    """Logging every 7 steps, checkpoints every 10: a step nobody reads turns NaN (13: the logging read
    at 14 finds it; 19: the checkpoint at 20 reads first, `_reads_before`); the read names the bad step,
    not its own, and the last checkpoint (step 10) holds finite weights."""
    plain = UniformTraining.loss_fn

    def poisoned(self, step, with_stats, pieces=1):
        fn = plain(self, step, with_stats, pieces)
        if step + 1 != bad:
            return fn
        return lambda model, batch, scale: tuple(
            x * float("nan") if i < 2 else x for i, x in enumerate(fn(model, batch, scale))
        )

    monkeypatch.setattr(UniformTraining, "loss_fn", poisoned)
    s = settings("logging.log_every=7", "train.eval_every=0", "train.checkpoint_every=10", "train.steps=30")
    with pytest.raises(MapnetError, match=rf"non-finite loss at step {bad} .*last good checkpoint: .*step-00000010"):
        pretrain(s, shards, tmp_path / "run")
    last = checkpoint.latest_checkpoint(tmp_path / "run")
    assert last.name == "step-00000010"
    model, _ = checkpoint.load_model(last)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def profile(shards: Path, tmp_path: Path, *extra: str) -> str:
    """benchmarks/profile_step.py, run as its command line runs it (in this process: tests/scripts.py)."""
    from scripts import run_script

    root = Path(__file__).resolve().parents[2]
    return run_script(
        root / "benchmarks" / "profile_step.py",
        "--data",
        str(shards),
        "--preset",
        "tiny",
        "--steps",
        "4",
        "--warmup",
        "1",
        "--batch",
        "8",
        "--threads",
        "1",
        "--set",
        "logging.log_every=2",
        *extra,
        cwd=tmp_path,
    )


def part_ms(out: str) -> dict[str, float]:
    """The profile's host ms per step of each part."""
    rows = [line.rsplit(None, 2) for line in out.splitlines() if line.endswith("%") and not line.startswith("(")]
    return {name.strip(): float(ms) for name, ms, _ in rows}


def sync_counts(out: str) -> dict[int, str]:
    lines = [line.split() for line in out.splitlines() if line.strip().startswith("step ") and "/" in line]
    return {int(w[1]): "".join(w[-7:]) for w in lines}


@pytest.mark.slow  # runs benchmarks/profile_step.py
def test_the_profiler_script_profiles_the_real_loop_and_counts_its_syncs(shards, tmp_path):
    """benchmarks/profile_step.py: the loop's parts, and per step no sync except the read of a logging step."""
    trace = tmp_path / "trace.json"
    out = profile(shards, tmp_path, "--trace", str(trace))
    for part in ("data", "masks", "to_device", "prefetch_wait", "forward", "backward", "read", "step (median)"):
        assert f"\n{part} " in out, part
    ms = part_ms(out)
    assert ms["masks"] > 0 and ms["prefetch_wait"] == 0  # made on this thread, nothing to wait for
    assert sync_counts(out) == {2: "0/0/1/0", 3: "0/0/0/0", 4: "0/0/1/0", 5: "0/0/1/0"}, out
    assert json.loads(trace.read_text())["traceEvents"]


@pytest.mark.slow  # runs benchmarks/profile_step.py
def test_with_prefetch_the_batches_leave_the_loop_thread(shards, tmp_path):
    """`train.prefetch`: data, masks and copies run in the background thread, none of it on the step's thread;
    the step's syncs are unchanged."""
    out = profile(shards, tmp_path, "--set", "train.prefetch=true")
    assert "background thread" in out
    ms = part_ms(out)
    assert ms["data"] == ms["masks"] == ms["to_device"] == 0 and ms["forward"] > 0
    assert sync_counts(out) == {2: "0/0/1/0", 3: "0/0/0/0", 4: "0/0/1/0", 5: "0/0/1/0"}, out
