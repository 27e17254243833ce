"""Preprocess throughput and memory on real text from ../shared/data.

    uv run python benchmarks/bench_preprocess.py                 # 20 MB slice; 1 and 2 workers; RSS at 1x and 8x
    uv run python benchmarks/bench_preprocess.py --mb 5 --scale 4  # quicker

Each run is a separate process (so peak RSS is that run's alone); RSS is the
sum over the main process and its workers, sampled every 0.1 s. The 8x run
feeds the same slice 8 times: flat RSS means memory does not grow with corpus
size. MB/s counts UTF-8 text handed to the sentence splitter (uncompressed),
over the sentence stage (spaCy + Moses), process start-up included.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MAPNET_SHARED_DATA", REPO.parent / "shared" / "data"))


def gzip_size(path: Path) -> int:
    """Uncompressed size from the gzip trailer (ISIZE; exact below 4 GiB)."""
    with open(path, "rb") as fh:
        fh.seek(-4, 2)
        return struct.unpack("<I", fh.read(4))[0]


def slice_of(mb: float) -> list[Path]:
    """About `mb` MB of uncompressed text: half Wikipedia (WikiExtractor), half Gutenberg books."""
    pools = [
        sorted((DATA / "wiki-articles" / "enwiki-2015-wikiextractor").glob("*.txt.gz")),
        sorted((DATA / "gutenberg").glob("*.txt.gz")),
    ]
    picked, total = [], [0, 0]
    for i, pool in enumerate(pools):
        for path in pool:
            if total[i] >= mb * 1e6 / 2:
                break
            picked.append(path)
            total[i] += gzip_size(path)
    return picked


def child(args) -> None:
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.settings import resolve

    inputs = json.loads(Path(args.inputs).read_text())
    settings = resolve(
        overrides={"preprocess": {"workers": args.workers, "strip_gutenberg": True, "doc_separator": "file"}}
    )
    r = run_preprocess(inputs, args.out, settings)
    print(
        json.dumps(
            {
                "text_bytes": r.text_bytes,
                "sentences": r.sentences,
                "sentence_seconds": r.sentence_seconds,
                "seconds": r.seconds,
                "documents": r.documents,
                "words": r.words,
            }
        )
    )


def measure(inputs: list[Path], workers: int, tmp: Path, tag: str) -> dict:
    listing = tmp / f"{tag}.json"
    listing.write_text(json.dumps([str(p) for p in inputs]))
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--child",
            "--inputs",
            str(listing),
            "--workers",
            str(workers),
            "--out",
            str(tmp / tag),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    parent, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            tree = [parent, *parent.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.1)
    out = proc.stdout.read()
    if proc.returncode != 0:
        raise SystemExit(f"{tag} failed with exit code {proc.returncode}")
    result = json.loads(out.strip().splitlines()[-1])
    result["peak_rss_mb"] = peak / 2**20
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=20.0, help="slice size in MB of uncompressed text")
    ap.add_argument("--scale", type=int, default=8, help="the memory run feeds the slice this many times (0: skip)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--inputs", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    inputs = slice_of(args.mb)
    print(
        f"slice: {len(inputs)} files, {sum(map(gzip_size, inputs)) / 1e6:.1f} MB uncompressed "
        f"({os.cpu_count()} CPU cores on this machine; load average {os.getloadavg()[0]:.1f})"
    )
    runs = [(f"1x, {w} worker(s)", inputs, w) for w in (1, 2)]
    if args.scale > 1:
        runs.append((f"{args.scale}x, 2 workers", inputs * args.scale, 2))
    print(
        f"{'run':<20} {'text MB':>8} {'MB/s':>6} {'sent/s':>8} {'sentences':>10} {'stage s':>8} {'total s':>8} "
        f"{'peak RSS MB':>12}"
    )
    with tempfile.TemporaryDirectory(prefix="bench-preprocess-") as tmp:
        for i, (name, files, workers) in enumerate(runs):
            r = measure(files, workers, Path(tmp), f"run{i}")
            mb = r["text_bytes"] / 1e6
            print(
                f"{name:<20} {mb:8.1f} {mb / r['sentence_seconds']:6.2f} {r['sentences'] / r['sentence_seconds']:8.0f} "
                f"{r['sentences']:10,} {r['sentence_seconds']:8.1f} {r['seconds']:8.1f} {r['peak_rss_mb']:12.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
