"""Checkpoints: weights of several modules, weights_only state, finding, pruning, and surviving kill -9."""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_shards import write_tiny_shards
from torch import nn

from mapnet_cli import atomic
from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import OptimSettings, Settings, WarmupSettings
from mapnet_cli.train.optim import build_optimizer, build_scheduler

CFG = BertConfig(vocab_size=40, layers=1, hidden=16, heads=2, intermediate=32, max_position=16)


def fake_checkpoint(run: Path, step: int, tokenizer: Path, model: BertForMLM | None = None) -> Path:
    model = model or BertForMLM(CFG)
    return checkpoint.save_checkpoint(
        run, step, {"": model}, {"data_position": step}, CFG, Settings().to_toml(), tokenizer, "abc"
    )


@pytest.fixture
def tokenizer(tmp_path) -> Path:
    path = tmp_path / "tokenizer.json"
    path.write_text("{}")
    return path


def test_weights_of_several_modules_with_a_shared_embedding(tmp_path):
    bert = BertForMLM(CFG)
    other = nn.Module()
    other.embed = bert.encoder.tok_embeddings  # as MAP-Net shares the token embedding
    other.proj = nn.Linear(16, 1)
    checkpoint.save_weights(tmp_path / "w.safetensors", {"": bert, "mapnet": other})
    from safetensors import safe_open

    with safe_open(str(tmp_path / "w.safetensors"), "pt") as fh:
        keys = set(fh.keys())
    assert "encoder.tok_embeddings.weight" in keys and "mapnet.embed.weight" not in keys  # stored once
    assert "mapnet.proj.weight" in keys and not any(k.startswith("mapnet.encoder") for k in keys)

    bert2, other2 = BertForMLM(CFG), nn.Module()
    other2.embed, other2.proj = nn.Embedding(40, 16), nn.Linear(16, 1)
    checkpoint.load_weights(tmp_path / "w.safetensors", {"": bert2, "mapnet": other2})
    for a, b in zip(bert.state_dict().values(), bert2.state_dict().values()):
        assert torch.equal(a, b)
    assert torch.equal(other2.embed.weight, bert.encoder.tok_embeddings.weight)
    assert torch.equal(other2.proj.weight, other.proj.weight)
    # The encoder alone loads from a file that also holds MAP-Net; a different model does not.
    checkpoint.load_weights(tmp_path / "w.safetensors", {"": BertForMLM(CFG)})
    with pytest.raises(MapnetError, match="shape"):
        checkpoint.load_weights(
            tmp_path / "w.safetensors", {"": BertForMLM(BertConfig(**{**CFG.to_dict(), "vocab_size": 41}))}
        )
    with pytest.raises(MapnetError, match="lacks"):
        checkpoint.load_weights(
            tmp_path / "w.safetensors", {"": BertForMLM(BertConfig(**{**CFG.to_dict(), "layers": 2}))}
        )


