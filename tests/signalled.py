"""A `mapnet pretrain` process sent a stop signal mid-run, for the tests of train/stop_signals.py."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path


def signal_once_training(
    cmd: list[str],
    out: Path,
    env: dict[str, str] | None = None,
    within: float = 120.0,
    signum: int = signal.SIGTERM,
    after_step: int = 1,
) -> tuple[int, str]:
    """Start `cmd` (a pretrain into `out`), send it `signum` once `out`/metrics.jsonl holds a training line of step
    `after_step` or later, and return (its exit status, its stderr). The process never outlives the call, whatever
    fails."""
    import json

    def trained() -> bool:
        lines = metrics.read_text().splitlines() if metrics.is_file() else []
        return any(
            r.get("kind") == "train" and r["step"] >= after_step
            for r in map(json.loads, lines[:-1] if lines and not lines[-1].endswith("}") else lines)
        )

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    metrics = out / "metrics.jsonl"
    try:
        deadline = time.monotonic() + within
        while not trained():  # training has begun
            assert proc.poll() is None and time.monotonic() < deadline, f"no training step within {within:.0f} s"
            time.sleep(0.1)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    return proc.returncode, err


def stopped_step(line: str) -> int:
    """N of a `stopped by SIGNAL after step N; ...` line."""
    return int(line.split("after step ")[1].split(";")[0])
