"""Reading a run's metrics.jsonl back (what `compare` and `plot` draw from).

evals, trains = read_metrics(Path("runs/a/metrics.jsonl"))
"""

from __future__ import annotations

import json
from pathlib import Path

from .errors import MapnetError


def read_lines(path: Path) -> list[tuple[str, dict]]:
    """Every record of a metrics file, with its line as written, in file order: the one reader of the format
    (`read_metrics`, `plot`, `compare`, `quickstart`, and `pretrain --resume`, which keeps the lines up to
    its checkpoint as they were).

    An unparsable last line is what a run killed mid-write (or stopped by a full disk) leaves: it is skipped.
    Anything else that is not a record (invalid UTF-8 anywhere: mapnet writes ASCII JSON, so no torn write
    makes it; a bad line before the last; a record without an integer step) is a one-line error naming the
    file and the line."""
    data = path.read_bytes()
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        number = data.count(b"\n", 0, exc.start) + 1
        raise MapnetError(
            f"{path}, line {number}: not UTF-8 text (byte {data[exc.start]:#04x}); mapnet writes "
            f"only ASCII JSON lines there, so the file was damaged or edited: remove that line "
            f"(and any after it), or start the run afresh"
        ) from None
    out = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError(f"a JSON {type(record).__name__}, not an object")
        except ValueError as exc:
            if number == len(lines):
                continue  # a torn last line from a killed run
            raise MapnetError(f"{path}, line {number}: not a metrics record ({type(exc).__name__}: {exc})") from None
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise MapnetError(f"{path}, line {number}: not a metrics record (its step is {step!r}, not an integer)")
        out.append((line, record))
    return out


def read_metrics(path: Path) -> tuple[list[dict], list[dict]]:
    """(eval lines, train lines) in step order; for a repeated step the later line wins (a resume).
    A torn last line is skipped, any other bad line is a one-line error (`read_lines`)."""
    kinds: dict[str, dict[int, dict]] = {"eval": {}, "train": {}}
    for _, record in read_lines(path):
        if record.get("kind") in kinds:
            kinds[record["kind"]][record["step"]] = record
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


__all__ = ["read_lines", "read_metrics", "read_unigram"]
