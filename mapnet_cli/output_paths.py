"""The one check every writing command makes before its first expensive step: may it write here?

    check_output(out, [corpus, tokenizer, config], kind=CORPUS, overwrite=overwrite)   # preprocess --out DIR
    check_output(out, [shards, init_from], kind=RUN, reuse=True)                        # pretrain: continues its run

Refused in one line (exit 2), before any work; the rule as docs/reliability.md states it:
- the current folder, one above it, home or the root (`--out .`, `''`, `..`, `~`, `/`);
- an output that is, lies inside, or contains an input (after resolving links);
- an output inside a run's checkpoints (pruned), or over an entry another mapnet output owns;
- a link: never replaced, never written through as a file; only a folder a command continues is followed;
- an existing output, unless `reuse` (the command continues it, replacing nothing) or `overwrite`, and
  `overwrite` only for an output of the command's own kind holding nothing mapnet did not write there
  (`artefacts.py` recognises each kind and its entries).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from . import artefacts
from .artefacts import Kind
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


def check_output(
    out: str | Path,
    inputs: Iterable[str | Path | None],
    *,
    kind: Kind,
    overwrite: bool = False,
    reuse: bool = False,
    name: str = "--out",
) -> None:
    """Refuse writing `out`, an output of `kind`, in one `MapnetError` line (module docstring); `name` is how
    the user gave the path (a flag), for the message."""
    out = Path(out)
    _refuse_broad(out, name)
    hit = overlap(out, inputs)
    if hit is not None:
        given, relation = hit
        linked = (
            ""
            if _real(out) == Path(os.path.abspath(out)) and _real(given) == Path(os.path.abspath(given))
            else f" (after following links: {_real(out)} and {_real(given)})"
        )
        raise MapnetError(
            f"{name} {out} {relation} the input {given}{linked}: writing there would destroy what this "
            "command reads; choose an output outside its inputs"
        )
    if out.is_symlink() and (overwrite or not reuse or not kind.folder or not out.exists()):
        raise MapnetError(
            f"{name} {out} is a link (to {os.readlink(out)}): mapnet replaces no link and writes no file "
            "through one; give the path it points to, or remove the link"
        )
    _refuse_inside_another(out, kind, reuse, name)
    if out.exists():
        if kind.folder and not out.is_dir():
            raise MapnetError(f"{name} {out} is a file, not an output folder; choose another {name}")
        if not kind.folder and out.is_dir():
            raise MapnetError(f"{name} {out} is a folder, not a file; choose another {name}")
    else:
        return
    if overwrite:
        _refuse_replacing_the_unknown(out, kind, name)
    elif not reuse:
        raise MapnetError(f"{out} already exists (pass --overwrite to replace it)")


def _refuse_broad(out: Path, name: str) -> None:
    """The current folder, one above it, home or the root: a slip of the keyboard, and everything would go."""
    real, cwd, home = _real(out), _real(Path.cwd()), _real(Path.home())
    what = (
        "the root folder"
        if real == Path(real.anchor)
        else "the current folder"
        if real == cwd
        else "a folder above the current one"
        if cwd.is_relative_to(real)
        else "your home folder"
        if real == home
        else "a folder above your home"
        if home.is_relative_to(real)
        else None
    )
    if what is not None:
        raise MapnetError(
            f"{name} {str(out)!r} is {what} ({real}): name a folder of its own for the output, "
            f"e.g. {name} {Path(out) / 'out'}"
        )


def _refuse_inside_another(out: Path, kind: Kind, reuse: bool, name: str) -> None:
    """No output inside a run's checkpoints (pruned as the run goes on), none over another output's own files."""
    around = artefacts.enclosing(_real(out))
    if around is None:
        return
    folder, outer, entry = around
    if outer in (artefacts.CHECKPOINT, artefacts.CHECKPOINTS):
        raise MapnetError(
            f"{name} {out} lies inside {folder}, a {outer.noun}: mapnet deletes old checkpoints as a "
            "run goes on, and whatever lies inside goes with them; choose an output outside it"
        )
    continuing = reuse and artefacts.kind_of(_real(out)) is kind  # a run of a quickstart, resumed: not replaced
    if entry in artefacts.own_entries(folder, outer) and not continuing:
        raise MapnetError(
            f"{name} {out} is part of the {outer.noun} {folder} (its {entry}): writing there would "
            "damage it; choose another output"
        )


def _refuse_replacing_the_unknown(out: Path, kind: Kind, name: str) -> None:
    """--overwrite replaces only an output of `kind` that holds nothing but what mapnet wrote there."""
    if out.is_dir() and not artefacts.visible(out):
        return  # an empty folder: replacing it deletes nothing
    found = artefacts.kind_of(out)
    if found is not kind:
        what = (
            f"it is a {found.noun}"
            if found is not None
            else "it is a file mapnet did not write"
            if out.is_file()
            else f"it holds {_names(artefacts.visible(out))}"
        )
        raise MapnetError(
            f"{name} {out} is not a {kind.noun} made by mapnet ({what}): --overwrite replaces only "
            f"that; choose another {name}, or move it away yourself"
        )
    foreign = artefacts.foreign_entries(out, kind) if kind.folder else []
    if foreign:
        raise MapnetError(
            f"{name} {out} holds what mapnet did not write there ({_names(foreign)}): --overwrite "
            f"would delete it; move it out first, or choose another {name}"
        )


def _names(names: list[str], shown: int = 5) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
