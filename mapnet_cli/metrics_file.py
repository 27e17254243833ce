"""Reading a run's metrics.jsonl back (what `compare` and `plot` draw from).

    evals, trains = read_metrics(Path("runs/a/metrics.jsonl"))
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import MapnetError


def read_metrics(path: Path) -> tuple[list[dict], list[dict]]:
    """(eval lines, train lines) in step order; for a repeated step the later line wins (a resume).

    An unparsable last line is what a run killed mid-write (or stopped by a full disk) leaves: it is
    skipped, as `--resume` drops it. One anywhere else is a one-line error naming the file and line."""
    kinds: dict[str, dict[int, dict]] = {"eval": {}, "train": {}}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise MapnetError(f"{path} is not UTF-8 text ({exc}): is it a metrics file?") from None
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError(f"a JSON {type(record).__name__}, not an object")
            if record.get("kind") in kinds:
                kinds[record["kind"]][int(record["step"])] = record
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines) and isinstance(exc, ValueError):
                continue  # a torn last line from a killed run
            raise MapnetError(f"{path}, line {number}: not a metrics record ({type(exc).__name__}: {exc})") from None
    return [kinds["eval"][k] for k in sorted(kinds["eval"])], [kinds["train"][k] for k in sorted(kinds["train"])]


def read_unigram(path: Path) -> dict | None:
    """The run's "unigram" record (its plateau levels, written once at step 0), or None for runs from
    before mapnet wrote it."""
    for line in path.read_text(encoding="utf-8").splitlines()[:20]:  # written before the first evaluation
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("kind") == "unigram":
            return {k: v for k, v in record.items() if k not in ("kind", "step")}
    return None


__all__ = ["read_metrics", "read_unigram"]
