"""The rows of `mapnet config show --docs`: every setting, its default and its one-line doc."""

from __future__ import annotations

import typing
from dataclasses import MISSING, fields, is_dataclass

from .tree import Settings


def field_docs() -> list[tuple[str, str, str]]:
    """(key, default, doc) for every setting, a table inside a section (masking.mapnet) by its dotted keys."""
    rows = []
    for sec in fields(Settings):
        rows += _rows(typing.get_type_hints(Settings)[sec.name], sec.name)
    return rows


def _rows(cls, prefix: str) -> list[tuple[str, str, str]]:
    out = []
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            out += _rows(hints[f.name], f"{prefix}.{f.name}")
        else:
            default = f.default if f.default is not MISSING else f.default_factory()
            out.append((f"{prefix}.{f.name}", repr(default), f.metadata.get("doc", "")))
    return out
