"""Two gloo processes on the CPU: `mapnet pretrain --nproc 2` as a user runs it, and several runs in one job.

`pretrain_two_processes` goes through the launcher (`--nproc 2` -> torchrun -> two workers). Each such job starts
torch four times (launcher, torchrun, two workers: ~15 s of CPU before the first step), so the equivalence tests
that only need the two workers' arithmetic run their runs one after another inside one torchrun job instead
(`pretrain_in_one_job`): this file, run by torchrun, makes the process group once and calls `pretrain` for each
run, which joins the group it finds (`distributed.init`) and leaves it up.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

# A job someone else started would set these; the test launches its own.
_LAUNCHER_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_NTASKS")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    # One thread per worker: two processes on a 2-core machine must not oversubscribe it.
    return {**env, "OMP_NUM_THREADS": "1"}


def pretrain_two_processes(shards: Path, out: Path, sets: list[str], preset: str | None = "tiny") -> None:
    """`mapnet pretrain SHARDS --out OUT --nproc 2`; `preset` None: no --preset (the model is --init-from's)."""
    args = [
        sys.executable,
        "-m",
        "mapnet_cli.cli",
        "pretrain",
        str(shards),
        "--out",
        str(out),
        *(["--preset", preset] if preset else []),
        "--nproc",
        "2",
        *[a for kv in sets for a in ("--set", kv)],
    ]
    done = subprocess.run(args, env=_clean_env(), capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]


def pretrain_in_one_job(
    root: Path, runs: dict[str, tuple[Path, list[str]]], preset: str = "tiny", stops: dict[str, int] | None = None
) -> dict[str, Path]:
    """Each NAME: (SHARDS, SETTINGS) trained by 2 gloo processes into root/NAME, all in one torchrun job, one
    after another; returns {NAME: run folder}. On the CPU (`train.device=cpu` appended), even on a GPU machine, as
    `--nproc` runs. `stops` {NAME: N}: that run's rank 1 is sent SIGTERM after step N, then the run is resumed
    (`_stop_on_rank_1`)."""
    stops = stops or {}
    plan = {
        name: {
            "shards": str(shards),
            "out": str(root / name),
            "preset": preset,
            "sets": [*sets, "train.device=cpu"],
            **({"rank_1_stops_after": stops[name]} if name in stops else {}),
        }
        for name, (shards, sets) in runs.items()
    }
    (root / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    args = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        __file__,
        str(root / "plan.json"),
    ]
    done = subprocess.run(args, env=_clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {name: root / name for name in runs}


def _worker(plan_file: str) -> None:
    import torch.distributed as dist

    from mapnet_cli.settings import resolve
    from mapnet_cli.train import pretrain

    plan = json.loads(Path(plan_file).read_text(encoding="utf-8"))
    dist.init_process_group("gloo")
    try:
        for run in plan.values():
            settings = resolve(None, {"model": {"preset": run["preset"]}}, run["sets"])
            if run.get("rank_1_stops_after"):
                _stop_on_rank_1(settings, run)
            else:
                pretrain(settings, run["shards"], run["out"])
            assert dist.is_initialized()  # pretrain joined the job's group and left it up for the next run
    finally:
        gc.collect()  # the runs' DDP wrappers, which hold the group, freed before it is destroyed (loop.pretrain)
        dist.destroy_process_group()


def _stop_on_rank_1(settings, run: dict) -> None:
    """Rank 1 alone is sent SIGTERM after step N: both ranks must stop at one step with one checkpoint (else the
    job hangs in a collective); the stop's message goes to OUT.stopped, then --resume finishes the run."""
    import signal
    import time

    import torch.distributed as dist

    from mapnet_cli.train import pretrain
    from mapnet_cli.train.stop_signals import Stopped

    calls = 0

    def clock() -> float:  # called at the start and end of every step: the 2N-th call ends step N
        nonlocal calls
        calls += 1
        if dist.get_rank() == 1 and calls == 2 * run["rank_1_stops_after"]:
            os.kill(os.getpid(), signal.SIGTERM)
        return time.perf_counter()

    try:
        pretrain(settings, run["shards"], run["out"], clock=clock)
        raise AssertionError("the stop signal did not stop the run")
    except Stopped as exc:
        if dist.get_rank() == 0:
            Path(run["out"] + ".stopped").write_text(f"{exc.exit_code} {exc}", encoding="utf-8")
    pretrain(settings, run["shards"], run["out"], resume=True)


if __name__ == "__main__":
    _worker(sys.argv[1])
