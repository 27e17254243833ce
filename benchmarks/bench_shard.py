"""Throughput and memory of `mapnet shard` on ~20 MB of real text.

    uv run python benchmarks/bench_shard.py                  # ../shared/data, work dir /tmp/mapnet-bench-shard
    uv run python benchmarks/bench_shard.py --mb 5 --work /tmp/b

Preprocesses a ~20 MB slice of ../shared/data (all NLTK Gutenberg books, then
Wikipedia files) once, outside the timing, and caches it in the work dir.
Then runs shard in a fresh process per configuration -- 1 and 2 encoding
workers, each worker single-threaded -- and prints MB/s, sentences/s and
peak RSS. The 8x corpus repeats the same part files eight times (shard does
not care that text repeats): peak RSS must stay flat as the corpus grows.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MAPNET_SHARED_DATA", REPO.parent / "shared" / "data"))


def slice_inputs(mb: float) -> list[Path]:
    """Books first, then Wikipedia files, until `mb` MB of uncompressed text."""
    files = sorted((DATA / "books").glob("*.txt.gz")) + sorted(
        (DATA / "wiki-articles/enwiki-2015-wikiextractor").glob("*.gz")
    )
    chosen, total = [], 0
    for f in files:
        if total >= mb * 1e6:
            break
        chosen.append(f)
        total += len(gzip.open(f).read())
    return chosen


def preprocess(work: Path, mb: float) -> Path:
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.settings import resolve

    prep = work / f"prep-{mb:g}mb"
    if not (prep / "manifest.json").is_file():
        print(f"preprocessing a {mb:g} MB slice of {DATA} (once, cached in {prep}) ...", flush=True)
        t = time.time()
        run_preprocess(slice_inputs(mb), prep, resolve(None, {}), overwrite=True)
        print(f"  done in {time.time() - t:.0f} s", flush=True)
    return prep


def replicate(prep: Path, times: int) -> Path:
    """A preprocessed folder whose parts are `prep`'s parts repeated `times` times (hard links)."""
    out = prep.with_name(f"{prep.name}-x{times}")
    if (out / "manifest.json").is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    (out / "sentences").mkdir(parents=True)
    manifest = json.loads((prep / "manifest.json").read_text())
    parts = []
    for k in range(times):
        for p in manifest["parts"]:
            name = f"sentences/rep{k}-{Path(p['name']).name}"
            os.link(prep / p["name"], out / name)
            parts.append({**p, "name": name})
    manifest["parts"] = parts
    shutil.copy(prep / "tokenizer.json", out / "tokenizer.json")
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def child(prep: str, out: str, workers: int) -> None:
    """Runs in a fresh process: one shard run, then its figures as one JSON line."""
    from mapnet_cli.data.shard_writer import run_shard
    from mapnet_cli.settings import resolve

    settings = resolve(None, {"shard": {"workers": workers}})
    t = time.perf_counter()
    summary = run_shard(prep, out, settings, overwrite=True)
    seconds = time.perf_counter() - t
    print(
        json.dumps(
            {
                "seconds": seconds,
                "bytes": summary["bytes"],
                "sentences": summary["sentences"],
                "workers": summary["workers"],
                "padding": summary["manifest"]["splits"]["train"]["padding_fraction"],
                "rss_main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            }
        )
    )


def run(prep: Path, out: Path, workers: int) -> dict:
    # One thread per worker: the tokenizers thread pool would otherwise use every core in-process.
    env = {**os.environ, "RAYON_NUM_THREADS": "1"}
    cmd = [sys.executable, __file__, "--child", str(prep), str(out), str(workers)]
    done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0, help="size of the real-text slice")
    ap.add_argument("--work", type=Path, default=Path("/tmp/mapnet-bench-shard"))
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    prep = preprocess(args.work, args.mb)
    big = replicate(prep, 8)
    rows = []
    for corpus, label in ((prep, "1x"), (big, "8x")):
        for workers in (1, 2):
            r = run(corpus, args.work / "shards", workers)
            rows.append((label, r))
            print(f"  {label} workers={workers}: {r['seconds']:.1f} s", flush=True)
    shutil.rmtree(args.work / "shards", ignore_errors=True)
    print(
        f"\nmapnet shard, max_seq_len=512, fill packing; {os.cpu_count()} CPU(s); sizes are preprocessed sentence bytes"
    )
    print(
        f"{'corpus':>7} {'MB':>7} {'workers':>7} {'MB/s':>7} {'sent/s':>9} {'peak RSS main':>14} "
        f"{'peak RSS worker':>16} {'padding':>8}"
    )
    for label, r in rows:
        print(
            f"{label:>7} {r['bytes'] / 1e6:7.1f} {r['workers']:7d} {r['bytes'] / 1e6 / r['seconds']:7.2f} "
            f"{r['sentences'] / r['seconds']:9,.0f} {r['rss_main_mb']:11.0f} MB {r['rss_worker_mb']:13.0f} MB "
            f"{r['padding']:8.4%}"
        )


if __name__ == "__main__":
    main()
