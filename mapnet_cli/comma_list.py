"""The one parser for comma lists given on the command line (`--lrs 1e-5,2e-5`, `--task rte,sst2`).

comma_list("16, 32,", "--batch-sizes", convert=int)          -> [16, 32]
comma_list("rte,nope", "--task", allowed=["RTE", "SST-2"])   -> MapnetError: unknown --task 'nope' (choose from RTE,
SST-2)
comma_list("1e-5,nan", "--lrs", convert=float)               -> MapnetError: ... finite numbers: 'nan' is not one ...
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from .errors import MapnetError


def comma_list(
    text: str,
    what: str,
    *,
    convert: Callable | None = None,
    allowed: Iterable[str] | None = None,
    key: Callable[[str], str] = str,
    allow_empty: bool = False,
) -> list:
    """Items of `text` split on commas, stripped, empty ones dropped; each checked against `allowed`
    (compared through `key`, e.g. a case-folding one) and passed through `convert`. `what` names the
    list in the one-line error (a flag, "GLUE task"); a list with no item is an error unless `allow_empty`."""
    items = [part.strip() for part in text.split(",") if part.strip()]
    if not items and not allow_empty:
        raise MapnetError(f"{what} is empty (got {text!r})")
    if allowed is not None:
        names = list(allowed)
        known = {key(name) for name in names}
        for item in items:
            if key(item) not in known:
                raise MapnetError(f"unknown {what} {item!r} (choose from {', '.join(names)})")
    if convert is None:
        return items
    kind = getattr(convert, "__name__", "value")
    out = []
    for item in items:
        try:
            value = convert(item)
        except (TypeError, ValueError):
            raise MapnetError(
                f"{what} must be a comma-separated list of {kind}s: {item!r} is not one (got {text!r})"
            ) from None
        # float() reads "nan" and "inf": numbers that are not numbers would reach torch as a learning rate.
        if isinstance(value, float) and not math.isfinite(value):
            raise MapnetError(
                f"{what} must be a comma-separated list of finite numbers: {item!r} is not one (got {text!r})"
            )
        out.append(value)
    return out
