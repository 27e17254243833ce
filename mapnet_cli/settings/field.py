"""The one helper every settings section uses: a dataclass field carrying its one-line doc."""

from __future__ import annotations

from dataclasses import field



def setting(default, doc: str, **kw):
    """A dataclass field with its one-line documentation (shown by `mapnet config show --docs`)."""
    if isinstance(default, (list, dict)):
        raise TypeError("use tuples for sequence defaults")  # a frozen section must not share a mutable default
    return field(default=default, metadata={"doc": doc, **kw})
