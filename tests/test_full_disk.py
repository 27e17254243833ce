"""A full disk part-way through a write: one line naming what was being written, the previous output
intact, no temp file or staging folder left behind.

The disk is simulated: every file opened for writing from Python (`open`, `os.fdopen`) shares a budget
of bytes; the write that crosses it lands in part and then raises OSError(ENOSPC), as a real full disk does.
Writers in native code (safetensors, Arrow) report a full disk in their own words; `out_of_space`
reads those (checked on a real full tmpfs when this was written, see docs/reliability.md).
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli import atomic
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint


class _FillingFile:
    def __init__(self, fh, disk: FullDisk):
        self._fh, self._disk = fh, disk

    def write(self, data):
        room = self._disk.room
        if room is not None and len(data) > room:
            if room:
                self._fh.write(data[:room])
                self._fh.flush()
            self._disk.room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if room is not None:
            self._disk.room -= len(data)
        self._disk.written += len(data)
        return self._fh.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    def __iter__(self):
        return iter(self._fh)

    def __getattr__(self, name):
        return getattr(self._fh, name)


class FullDisk:
    """Files opened for writing get `room` bytes between them (None: unlimited, just count `written`)."""

    def __init__(self, monkeypatch, room: int | None):
        self.room, self.written = room, 0
        real_open, real_fdopen = builtins.open, os.fdopen

        def writing(mode) -> bool:
            return any(c in str(mode) for c in "wax+")

        def fake_open(file, mode="r", *args, **kwargs):
            fh = real_open(file, mode, *args, **kwargs)
            return _FillingFile(fh, self) if writing(mode) and not isinstance(file, int) else fh

        def fake_fdopen(fd, mode="r", *args, **kwargs):
            fh = real_fdopen(fd, mode, *args, **kwargs)
            return _FillingFile(fh, self) if writing(mode) else fh

        monkeypatch.setattr(builtins, "open", fake_open)
        monkeypatch.setattr(io, "open", fake_open)
        monkeypatch.setattr(os, "fdopen", fake_fdopen)


def leftovers(root: Path) -> list[Path]:
    """Temp files and staging folders: hidden names with .tmp in them."""
    return [p for p in root.rglob(".*") if ".tmp" in p.name]


# ---------------------------------------------------------------- the writers, in-process
@pytest.mark.parametrize("room", [0, 5, 40])
def test_a_full_disk_keeps_the_previous_file_and_leaves_no_temp_file(tmp_path, monkeypatch, room):
    path = tmp_path / "results.json"
    atomic.write_json(path, {"old": True})
    before = path.read_bytes()
    FullDisk(monkeypatch, room)
    with pytest.raises(MapnetError) as exc:
        atomic.write_json(path, {"new": "x" * 100})
    assert str(exc.value) == f"no space left on device while writing {path}"
    assert path.read_bytes() == before and list(tmp_path.iterdir()) == [path]


def test_a_full_disk_while_staging_a_folder_publishes_nothing_and_names_the_file(tmp_path, monkeypatch):
    final = tmp_path / "shards"
    with atomic.staged_output(final) as staging:
        atomic.write_text(staging / "manifest.json", "old")
    FullDisk(monkeypatch, 10)
    with pytest.raises(MapnetError) as exc:
        with atomic.staged_output(final, overwrite=True) as staging:
            (staging / "part-0").write_bytes(b"0123456789")  # fills the disk exactly
            atomic.write_text(staging / "manifest.json", "new")
    # named where it would have been published, not by its hidden staging path
    assert str(exc.value) == f"no space left on device while writing {final / 'manifest.json'}"
    assert [p.name for p in tmp_path.iterdir()] == ["shards"] and (final / "manifest.json").read_text() == "old"
    assert [p.name for p in final.iterdir()] == ["manifest.json"]
    with pytest.raises(MapnetError, match=f"no space left on device while writing {tmp_path / 'other'}$"):
        with atomic.staged_output(tmp_path / "other") as staging:
            with open(staging / "part-0", "wb") as fh:  # a writer of its own (preprocess' parts)
                fh.write(b"x")
    assert [p.name for p in tmp_path.iterdir()] == ["shards"]


def test_full_disk_errors_are_recognised_through_the_libraries_wrappers():
    enospc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert atomic.out_of_space(enospc) == "no space left on device"
    assert atomic.out_of_space(OSError(errno.EDQUOT, "Disk quota exceeded")) == "disk quota exceeded"
    # safetensors keeps only the text; pyarrow puts errno 28 in its OSError; torch.save chains it
    assert atomic.out_of_space(Exception("Error while serializing: I/O error: No space left on device (os error 28)"))
    assert atomic.out_of_space(OSError(28, "Error writing bytes to file. Detail: [errno 28] No space left on device"))
    try:
        try:
            raise enospc
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:671] . unexpected pos 704 vs 598")  # noqa: B904 (the implicit chain is what is read)
    except RuntimeError as wrapped:
        assert atomic.out_of_space(wrapped) == "no space left on device"
    assert atomic.out_of_space(OSError(errno.EACCES, "Permission denied")) is None
    assert atomic.out_of_space(RuntimeError("unexpected pos 704 vs 598")) is None


def test_a_checkpoint_that_does_not_fit_is_not_published(tmp_path, monkeypatch):
    import torch

    tokenizer = write_tiny_shards(tmp_path / "shards") / "tokenizer.json"
    run, model, cfg = tmp_path / "run", torch.nn.Linear(2, 2), checkpoint.BertConfig(vocab_size=64)
    old = checkpoint.save_checkpoint(run, 3, {"": model}, {"optimizer": {}}, cfg, "", tokenizer, "x")
    FullDisk(monkeypatch, 1000)  # state.pt (torch.save through a Python file) is larger
    with pytest.raises(MapnetError) as exc:
        checkpoint.save_checkpoint(
            run, 9, {"": model}, {"optimizer": {}, "big": torch.zeros(4096)}, cfg, "", tokenizer, "x"
        )
    assert str(exc.value) == f"no space left on device while writing {run / 'checkpoints' / 'step-00000009'}"
    assert checkpoint.latest_checkpoint(run) == old and not leftovers(run)


# ---------------------------------------------------------------- through the CLI
SMALL = [
    "--preset",
    "tiny",
    "--steps",
    "2",
    "--set",
    "model.max_position=32",
    "--set",
    "shard.max_seq_len=32",
    "--set",
    "train.batch_size=8",
    "--set",
    "train.eval_sequences=8",
    "--set",
    "optim.warmup.steps=1",
    "--set",
    "logging.progress=false",
    "--set",
    "train.eval_every=1",
]


def lines(run: Path) -> list[tuple]:
    return [(r["kind"], r["step"]) for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())]


def snapshot(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_full_disk_during_a_resumed_run_is_one_line_and_loses_nothing(tmp_path, monkeypatch):
    """`pretrain --resume` to step 4 with the disk filling at several points: before the first write,
    inside the metrics log, inside the new checkpoint. Every time: one line, exit 2, the step-2 checkpoint
    and every earlier file as they were (metrics.jsonl may gain a torn line, which resume drops)."""
    shards = write_tiny_shards(tmp_path / "shards")
    base = tmp_path / "base"
    runner = CliRunner()
    assert runner.invoke(app, ["pretrain", str(shards), "--out", str(base), *SMALL]).exit_code == 0
    resume = ["--resume", "--steps", "4"]

    # How many bytes a resumed run writes through Python, to place the failures inside it.
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    disk = FullDisk(monkeypatch, None)
    assert runner.invoke(app, ["pretrain", str(shards), "--out", str(probe), *SMALL, *resume]).exit_code == 0
    total = disk.written
    monkeypatch.undo()
    assert total > 10_000

    for k, room in enumerate([0, 200, total // 2, total - 100]):
        run = tmp_path / f"run{k}"
        shutil.copytree(base, run)
        before = snapshot(run)
        FullDisk(monkeypatch, room)
        res = runner.invoke(app, ["pretrain", str(shards), "--out", str(run), *SMALL, *resume])
        monkeypatch.undo()
        assert isinstance(res.exception, MapnetError), (room, res.exception, res.output)
        text = str(res.exception)
        assert "\n" not in text and text.startswith("no space left on device while writing ") and str(run) in text
        assert not leftovers(run), (room, leftovers(run))
        assert checkpoint.latest_checkpoint(run).name == "step-00000002"
        after = snapshot(run)
        for name, data in before.items():
            if name == "metrics.jsonl":
                assert after[name].startswith(data), room
            elif name.startswith("checkpoints"):  # run.json, settings.toml: replaced whole (atomically) by resume
                assert after[name] == data, (room, name)
        json.loads(after["run.json"])  # whole, never torn
        # and the run continues once there is room again
        res = runner.invoke(app, ["pretrain", str(shards), "--out", str(run), *SMALL, *resume])
        assert res.exit_code == 0, (room, res.output)
        assert checkpoint.latest_checkpoint(run).name == "step-00000004"
        assert lines(run) == lines(probe), room  # the same log as a resume that never ran out of space


def test_export_onto_a_full_disk_leaves_no_folder(tmp_path, monkeypatch):
    shards = write_tiny_shards(tmp_path / "shards")
    runner = CliRunner()
    assert runner.invoke(app, ["pretrain", str(shards), "--out", str(tmp_path / "run"), *SMALL]).exit_code == 0
    FullDisk(monkeypatch, 0)
    res = runner.invoke(app, ["export", str(tmp_path / "run"), "--out", str(tmp_path / "hf")])
    assert isinstance(res.exception, MapnetError), res.output
    assert str(res.exception).startswith(f"no space left on device while writing {tmp_path / 'hf'}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "shards"]
