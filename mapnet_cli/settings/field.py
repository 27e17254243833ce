"""The one helper every settings section uses: a dataclass field carrying its one-line doc."""

from __future__ import annotations

from dataclasses import field, fields

# TOML's integers are 64-bit, and a run's settings.toml is TOML: an integer setting outside this range could not be
# written back as a run's record, and torch refuses it (a seed, a step count) only deep inside the work.
INT64 = (-(1 << 63), (1 << 63) - 1)


def setting(default, doc: str, **kw):
    """A dataclass field with its one-line documentation (shown by `mapnet config show --docs`). `minimum=`: the
    smallest value the field takes, checked for every section by `declared_range_problems` (a seed's 0)."""
    if isinstance(default, (list, dict)):
        raise TypeError("use tuples for sequence defaults")  # a frozen section must not share a mutable default
    return field(default=default, metadata={"doc": doc, **kw})


def seed_setting(default: int, doc: str):
    """A seed: any integer from 0 up (numpy's generators refuse a negative one, after the run has started)."""
    return setting(default, doc, minimum=0)


def declared_range_problems(section_name: str, section) -> list[str]:
    """`section`'s fields below their declared `minimum`, named as the user sets them (`train.seed`)."""
    return [
        f"{section_name}.{f.name} must be >= {f.metadata['minimum']} (got {getattr(section, f.name)})"
        for f in fields(section)
        if "minimum" in f.metadata and getattr(section, f.name) < f.metadata["minimum"]
    ]
