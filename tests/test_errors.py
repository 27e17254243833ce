"""The one error line and the one warning line name their paths as they are, markup characters included."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import warn
from mapnet_cli.model import checkpoint

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
]


def test_a_warning_keeps_brackets_in_paths(capsys):
    warn("/runs/[exp1]/[bold]x has no manifest.json")
    assert capsys.readouterr().err == "warning: /runs/[exp1]/[bold]x has no manifest.json\n"


@pytest.mark.slow
def test_errors_name_paths_as_they_are_and_a_checkpoint_without_manifest_is_refused(tmp_path):
    """A run folder named like rich markup: the error lines must still name it exactly."""
    shards = write_tiny_shards(tmp_path / "shards")
    run = tmp_path / "[exp1] run"
    assert CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(run), *SMALL]).exit_code == 0
    ckpt = checkpoint.latest_checkpoint(run)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    cmd = [sys.executable, "-m", "mapnet_cli.cli", "export", str(run), "--out", str(tmp_path / "[hf]")]
    first = CliRunner().invoke(app, cmd[3:])  # in this process: only the refusals below need the shell's stderr
    assert first.exit_code == 0, first.output
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert f"error: {tmp_path / '[hf]'} already exists (pass --overwrite to replace it)" in again.stderr.splitlines()
    (ckpt / "manifest.json").unlink()
    refused = subprocess.run([*cmd, "--overwrite"], capture_output=True, text=True, env=env, timeout=300)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert (
        f"error: {ckpt} has no manifest.json, which every mapnet checkpoint has: it cannot be verified "
        "(damaged, or not written by mapnet)"
    ) in refused.stderr.splitlines()
