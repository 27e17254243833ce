"""The rows of `mapnet config show --docs`: every setting, its default and its one-line doc."""

from __future__ import annotations

import typing
from dataclasses import fields

from .tree import Settings


def field_docs() -> list[tuple[str, str, str]]:
    """(key, default, doc) for every setting, for `mapnet config show --docs`."""
    rows = []
    for sec in fields(Settings):
        for f in fields(typing.get_type_hints(Settings)[sec.name]):
            rows.append((f"{sec.name}.{f.name}", repr(f.default), f.metadata.get("doc", "")))
    return rows

