"""The 45 BLiMP paradigms of ../shared/data/blimp cut into a half that chooses and a half that reports (issue 67).

    uv run python experiments/common/blimp_halves.py choose          # the choosing half, comma-separated
    uv run python experiments/common/blimp_halves.py report          # the reporting half
    mapnet blimp RUN --data ../shared/data/blimp --paradigms "$(python experiments/common/blimp_halves.py choose)"

Every lever decision from issue 67 on reads the choosing half only, every headline the reporting half (all 45
beside it, labelled). The rule, fixed before any run it judges (2026-12-01; docs/evaluation.md, "The
development set's two halves"): within each BLiMP field, paradigms in the order (linguistic term, UID); the
first, third, fifth ... choose, the others report. Cutting within a field and alternating along its phenomena
puts each phenomenon's paradigms on both sides where it has several (agreement, islands, binding), so the
halves ask the same kinds of question and a lever that moves one moves the other for the same reason, not
because one half holds all of a phenomenon.
The halves are cut from the data files themselves (field, linguistics_term, UID of each file's first row).
"""

from __future__ import annotations

import argparse
import json
import sys
from itertools import groupby
from pathlib import Path

BLIMP = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "blimp"
HALVES = ("choose", "report")


def paradigm_rows(folder: Path) -> list[tuple[str, str, str]]:
    """(field, linguistics_term, UID) of every paradigm file of `folder`, from each file's first row."""
    rows = []
    for path in sorted(folder.glob("*.jsonl")):
        if path.name == "models_summary.jsonl":  # the published models' scores, not a paradigm
            continue
        with path.open(encoding="utf-8") as f:
            first = json.loads(f.readline())
        rows.append((first["field"], first.get("linguistics_term", ""), first["UID"]))
    return rows


def halves(rows: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """{"choose": [UID...], "report": [UID...]}: within each field, alternate along (term, UID)."""
    out = {half: [] for half in HALVES}
    for _, in_field in groupby(sorted(rows), key=lambda row: row[0]):
        for i, (_, _, uid) in enumerate(in_field):
            out[HALVES[i % 2]].append(uid)
    return {half: sorted(uids) for half, uids in out.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("half", choices=HALVES)
    parser.add_argument("--data", type=Path, default=BLIMP, help="the BLiMP folder (default: ../shared/data/blimp)")
    args = parser.parse_args(argv)
    rows = paradigm_rows(args.data)
    if not rows:
        print(f"blimp_halves: no paradigm files in {args.data}", file=sys.stderr)
        return 2
    print(",".join(halves(rows)[args.half]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