def test_state_loads_with_weights_only_and_restores_rng(tmp_path, tokenizer):
    model = BertForMLM(CFG)
    opt = build_optimizer([model], OptimSettings(warmup=WarmupSettings(steps=2)))
    sched = build_scheduler(opt, OptimSettings(warmup=WarmupSettings(steps=2)), 10)
    model(torch.randint(5, 40, (2, 8)), None, torch.ones(2, 8, dtype=torch.bool)).sum().backward()
    opt.step()
    sched.step()
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    rng = checkpoint.rng_state()
    expected = (random.random(), np.random.rand(), torch.rand(1))
    state = {"optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "rng": rng, "data_position": 7}
    ckpt = checkpoint.save_checkpoint(tmp_path / "run", 3, {"": model}, state, CFG, "x = 1\n", tokenizer, "abc")
    loaded = checkpoint.load_state(ckpt)  # weights_only=True inside
    assert loaded["step"] == 3 and loaded["data_position"] == 7
    opt2 = build_optimizer([BertForMLM(CFG)], OptimSettings())
    opt2.load_state_dict(loaded["optimizer"])
    assert torch.equal(opt2.state_dict()["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    checkpoint.set_rng_state(loaded["rng"])
    got = (random.random(), np.random.rand(), torch.rand(1))
    assert got[0] == expected[0] and got[1] == expected[1] and torch.equal(got[2], expected[2])


class Opaque:
    """Picklable (module level), so torch.save writes it; `torch.load(weights_only=True)` must refuse it."""


def test_unsafe_state_is_refused_before_publishing(tmp_path, tokenizer):
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):  # refused by weights_only
        checkpoint.save_checkpoint(
            tmp_path / "run", 1, {"": BertForMLM(CFG)}, {"x": Opaque()}, CFG, "", tokenizer, "abc"
        )
    assert checkpoint.list_checkpoints(tmp_path / "run") == []
    assert not list((tmp_path / "run" / "checkpoints").iterdir())  # the staging folder is gone too


def test_resolve_finds_the_newest_complete_checkpoint(tmp_path, tokenizer):
    run = tmp_path / "run"
    with pytest.raises(MapnetError, match="neither"):
        checkpoint.resolve_checkpoint(tmp_path)
    (run / "checkpoints").mkdir(parents=True)
    with pytest.raises(MapnetError, match="no complete checkpoint"):
        checkpoint.resolve_checkpoint(run)
    fake_checkpoint(run, 5, tokenizer)
    newest = fake_checkpoint(run, 20, tokenizer)
    fake_checkpoint(run, 100, tokenizer)
    (run / "checkpoints" / "step-00000100" / "COMPLETE").unlink()  # as if killed before the marker
    (run / "checkpoints" / ".step-00000200.abc.tmp-999999999").mkdir()  # a staging leftover
    assert checkpoint.resolve_checkpoint(run) == newest
    assert checkpoint.resolve_checkpoint(newest) == newest
    with pytest.raises(MapnetError, match="incomplete"):
        checkpoint.resolve_checkpoint(run / "checkpoints" / "step-00000100")
    with pytest.raises(MapnetError, match="not found"):
        checkpoint.resolve_checkpoint(run / "nope")
    checkpoint.clean_leftovers(run)
    assert not (run / "checkpoints" / ".step-00000200.abc.tmp-999999999").exists()
    model, meta = checkpoint.load_model(run)
    assert meta["step"] == 20 and model.cfg == CFG


def test_prune_keeps_the_last_periodic_and_the_kept_steps(tmp_path, tokenizer):
    run = tmp_path / "run"
    for step in (10, 20, 30, 40, 50):
        fake_checkpoint(run, step, tokenizer)
    removed = checkpoint.prune(run, keep_last=2, keep_steps=(20,))
    assert sorted(p.name for p in removed) == ["step-00000010", "step-00000030"]
    assert [s for s, _ in checkpoint.list_checkpoints(run)] == [20, 40, 50]
    assert not list((run / "checkpoints").glob(".*"))


@pytest.mark.slow
def test_kill_9_while_checkpointing_leaves_only_complete_checkpoints(tmp_path):
    """A real run checkpointing every step is SIGKILLed at random moments; what is left must load and resume."""
    shards = write_tiny_shards(tmp_path / "shards", train=64, valid=8)
    run = tmp_path / "run"
    args = [
        sys.executable,
        "-m",
        "mapnet_cli.cli",
        "pretrain",
        str(shards),
        "--out",
        str(run),
        "--preset",
        "tiny",
        "--steps",
        "400",
        "--batch-size",
        "4",
    ]
    for kv in (
        "model.max_position=32",
        "shard.max_seq_len=32",
        "train.checkpoint_every=1",
        "train.keep_last=3",
        "train.eval_every=0",
        "logging.progress=false",
    ):
        args += ["--set", kv]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    rng = random.Random(0)
    for attempt in range(2):
        proc = subprocess.Popen(
            args + (["--resume"] if attempt else []), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.time() + 60
        start = checkpoint.latest_checkpoint(run)
        while checkpoint.latest_checkpoint(run) == start and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)  # wait until this attempt has published a checkpoint of its own
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(rng.uniform(0.05, 1.0))  # checkpointing every step: likely mid-write
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        folders = sorted((run / "checkpoints").glob("step-*"))
        assert folders
        for folder in folders:
            assert ".tmp" not in folder.name
            assert (folder / "COMPLETE").is_file(), folder
            checkpoint.load_model(folder)
            checkpoint.load_state(folder)
    steps_before = checkpoint.read_config(checkpoint.latest_checkpoint(run))["step"]
    # What the kills left, resumed by `mapnet pretrain --resume` in this process (a third start of torch buys nothing).
    from typer.testing import CliRunner

    from mapnet_cli.cli import app

    finish = CliRunner().invoke(app, args[3:] + ["--resume", "--stop-at", str(steps_before + 2)])
    assert finish.exit_code == 0, finish.output
    assert checkpoint.read_config(checkpoint.latest_checkpoint(run))["step"] == steps_before + 2
    assert not list((run / "checkpoints").glob(".*"))  # leftovers of the killed runs were cleaned


def test_remove_checkpoint_hides_before_deleting(tmp_path, tokenizer):
    ckpt = fake_checkpoint(tmp_path / "run", 1, tokenizer)
    checkpoint.remove_checkpoint(ckpt)
    assert not ckpt.exists() and not list(ckpt.parent.iterdir())
    shutil.rmtree(tmp_path / "run")


# ---------------------------------------------------------------- verified like shards
def _flip(path: Path, offset: int = -5) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_manifest_hashes_every_file_and_a_flipped_byte_is_refused_by_name(tmp_path, tokenizer):
    ckpt = fake_checkpoint(tmp_path / "run", 3, tokenizer)
    manifest = json.loads((ckpt / "manifest.json").read_text())
    assert {e["name"] for e in manifest["files"]} == set(checkpoint.FILES)
    for e in manifest["files"]:
        assert e["bytes"] == (ckpt / e["name"]).stat().st_size and e["sha256"] == atomic.sha256_file(ckpt / e["name"])
    _flip(ckpt / "model.safetensors")  # in the last tensor's data: safetensors itself would load it
    with pytest.raises(MapnetError, match=r"model\.safetensors does not match its sha256"):
        checkpoint.resolve_checkpoint(tmp_path / "run")
    with pytest.raises(MapnetError, match=r"model\.safetensors does not match its sha256"):
        checkpoint.load_model(ckpt)
    checkpoint.verify(ckpt, "size")  # size-only, as shard.verify = "size", lets it through
    (ckpt / "state.pt").write_bytes((ckpt / "state.pt").read_bytes()[:-10])
    with pytest.raises(MapnetError, match=r"state\.pt has \d+ bytes, manifest\.json says \d+"):
        checkpoint.verify(ckpt, "size")
    other = fake_checkpoint(tmp_path / "run2", 3, tokenizer)
    (other / "tokenizer.json").unlink()
    with pytest.raises(MapnetError, match=r"checkpoint file missing: .*tokenizer\.json"):
        checkpoint.verify(other, "size")


def test_checkpoint_without_manifest_is_refused_in_one_line(tmp_path, tokenizer):
    ckpt = fake_checkpoint(tmp_path / "run", 3, tokenizer)
    (ckpt / "manifest.json").unlink()
    for load in (checkpoint.load_model, lambda c: checkpoint.verify(c, "size")):
        with pytest.raises(MapnetError) as exc:
            load(ckpt)
        assert str(exc.value) == (
            f"{ckpt} has no manifest.json, which every mapnet checkpoint has: it cannot be "
            "verified (damaged, or not written by mapnet)"
        )
    with pytest.raises(MapnetError, match="has no manifest.json"):
        checkpoint.resolve_checkpoint(tmp_path / "run")
    (ckpt / "manifest.json").write_text("{not json")
    with pytest.raises(MapnetError, match="manifest.json is unreadable"):
        checkpoint.load_model(ckpt)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_unreadable_weights_and_state_are_one_line_errors(tmp_path, tokenizer, damage):
    ckpt = fake_checkpoint(tmp_path / "run", 3, tokenizer)
    for name in ("model.safetensors", "state.pt"):
        data = (ckpt / name).read_bytes()
        (ckpt / name).write_bytes(
            {"truncated": data[: len(data) // 2], "garbage": b"\x07garbage" * 50, "empty": b""}[damage]
        )
    checkpoint.write_manifest(ckpt)  # past the manifest: the loaders themselves must not raise a traceback
    with pytest.raises(MapnetError, match=r"model\.safetensors is not a readable safetensors file") as exc:
        checkpoint.load_model(ckpt)
    assert "\n" not in str(exc.value)
    with pytest.raises(MapnetError, match=r"state\.pt is unreadable") as exc:
        checkpoint.load_state(ckpt)
    assert "\n" not in str(exc.value) and len(str(exc.value)) < 400


def test_equal_weights_give_equal_bytes(tmp_path):
    """safetensors writes metadata in a per-call random order; sorted, equal models hash equal."""
    torch.manual_seed(0)
    model, other = BertForMLM(CFG), nn.Module()
    other.proj = nn.Linear(16, 1)
    blobs = set()
    for i in range(8):
        checkpoint.save_weights(tmp_path / f"w{i}.safetensors", {"": model, "mapnet": other})
        blobs.add((tmp_path / f"w{i}.safetensors").read_bytes())
    assert len(blobs) == 1
    checkpoint.load_weights(tmp_path / "w0.safetensors", {"": BertForMLM(CFG)})  # still a valid file
