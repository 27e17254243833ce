"""Wall time of a small comparison, serial against `--engine dask` with 2 workers of 1 thread each.

    uv run python benchmarks/bench_compare_engine.py                 # 2 strategies x 2 seeds x 200 steps of `tiny`
    uv run python benchmarks/bench_compare_engine.py --steps 400 --seeds 3

Not a timed test: run it alone on an otherwise idle machine (it prints the load before and after). The same
comparison runs three times into fresh folders: serial with 1 torch thread (each run's work exactly as a worker
does it), serial with all the machine's threads (what a one-process `compare` gets), and on a local Dask cluster
of 2 single-threaded workers (`--engine dask`). It prints each wall time, the speed-ups, the cluster's start-up
(a trivial task on a fresh cluster, every worker importing mapnet and torch), and each run's training seconds in
each way: on a worker beside another run a step can be slower than alone (cores that share what a step is bound by),
which is not scheduling overhead and is printed apart from it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

TINY = [
    "--preset",
    "tiny",
    "--set",
    "train.eval_every=100",
    "--set",
    "train.eval_sequences=64",
    "--set",
    "logging.progress=false",
]


def timed(argv: list[str], threads: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mapnet_cli.cli", *argv], env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stderr[-2000:]}")
    return time.perf_counter() - start


def training_seconds(out: Path) -> dict[str, float]:
    """Each run's training time (its metrics.jsonl's last train `elapsed`), by run folder."""
    import json

    found = {}
    for metrics in sorted(out.glob("runs/*/seed-*/metrics.jsonl")):
        rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        found[str(metrics.parent.relative_to(out / "runs"))] = [r for r in rows if r["kind"] == "train"][-1]["elapsed"]
    return found


def cluster_start(workers: int) -> float:
    code = (
        "import time; s = time.perf_counter()\n"
        "from mapnet_cli.data.engine import dask_engine\nfrom mapnet_cli.settings import EngineSettings\n"
        f"with dask_engine(EngineSettings(name='dask'), None, {workers}) as e:\n"
        f"    list(e.run(abs, [-1] * {workers}, 'start'))\nprint(time.perf_counter() - s)"
    )
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--strategies", default="uniform,mapnet")
    a = ap.parse_args()
    from tiny_shards import write_tiny_shards

    cores = os.cpu_count() or 1
    print(f"load before: {os.getloadavg()}; {cores} cores; {a.strategies} x {a.seeds} seeds x {a.steps} steps of tiny")
    with tempfile.TemporaryDirectory() as tmp:
        shards = write_tiny_shards(Path(tmp) / "shards", train=2048, valid=128, seq_len=128, vocab_size=512)
        base = [
            "compare",
            str(shards),
            "--strategies",
            a.strategies,
            "--seeds",
            str(a.seeds),
            "--steps",
            str(a.steps),
            *TINY,
        ]
        runs = len(a.strategies.split(",")) * a.seeds
        serial_1 = timed([*base, "--out", f"{tmp}/serial-1"], 1)
        serial_n = timed([*base, "--out", f"{tmp}/serial-{cores}"], cores)
        dask = timed(
            [
                *base,
                "--out",
                f"{tmp}/dask",
                "--engine",
                "dask",
                "--set",
                "engine.workers=2",
                "--set",
                "engine.threads=1",
            ],
            1,
        )
        start = cluster_start(2)
        trained = {name: training_seconds(Path(tmp) / name) for name in ("serial-1", f"serial-{cores}", "dask")}
    print(f"serial, 1 thread:          {serial_1:7.1f} s")
    print(f"serial, {cores} threads:         {serial_n:7.1f} s")
    print(
        f"--engine dask, 2 x 1:      {dask:7.1f} s   ({serial_1 / dask:.2f}x serial 1-thread, "
        f"{serial_n / dask:.2f}x serial {cores}-thread)"
    )
    print(f"local cluster start-up (2 workers, a trivial task): {start:.1f} s")
    print("training seconds per run (serial 1 thread / serial all threads / on a Dask worker beside another):")
    for run, alone in trained["serial-1"].items():
        side = trained["dask"].get(run, float("nan"))
        print(f"  {run:18} {alone:7.1f} / {trained[f'serial-{cores}'].get(run, float('nan')):7.1f} / {side:7.1f}"
              f"   (beside another: {side / alone:.2f}x alone)")  # fmt: skip
    wait = dask - sum(trained["dask"].values()) / 2
    print(f"Dask wall time beyond its runs' training shared by 2 workers: {wait:.1f} s ({wait / runs:.1f} s a run: "
          "start-up, evaluation, checkpoints, scheduling)")  # fmt: skip
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
