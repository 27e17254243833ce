"""The one check every writing command makes before its first expensive step: may it write here?

    check_output(out, [corpus, tokenizer, config], overwrite=overwrite)           # preprocess --out DIR
    check_output(out, [*runs], overwrite=overwrite, folder=False)                  # plot --out FILE
    check_output(out, [shards, init_from], reuse=True)                             # pretrain: continues its run

Refused, in one line naming both paths (exit 2):
- an output that is, lies inside, or contains one of the command's inputs, compared after resolving
  links (`Path.resolve`): `export RUN --out RUN --overwrite` would replace the run it reads, and
  `preprocess DIR --out DIR/p` would read its own earlier output as text;
- an output that exists, unless `overwrite` (or `reuse`: the command continues what is there — a
  resumed run, a GLUE sweep's results.json — and replaces nothing);
- a file where the output is a folder, or a folder where it is a file.

Inputs are the paths the command reads; `None` entries (an option not given) are skipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from .errors import MapnetError


def _real(path: Path) -> Path:
    """`path` with every link resolved; a path that does not exist yet resolves as far as it does."""
    try:
        return Path(os.path.abspath(path)).resolve()
    except (OSError, RuntimeError):  # a link loop: compare what was written
        return Path(os.path.abspath(path))


def overlap(out: str | Path, inputs: Iterable[str | Path | None]) -> tuple[Path, str] | None:
    """The first input `out` is, lies inside or contains, with that relation in words; None when it is clear of all."""
    real_out = _real(Path(out))
    for given in inputs:
        if given is None:
            continue
        real_in = _real(Path(given))
        if real_out == real_in:
            return Path(given), "is"
        if real_out.is_relative_to(real_in):
            return Path(given), "lies inside"
        if real_in.is_relative_to(real_out):
            return Path(given), "contains"
    return None


def check_output(out: str | Path, inputs: Iterable[str | Path | None], *, overwrite: bool = False,
                 reuse: bool = False, folder: bool = True, name: str = "--out") -> None:
    """Refuse writing `out` (a folder, or a file when `folder` is false) in one `MapnetError` line when it
    overlaps an input, is the wrong kind of entry, or exists and neither `overwrite` nor `reuse` allows it.
    `name` is how the user gave the path (a flag), for the message."""
    out = Path(out)
    hit = overlap(out, inputs)
    if hit is not None:
        given, relation = hit
        linked = "" if _real(out) == Path(os.path.abspath(out)) and _real(given) == Path(os.path.abspath(given)) \
            else f" (after following links: {_real(out)} and {_real(given)})"
        raise MapnetError(f"{name} {out} {relation} the input {given}{linked}: writing there would destroy what this "
                          "command reads; choose an output outside its inputs")
    if out.exists():
        if folder and not out.is_dir():
            raise MapnetError(f"{name} {out} is a file, not an output folder; choose another {name}")
        if not folder and out.is_dir():
            raise MapnetError(f"{name} {out} is a folder, not a file; choose another {name}")
    elif not out.is_symlink():  # a dangling link is still something to replace
        return
    if not (overwrite or reuse):
        raise MapnetError(f"{out} already exists (pass --overwrite to replace it)")
