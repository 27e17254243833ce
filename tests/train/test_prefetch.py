"""Batches made one step ahead in a background thread (`train.prefetch`): the same training, bit for bit."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch
from tiny_shards import write_tiny_shards

from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain
from mapnet_cli.train.prefetch import StepPrefetcher

# Dropout on: the loop reseeds the global torch RNG for it every step, so a batch maker that drew from that
# RNG in the background thread would change the losses.
BASE = [
    "train.recipe=paper",
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.steps=12",
    "train.eval_every=6",
    "train.eval_sequences=16",
    "train.checkpoint_every=6",
    "optim.warmup.steps=3",
    "optim.lr=3e-3",
    "logging.log_every=1",
    "logging.progress=false",
    "model.dropout=0.1",
    "train.micro_batch_size=3",
]
ARMS = {
    "uniform": ["masking.strategy=uniform"],
    "stratified": ["masking.strategy=stratified"],
    "whole-word": ["masking.strategy=whole-word"],
    "mapnet-ht": [
        "masking.strategy=mapnet",
        "masking.mapnet.importance=ht",
        "masking.mapnet.mix_uniform=0.5",
        "masking.mapnet.explore_steps=6",
        "masking.mapnet.train_every=2",
    ],
    "short pieces": ["train.short_seq.len=8", "train.short_seq.steps=5"],
}


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


def settings(*extra: str):
    return resolve(None, {"model": {"preset": "tiny"}}, [*BASE, *extra])


def losses(run: Path) -> list:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["kind"], r["step"], r.get("loss"), r.get("eval_loss")) for r in rows if r["kind"] in ("train", "eval")]


def weights(ckpt: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(ckpt / "model.safetensors"))


# ---------------------------------------------------------------- the prefetcher alone
class Maker:
    """Records which thread made which (step, position)."""

    def __init__(self, fail_at: int | None = None):
        self.calls: list[tuple[int, int, str]] = []
        self.fail_at = fail_at

    def __call__(self, step: int, position: int) -> tuple[int, int]:
        self.calls.append((step, position, threading.current_thread().name))
        if step == self.fail_at:
            raise OSError(f"shard unreadable at step {step}")
        return step, position


def test_in_order_batches_come_from_the_background_thread():
    make = Maker()
    with StepPrefetcher(make, enabled=True) as ahead:
        got = [ahead.get(s, 10 * s, after=(s + 1, 10 * (s + 1)) if s < 4 else None) for s in range(5)]
    assert got == [(s, 10 * s) for s in range(5)]
    assert [c[:2] for c in make.calls] == got  # each made once, none past the last
    threads = [c[2] for c in make.calls]
    assert threads[0] == threading.current_thread().name  # nothing was ahead of the first
    assert all(t.startswith("mapnet-batches") for t in threads[1:])


def test_disabled_makes_every_batch_inline():
    make = Maker()
    ahead = StepPrefetcher(make, enabled=False)
    assert [ahead.get(s, s, after=(s + 1, s + 1)) for s in range(3)] == [(0, 0), (1, 1), (2, 2)]
    assert {c[2] for c in make.calls} == {threading.current_thread().name}
    ahead.close()


def test_an_out_of_order_request_drops_the_pending_batch_and_is_made_here():
    make = Maker()
    with StepPrefetcher(make, enabled=True) as ahead:
        ahead.get(0, 0, after=(1, 8))
        assert ahead.get(5, 40) == (5, 40)  # not what was prepared: made in the caller's thread
    assert make.calls[-1] == (5, 40, threading.current_thread().name)


def test_a_background_error_is_raised_by_the_step_that_needs_it():
    make = Maker(fail_at=2)
    with StepPrefetcher(make, enabled=True) as ahead:
        assert ahead.get(1, 1, after=(2, 2)) == (1, 1)  # step 2 fails in the background; step 1 is unaffected
        with pytest.raises(OSError, match="step 2"):
            ahead.get(2, 2, after=(3, 3))


def test_close_waits_for_the_pending_batch_and_drops_its_error():
    make = Maker(fail_at=1)
    ahead = StepPrefetcher(make, enabled=True)
    ahead.get(0, 0, after=(1, 1))
    ahead.close()  # step 1 never runs: its error is nobody's
    assert not any(t.name.startswith("mapnet-batches") for t in threading.enumerate())
    ahead.close()  # twice is harmless


# ---------------------------------------------------------------- the training loop
@pytest.mark.slow
@pytest.mark.parametrize("arm", list(ARMS))
def test_prefetched_training_is_bitwise_the_same(shards, tmp_path, arm):
    runs = {}
    for prefetch in ("false", "true"):
        out = tmp_path / prefetch
        runs[prefetch] = (pretrain(settings(*ARMS[arm], f"train.prefetch={prefetch}"), shards, out), out)
    (ca, a), (cb, b) = runs["false"], runs["true"]
    assert losses(a) == losses(b) and len(losses(a)) == 12 + 3
    wa, wb = weights(ca), weights(cb)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_prefetched_resume_continues_exactly(shards, tmp_path):
    s = settings("train.prefetch=true")
    straight = pretrain(s, shards, tmp_path / "a")
    pretrain(s, shards, tmp_path / "b", stop_at=6)
    resumed = pretrain(s, shards, tmp_path / "b", resume=True)
    wa, wb = weights(straight), weights(resumed)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert losses(tmp_path / "a") == losses(tmp_path / "b")


def test_prefetch_is_off_unless_asked():
    assert settings().train.prefetch is False  # the CPU measured it slower; the GPU has not measured it
    assert settings("train.prefetch=true").train.prefetch is True
