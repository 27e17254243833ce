"""What commands show through rich, as the user gave it: a path or name is text, never markup.

    console.print(f"[bold]{shown(run)}[/] (step 4)")      # runs/[exp1]/pre keeps its brackets
    table.add_row(*cells(label, "published", "43.9"))     # every cell of a row of data

rich reads `[...]` in a printed string (and in a Table title or cell, a progress description, a status line) as
a style tag and drops it: `u/[exp1]/pre` printed as `u//pre`. What comes from the user (a path, a run label, a
word of their text) goes through `shown`; a line with no markup of its own may print with markup=False instead.
"""

from __future__ import annotations

from rich.markup import escape


def shown(value: object) -> str:
    """`value` as text that rich prints verbatim inside a markup string."""
    return escape(str(value))


def cells(*values: object) -> list[str]:
    """A table row of data (no markup of its own), each cell shown verbatim."""
    return [shown(v) for v in values]


__all__ = ["shown", "cells"]
