"""Wall-clock durations as a user writes them: `90s`, `20m`, `2h`, `1h30m`, `1.5h` (`train.time_budget`).

    parse_duration("1h30m")  # -> 5400.0

Strict: every number carries its unit (h, m, s, in that order, each at most once), so `90` (seconds or
minutes?), `-5m`, `nan`, `inf` and `1e3s` are refused rather than guessed at; a duration of zero is
refused too (a budget that buys nothing is a mistake, never a way to say "off": the empty string is).
"""

from __future__ import annotations

import math
import re

from ..errors import MapnetError

_NUMBER = r"(\d+(?:\.\d+)?)"
_DURATION = re.compile(rf"(?:{_NUMBER}h)?(?:{_NUMBER}m)?(?:{_NUMBER}s)?")
UNITS = (3600.0, 60.0, 1.0)
EXAMPLES = "e.g. 90s, 20m, 2h or 1h30m"


def parse_duration(text: str, name: str = "duration") -> float:
    """Seconds in `text` (> 0 and finite), or a one-line `MapnetError` naming `name` and the spellings it takes."""
    spelled = text.strip().lower()
    match = _DURATION.fullmatch(spelled)
    if spelled.startswith("-") and _DURATION.fullmatch(spelled[1:]):
        raise MapnetError(f"{name} must be longer than zero (got {text!r})")
    if not spelled or match is None or not any(match.groups()):
        raise MapnetError(f"{name} must be a duration with units, {EXAMPLES} (got {text!r})")
    seconds = sum(float(value) * unit for value, unit in zip(match.groups(), UNITS) if value is not None)
    if not (math.isfinite(seconds) and seconds > 0):
        raise MapnetError(f"{name} must be longer than zero (got {text!r})")
    return seconds


__all__ = ["parse_duration", "EXAMPLES"]
