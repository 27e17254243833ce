"""Where a lever search's results are kept (experiments/hour-levers, issue 45): one folder per *series*.

    python experiments/common/levers_series.py where OUT/arms/baseline/results.json [RESULTS]  # its series (new or
    kept)
    python experiments/common/levers_series.py latest [RESULTS]                               # the newest kept series

RESULTS is the kept results folder, experiments/hour-levers/results unless given.

The search outlasts a sitting, and a lever arm is only comparable with a baseline trained beside it: equal wall time
is equal work only on a machine of the same speed, and this machine's speed drifts by more than the search can
resolve (levers_calibration.py). So the kept results are split into series, results/series-N/ARM.json with their
logs in logs/series-N/: a series is one baseline and the arms paired with it. A sitting that runs the baseline
again starts a new series (its arms are paired with that baseline, not the old one); a sitting that pairs new arms
with the kept baseline (`BASELINE=kept`, allowed only when the calibration matches) adds them to the newest series.
The baselines of later series are the same settings and seeds as the first: their difference is the drift between
sittings, and the table reports it as a row of its own.

A baseline is "the same" as a kept one when its runs are the same runs, read from what they measured (seed index,
steps bought, every evaluation's loss), not from the file's bytes: `compare` rewrites results.json when it reuses
finished runs (their `reused` flag changes), and a reused baseline must not open a new series.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments" / "hour-levers" / "results"
SERIES = re.compile(r"series-(\d+)")


def all_series(results: Path = RESULTS) -> list[Path]:
    """The kept series folders, oldest first (series-2 before series-10)."""
    found = [p for p in results.glob("series-*") if p.is_dir() and SERIES.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(SERIES.fullmatch(p.name).group(1)))


def fingerprint(doc: dict) -> list[tuple]:
    """What a compare folder's runs measured: per run its seed index, the steps it bought and its evaluation curve."""
    return sorted(
        (r["seed_index"], (r.get("budget") or {}).get("steps"), tuple((e["step"], e["eval_loss"]) for e in r["eval"]))
        for r in doc["runs"]
    )


def where(baseline: Path, results: Path = RESULTS) -> Path:
    """The series a baseline belongs to: the kept one with the same runs, else the next, new one."""
    mine = fingerprint(json.loads(baseline.read_text(encoding="utf-8")))
    kept = all_series(results)
    for folder in kept:
        doc = folder / "baseline.json"
        if doc.is_file() and fingerprint(json.loads(doc.read_text(encoding="utf-8"))) == mine:
            return folder
    last = int(SERIES.fullmatch(kept[-1].name).group(1)) if kept else 0
    return results / f"series-{last + 1}"


def main(argv: list[str]) -> int:
    if len(argv) in (2, 3) and argv[0] == "where":
        print(where(Path(argv[1]), *map(Path, argv[2:])))
        return 0
    if len(argv) in (1, 2) and argv[0] == "latest":
        results = Path(argv[1]) if len(argv) == 2 else RESULTS
        kept = all_series(results)
        if not kept:
            print(f"nothing is kept under {results}", file=sys.stderr)
            return 1
        print(kept[-1])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
