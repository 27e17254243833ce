"""`preprocess` and `shard` on the Dask engine beside the local pool, on real text from ../shared/data.

    uv run python benchmarks/bench_engine.py                 # 8 MB slice; local pool and Dask, 1 and 2 workers
    uv run python benchmarks/bench_engine.py --mb 1          # a quick look (what the docs' first run used)

Each run is a separate process: `preprocess` then `shard` of its output, with `--engine local` (the process
pool) or `--engine dask` (a local cluster of that many single-threaded worker processes, started by the run,
one task per input file). Reported per run: MB/s and sentences/s of the sentence stage (spaCy + Moses; for
Dask, cluster start-up included, shown apart as "start s"), shard MB/s, the peak RSS of the largest worker
process and of the main process (sampled every 0.1 s), and the scheduling overhead per task:
(stage time - start-up) x workers - the tasks' own seconds, over the number of tasks. The load average is
printed before and after: numbers from a busy machine are not the per-worker rate (docs/data.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_preprocess import gzip_size, slice_of  # noqa: E402  (the same real-text slice as the local benchmark)

REPO = Path(__file__).resolve().parents[1]


def child(args) -> None:
    import contextlib

    from mapnet_cli.data import preprocess_tasks
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.data.shard_writer import run_shard
    from mapnet_cli.settings import resolve

    timing = {"start_seconds": 0.0}
    real_engine = preprocess_tasks.dask_engine

    @contextlib.contextmanager
    def timed_engine(*a, **k):
        began = time.perf_counter()
        with real_engine(*a, **k) as engine:
            timing["start_seconds"] = time.perf_counter() - began
            yield engine

    preprocess_tasks.dask_engine = timed_engine
    preprocess_tasks.remove_tasks_folder = lambda out: None  # keep the task records: their seconds are read below
    inputs = json.loads(Path(args.inputs).read_text())
    settings = resolve(
        overrides={
            "preprocess": {"workers": args.workers, "strip_gutenberg": True, "doc_separator": "file"},
            "shard": {"workers": args.workers, "split_unit": "sequence"},
            "engine": {"name": args.engine},
        }
    )
    out = Path(args.out)
    r = run_preprocess(inputs, out, settings)
    task_seconds = [
        json.loads(p.read_text())["seconds"] for p in (out.parent / f".{out.name}.tasks").glob("task-*.json")
    ]
    began = time.perf_counter()
    s = run_shard(out, out.with_name(out.name + "-shards"), settings)
    shard_seconds = time.perf_counter() - began
    print(
        json.dumps(
            {
                "text_bytes": r.text_bytes,
                "sentences": r.sentences,
                "sentence_seconds": r.sentence_seconds,
                "tasks": r.tasks,
                "task_seconds": sum(task_seconds),
                "workers": r.workers,
                **timing,
                "shard_bytes": s["bytes"],
                "shard_seconds": shard_seconds,
            }
        )
    )


def measure(inputs: list[Path], engine: str, workers: int, tmp: Path, tag: str) -> dict:
    listing = tmp / f"{tag}.json"
    listing.write_text(json.dumps([str(p) for p in inputs]))
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--child",
            "--inputs",
            str(listing),
            "--engine",
            engine,
            "--workers",
            str(workers),
            "--out",
            str(tmp / tag),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    parent = psutil.Process(proc.pid)
    peak: dict[int, int] = {}
    while proc.poll() is None:
        try:
            for p in [parent, *parent.children(recursive=True)]:
                peak[p.pid] = max(peak.get(p.pid, 0), p.memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.1)
    out = proc.stdout.read()
    if proc.returncode != 0:
        raise SystemExit(f"{tag} failed with exit code {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result["main_rss_mb"] = peak.get(proc.pid, 0) / 2**20
    # Dask's nanny is a child too, but small; the worker is the largest process under the main one.
    result["worker_rss_mb"] = max((v for pid, v in peak.items() if pid != proc.pid), default=0) / 2**20
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=8.0, help="slice size in MB of uncompressed text")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--inputs", help=argparse.SUPPRESS)
    ap.add_argument("--engine", default="local", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    inputs = slice_of(args.mb)
    print(
        f"slice: {len(inputs)} files, {sum(map(gzip_size, inputs)) / 1e6:.1f} MB uncompressed "
        f"({os.cpu_count()} CPU cores; load average {os.getloadavg()[0]:.1f} before)"
    )
    print(
        f"{'run':<16} {'MB/s':>6} {'sent/s':>7} {'tasks':>5} {'stage s':>8} {'start s':>8} {'ovh/task ms':>11} "
        f"{'shard MB/s':>10} {'worker RSS MB':>13} {'main RSS MB':>11}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        for engine in ("local", "dask"):
            for workers in (1, 2):
                r = measure(inputs, engine, workers, Path(tmp), f"{engine}{workers}")
                stage = r["sentence_seconds"]
                mb = r["text_bytes"] / 1e6
                overhead = (
                    ((stage - r["start_seconds"]) * r["workers"] - r["task_seconds"]) / r["tasks"] * 1e3
                    if r["tasks"]
                    else 0.0
                )
                print(
                    f"{f'{engine}, {workers} worker(s)':<16} {mb / stage:6.2f} {r['sentences'] / stage:7.0f} "
                    f"{r['tasks']:5d} "
                    f"{stage:8.1f} {r['start_seconds']:8.1f} {overhead:11.0f} "
                    f"{r['shard_bytes'] / 1e6 / r['shard_seconds']:10.1f} "
                    f"{r['worker_rss_mb']:13.0f} {r['main_rss_mb']:11.0f}",
                    flush=True,
                )
    print(f"load average {os.getloadavg()[0]:.1f} after")


if __name__ == "__main__":
    main()
