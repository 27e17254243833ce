"""Peak memory (and time) of the PMI-vocabulary builder as the corpus grows: bounded by --max-entries.

    uv run python benchmarks/bench_pmi_vocab.py                         # 2, 4, 8, 16 MB of Wikipedia text
    uv run python benchmarks/bench_pmi_vocab.py --mb 1 2 --max-entries 200000 4000000

Not a timed test. Feeds `pmi_vocab.build_vocabulary` (the code `mapnet pmi-vocab` runs) lower-cased,
whitespace-split lines of the Wikipedia extract in ../shared/data, in 1 MB chunks as the
preprocessed-corpus reader gives them, without the spaCy/Moses preprocessing (which would
dominate the time and does not change the counting). Each size runs in a fresh process, so the
peak RSS printed is the builder's own. With a --max-entries the corpus outgrows, the peak stays
flat and the prune floor rises; without pruning it grows with the distinct n-grams.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MAPNET_SHARED_DATA", REPO.parent / "shared" / "data"))


class WikiCorpus:
    """`mb` MB of Wikipedia lines, in the shape `build_vocabulary` reads (chunks of sentence lines)."""

    def __init__(self, mb: float):
        self.mb, self.path, self.manifest_sha256 = mb, DATA / "wiki-articles", "-"

    def chunks(self):
        budget, lines, size = self.mb * 1e6, [], 0
        for f in sorted((DATA / "wiki-articles").rglob("*.gz")):
            for raw in gzip.open(f, "rt", encoding="utf-8", errors="replace"):
                line = raw.strip().lower()
                if not line or line.startswith("<"):
                    continue
                lines.append(line)
                size += len(line) + 1
                if size >= 1 << 20 or budget <= 0:
                    yield SimpleNamespace(lines=lines, nbytes=size)
                    budget -= size
                    lines, size = [], 0
                    if budget <= 0:
                        return
        if lines:
            yield SimpleNamespace(lines=lines, nbytes=size)


def child(mb: float, max_entries: int) -> None:
    sys.path.insert(0, str(REPO))
    from mapnet_cli.masking import pmi_vocab

    start = time.perf_counter()
    vocab = pmi_vocab.build_vocabulary(WikiCorpus(mb), size=800_000, min_count=11, max_entries=max_entries)
    h = vocab.header
    print(
        json.dumps(
            {
                "mb": mb,
                "max_entries": max_entries,
                "seconds": round(time.perf_counter() - start, 2),
                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                "words": h["words"],
                "entries": h["entries"],
                "prune_floor": h["prune_floor"],
                "exact_counts": h["exact_counts"],
            }
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--max-entries", type=int, nargs="+", default=[500_000, 4_000_000])
    ap.add_argument("--child", nargs=2, metavar=("MB", "MAX_ENTRIES"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(float(args.child[0]), int(args.child[1]))
        return
    print(
        f"{'MB':>6} {'max entries':>12} {'words':>11} {'seconds':>8} {'peak RSS MB':>12} {'floor':>6} {'entries':>8} "
        "exact"
    )
    for cap in args.max_entries:
        for mb in args.mb:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(mb), str(cap)], check=True, capture_output=True, text=True
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            print(
                f"{r['mb']:>6} {r['max_entries']:>12,} {r['words']:>11,} {r['seconds']:>8} {r['peak_rss_mb']:>12} "
                f"{r['prune_floor']:>6} {r['entries']:>8,} {r['exact_counts']}",
                flush=True,
            )


if __name__ == "__main__":
    main()
