"""Run `mapnet pretrain --nproc 2` (torchrun, gloo) in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# A job someone else started would set these; the test launches its own.
_LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_NTASKS")


def pretrain_two_processes(shards: Path, out: Path, sets: list[str], preset: str = "tiny") -> None:
    args = [sys.executable, "-m", "mapnet_cli.cli", "pretrain", str(shards), "--out", str(out),
            "--preset", preset, "--nproc", "2", *[a for kv in sets for a in ("--set", kv)]]
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    # One thread per worker: two processes on a 2-core machine must not oversubscribe it.
    done = subprocess.run(args, env={**env, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
