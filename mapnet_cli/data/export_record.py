"""mapnet_export.json, the record `mapnet export` writes into its folder: one reader and one rule for everyone.

    record = read_export_record(Path("hf/base"))   # None: no record, so not a mapnet export
    record.cleaning, record.pretraining_seed, record.tokenizer_sha256
    refuse_cleaning_twice(Path("hf/base/tokenizer.json"), settings.preprocess)   # preprocess --tokenizer

The rule: a record that is there but damaged (unreadable, not JSON, not an object, a field of the wrong
type or shape) is a one-line error naming the file, whoever reads it; it is never taken for an old
export, whose tokenizer would then be trusted not to clean. Only a field an older export did not write
keeps its documented meaning when absent: no `cleaning` (exports before the tokenizer cleaned text):
the tokenizer does not clean; no `pretraining_seed`: 0; no `tokenizer_sha256`: not known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import MapnetError
from .cleaning import CLEANING

RECORD = "mapnet_export.json"
# The cleaning steps a record may switch on (moses_lang only chooses how Moses works).
STEPS = ("normalize_punctuation", "moses_tokenize", "lowercase")


@dataclass(frozen=True)
class ExportRecord:
    path: Path
    cleaning: dict | None  # {CLEANING setting: value}; None: an export from before it was recorded
    pretraining_seed: int
    tokenizer_sha256: str | None

    @property
    def cleans(self) -> bool:
        """Whether the export's tokenizer.json cleans the text it reads (Moses, lower-casing)."""
        return self.cleaning is not None and any(self.cleaning[k] for k in STEPS)


def read_export_record(folder: Path) -> ExportRecord | None:
    """The record of the exported folder `folder`; None when it has none."""
    path = Path(folder) / RECORD
    if not path.exists():
        return None

    def damaged(why: str) -> MapnetError:
        return MapnetError(f"{path} is damaged ({why}); it is not a mapnet export record: re-export the run")

    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MapnetError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise damaged("not UTF-8 text") from None
    except ValueError as exc:
        raise damaged(f"not JSON: {exc}") from None
    if not isinstance(values, dict):
        raise damaged(f"a JSON {type(values).__name__}, not an object")
    cleaning = values.get("cleaning")
    if "cleaning" in values:
        if not isinstance(cleaning, dict) or set(cleaning) != set(CLEANING):
            raise damaged(f'"cleaning" is not a table of {", ".join(CLEANING)}')
        wrong = [k for k, v in cleaning.items() if not isinstance(v, str if k == "moses_lang" else bool)]
        if wrong:
            raise damaged(f'"cleaning" has a value of the wrong type for {", ".join(wrong)}')
    seed = values.get("pretraining_seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise damaged(f'"pretraining_seed" is {seed!r}, not an integer')
    sha = values.get("tokenizer_sha256")
    if sha is not None and not isinstance(sha, str):
        raise damaged(f'"tokenizer_sha256" is {sha!r}, not a string')
    return ExportRecord(path, cleaning, seed, sha)


def refuse_cleaning_twice(tokenizer_path: Path, settings) -> None:
    """A `mapnet export` tokenizer.json (its folder has mapnet_export.json) that cleans the text it reads must
    not be given sentences preprocessing has cleaned already, or they are cleaned twice (Moses is not
    idempotent: "it 's" becomes "it ' s"). Read (and so checked) even when `settings` clean nothing."""
    record = read_export_record(Path(tokenizer_path).parent)
    if record is None or not record.cleans or not any(getattr(settings, k) for k in STEPS):
        return
    raise MapnetError(
        f"{tokenizer_path} is a mapnet export's tokenizer: it cleans text itself ({RECORD}: "
        f"{', '.join(f'{k}={v}' for k, v in record.cleaning.items())}); preprocess with --bert-text so "
        "the sentences are not cleaned twice, or reuse the run's own checkpoint tokenizer.json"
    )


__all__ = ["RECORD", "ExportRecord", "read_export_record", "refuse_cleaning_twice"]
