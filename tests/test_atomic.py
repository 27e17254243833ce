"""Crash-safe outputs: a folder is published whole or not at all."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mapnet_cli import atomic
from mapnet_cli.errors import MapnetError


def test_staged_output_publishes_on_success(tmp_path):
    final = tmp_path / "out"
    with atomic.staged_output(final) as staging:
        assert staging.parent == tmp_path and staging.name.startswith(".out.") and not final.exists()
        atomic.write_text(staging / "manifest.json", "{}")
    assert (final / "manifest.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging left behind


def test_staged_output_leaves_nothing_on_failure(tmp_path):
    final = tmp_path / "out"
    with pytest.raises(RuntimeError):
        with atomic.staged_output(final) as staging:
            (staging / "part").write_text("half")
            raise RuntimeError("killed mid-way")
    assert list(tmp_path.iterdir()) == []


def test_staged_output_never_replaces_an_output_that_appeared_meanwhile(tmp_path):
    final = tmp_path / "out"
    with pytest.raises(MapnetError, match="appeared while it was being written"):
        with atomic.staged_output(final) as staging:
            (staging / "new").write_text("x")
            final.mkdir()
            (final / "old").write_text("keep")
    assert [p.name for p in final.iterdir()] == ["old"] and len(list(tmp_path.iterdir())) == 1
    with atomic.staged_output(final, overwrite=True) as staging:
        (staging / "new").write_text("x")
    assert [p.name for p in final.iterdir()] == ["new"]


def test_stale_staging_of_a_dead_process_is_removed(tmp_path):
    stale = tmp_path / ".out.abc.tmp-999999999"  # no such pid
    stale.mkdir()
    atomic.clean_stale(tmp_path / "out")
    assert not stale.exists()


def test_written_files_get_ordinary_permissions(tmp_path):
    atomic.write_json(tmp_path / "a.json", {"x": float("nan")} | {"y": 1})
    mode = os.stat(tmp_path / "a.json").st_mode & 0o777
    assert mode == 0o666 & ~atomic._umask()
    assert atomic.json_safe({"a": [float("inf"), 1.0]}) == {"a": [None, 1.0]}


def test_output_folders_that_cannot_be_made_are_one_line_errors(tmp_path, monkeypatch):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    with pytest.raises(MapnetError, match=r"notes\.txt is a file, not a folder"):
        atomic.make_dirs(a_file / "deeper" / "out")
    with pytest.raises(MapnetError, match=r"notes\.txt is a file, not an output folder"):
        atomic.staging_dir(a_file)  # so --overwrite never replaces a user's file with a folder
    (tmp_path / "out").mkdir()
    with pytest.raises(MapnetError, match=r"cannot write .*out: it is a folder, not a file"):
        atomic.write_text(tmp_path / "out", "x")
    assert a_file.read_text() == "keep me"

    # A read-only parent (tests run as root, where chmod does not stop writes: the OS error is simulated).
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(MapnetError, match=r"cannot create folder .*new: Permission denied"):
        atomic.make_dirs(tmp_path / "new")
    monkeypatch.undo()
    monkeypatch.setattr(atomic.tempfile, "mkstemp", refuse)
    monkeypatch.setattr(atomic.tempfile, "mkdtemp", refuse)
    with pytest.raises(MapnetError, match=r"cannot write .*f\.json: Permission denied"):
        atomic.write_json(tmp_path / "f.json", {})
    with pytest.raises(MapnetError, match=r"cannot write .*folder: Permission denied"):
        atomic.staging_dir(tmp_path / "folder")
