"""Reading a run's metrics.jsonl back (what `compare` and `plot` draw from).

    evals, trains = read_metrics(Path("runs/a/metrics.jsonl"))
"""

from __future__ import annotations

import json
from pathlib import Path


def read_metrics(path: Path) -> tuple[list[dict], list[dict]]:
    """(eval lines, train lines) in step order; for a repeated step the later line wins (a resume)."""
    kinds: dict[str, dict[int, dict]] = {"eval": {}, "train": {}}
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record.get("kind") in kinds:
            kinds[record["kind"]][record["step"]] = record
    return [kinds["eval"][k] for k in sorted(kinds["eval"])], [kinds["train"][k] for k in sorted(kinds["train"])]


__all__ = ["read_metrics"]
