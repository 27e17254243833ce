"""BLiMP minimal pairs read from a folder, and the published scores of the same paradigms.

    suite = load_suite(Path("../shared/data/blimp"), pairs_per_paradigm=200)
    suite.paradigms[0].uid, suite.paradigms[0].field, suite.paradigms[0].good[0], ...bad[0]
    suite.references["gpt2"]                     # {uid: accuracy} from models_summary.jsonl, when present

A folder holds one `<paradigm>.jsonl` per paradigm (BLiMP's release layout: one JSON object per line
with `sentence_good`, `sentence_bad`, `field`, `UID`, ...) and, optionally, the release's
`models_summary.jsonl` (per-paradigm accuracies of a 5-gram model, an LSTM, Transformer-XL and GPT-2).
Any subset of the 67 paradigms works; nothing assumes all of them. A file that is not what BLiMP
writes stops the load with one line naming the file and the line: a scorer that skipped bad lines
would report an accuracy over pairs nobody chose.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import MapnetError

SUMMARY = "models_summary.jsonl"
REQUIRED = ("sentence_good", "sentence_bad", "field", "UID")
# The published models of models_summary.jsonl, by their key there, in the order tables show them.
REFERENCE_MODELS = {"ngram": "5-gram", "lstm": "LSTM", "txl": "Transformer-XL", "gpt2": "GPT-2"}


@dataclass(frozen=True)
class Paradigm:
    uid: str
    field: str  # morphology, syntax, semantics or syntax_semantics
    term: str  # the linguistic phenomenon (linguistics_term), several paradigms share one
    good: tuple[str, ...]
    bad: tuple[str, ...]
    identical: tuple[int, ...] = ()  # file lines of pairs whose two sentences are the same (see `_paradigm`)

    def __len__(self) -> int:
        return len(self.good)


@dataclass(frozen=True)
class Suite:
    folder: Path
    paradigms: tuple[Paradigm, ...]
    pairs_per_paradigm: int  # 0: every pair of each file
    sha256: str  # of the paradigm files' bytes, in name order
    references: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> {uid: accuracy}

    @property
    def pairs(self) -> int:
        return sum(len(p) for p in self.paradigms)

    def identical_notes(self) -> list[str]:
        """One note per paradigm holding pairs of two identical sentences, naming their lines."""
        return [
            f"{p.uid}: {len(p.identical)} of {len(p)} pairs have two identical sentences (lines "
            f"{', '.join(map(str, p.identical[:5]))}{', ...' if len(p.identical) > 5 else ''}): every model ties "
            'on them and they count wrong (as in BLiMP\'s published figures); "identical" counts them'
            for p in self.paradigms
            if p.identical
        ]

    def sentences(self) -> list[str]:
        """Every distinct sentence, in first-seen order (a sentence of several pairs is scored once)."""
        return list(dict.fromkeys(s for p in self.paradigms for pair in zip(p.good, p.bad) for s in pair))


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, object) of each non-blank line."""
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise MapnetError(f"{path}: unreadable ({exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise MapnetError(f"{path}:{number}: not a JSON line ({exc})") from None
        if not isinstance(row, dict):
            raise MapnetError(f"{path}:{number}: not a JSON object")
        rows.append((number, row))
    return rows


def _paradigm(path: Path, limit: int) -> Paradigm:
    rows = _read_jsonl(path)
    if not rows:
        raise MapnetError(f"{path}: no minimal pairs in the file")
    if limit:
        rows = rows[:limit]  # BLiMP's pairs are generated at random: the first N are a fair sample
    uid = None
    good, bad = [], []
    for number, row in rows:
        missing = [k for k in REQUIRED if not isinstance(row.get(k), str) or not row[k].strip()]
        if missing:
            raise MapnetError(f"{path}:{number}: missing or empty field {', '.join(missing)}")
        if uid is None:
            uid, fld, term = row["UID"], row["field"], str(row.get("linguistics_term", ""))
        elif row["UID"] != uid:
            raise MapnetError(
                f"{path}:{number}: UID {row['UID']!r} differs from the file's first, {uid!r} (one paradigm per file)"
            )
        good.append(row["sentence_good"].strip())
        bad.append(row["sentence_bad"].strip())
    # A pair of one sentence twice is no minimal pair: every model ties on it, and a tie is wrong. BLiMP's
    # own release has two (passive_1), which its published figures count, so such pairs are kept, counted
    # ("identical" beside "ties") and named in a note; a paradigm of nothing else could only score 0%.
    identical = tuple(number for (number, _), g, b in zip(rows, good, bad) if g == b)
    if len(identical) == len(good):
        raise MapnetError(
            f"{path}: every pair ({len(good)}) has two identical sentences: not minimal pairs, every "
            "model would tie and score 0%; fix or remove the file"
        )
    return Paradigm(uid, fld, term, tuple(good), tuple(bad), identical)


def _references(path: Path, uids: set[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {k: {} for k in REFERENCE_MODELS}
    for number, row in _read_jsonl(path):
        uid = row.get("UID")
        if uid not in uids:
            continue  # aggregate rows and paradigms not in this folder
        for key in REFERENCE_MODELS:
            value = row.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise MapnetError(f"{path}:{number}: {key} of {uid} is not a number")
            # Shown beside the models as published figures: a NaN, an infinity or a percentage (50.6 for 0.506)
            # would print as one ("5-gram 5060%").
            if not 0.0 <= value <= 1.0:  # False for NaN too
                raise MapnetError(
                    f"{path}:{number}: {key} of {uid} is {value!r}, not an accuracy: the published "
                    "figures are fractions between 0 and 1 (BLiMP writes 0.439 for 43.9%)"
                )
            out[key][uid] = float(value)
    return {k: v for k, v in out.items() if v}


def load_suite(folder: Path, pairs_per_paradigm: int = 0, only: list[str] | None = None) -> Suite:
    """The paradigms of `folder` (sorted by name), the first `pairs_per_paradigm` pairs of each (0: all);
    `only`: these paradigm names (file stems), each of which must be there."""
    folder = Path(folder)
    if pairs_per_paradigm < 0:
        raise MapnetError(f"pairs per paradigm must be >= 0 (got {pairs_per_paradigm})")
    if not folder.is_dir():
        raise MapnetError(f"BLiMP folder {folder}: no such folder")
    files = sorted(p for p in folder.glob("*.jsonl") if p.name != SUMMARY)
    if only:
        have = {p.stem: p for p in files}
        unknown = [name for name in only if name not in have]
        if unknown:
            raise MapnetError(f"BLiMP folder {folder} has no paradigm {', '.join(unknown)}")
        files = [have[name] for name in dict.fromkeys(only)]
    if not files:
        raise MapnetError(f"BLiMP folder {folder} holds no paradigm file (*.jsonl)")
    paradigms = tuple(_paradigm(p, pairs_per_paradigm) for p in files)
    seen: dict[str, Path] = {}
    for path, p in zip(files, paradigms):
        if p.uid in seen:
            raise MapnetError(f"{path}: paradigm {p.uid} is also {seen[p.uid]}")
        seen[p.uid] = path
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    summary = folder / SUMMARY
    refs = _references(summary, set(seen)) if summary.is_file() else {}
    return Suite(folder, paradigms, pairs_per_paradigm, digest.hexdigest(), refs)


__all__ = ["Paradigm", "Suite", "load_suite", "REFERENCE_MODELS", "SUMMARY"]
