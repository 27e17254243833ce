"""`compare --step-costs FILE`: every arm trains to the modelled clock at its own measured step costs.

    uv run python benchmarks/step_costs.py --out costs.json --common preset=mini recipe=fast ... \
        --arm uniform shards/ strategy=uniform --arm mapnet-ht-lite shards/ strategy=mapnet-ht-lite
    mapnet compare shards/ --out runs/20m --preset mini --time-budget 20m --strategies uniform,mapnet-ht-lite \
        --step-costs costs.json

At equal wall time a strategy whose step costs more trains fewer steps; on the modelled clock
(`train.step_seconds`, train/budget.py) that stays true, but the steps are fixed by the measured costs instead of
by the machine's speed while each run trains, so the arms, and the seeds of an arm, buy the same steps whatever
the load, and a comparison can run beside other work. FILE is `benchmarks/step_costs.py`'s output (or a kept
file in its format): {"arms": {NAME: {"step_seconds": s, "short_step_seconds": s}, ...}}, looked up by each
strategy's name as `--strategies` gives it (`uniform@0.3`). It needs `--time-budget`; an arm missing from FILE,
a cost that is not a positive number, and `train.step_seconds` given beside it are one-line errors.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..errors import MapnetError


def is_step_cost(value) -> bool:
    """A step cost is a positive finite number of seconds (not a bool: JSON's true would read as 1 s); a 0 would
    mean the wall clock, which a file of measured costs never does."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def read_step_costs(path: Path, strategies: list[str]) -> dict[str, tuple[float, float]]:
    """{strategy: (step_seconds, short_step_seconds)} for every strategy, from a step-costs JSON."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MapnetError(f"--step-costs {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MapnetError(f"--step-costs {path}: not a readable JSON file ({exc})") from None
    arms = doc.get("arms") if isinstance(doc, dict) else None
    if not isinstance(arms, dict):
        raise MapnetError(f'--step-costs {path}: no "arms" table (benchmarks/step_costs.py writes one)')
    missing = [name for name in strategies if name not in arms]
    if missing:
        raise MapnetError(
            f"--step-costs {path} has no costs for {', '.join(missing)}: time them with "
            "benchmarks/step_costs.py (--arm NAME SHARDS strategy=NAME)"
        )
    out = {}
    for name in strategies:
        entry = arms[name] if isinstance(arms[name], dict) else {}
        costs = (entry.get("step_seconds"), entry.get("short_step_seconds"))
        if not all(is_step_cost(c) for c in costs):
            raise MapnetError(
                f"--step-costs {path}: {name}'s step_seconds and short_step_seconds must be positive "
                f"numbers (got {costs[0]!r}, {costs[1]!r})"
            )
        out[name] = (float(costs[0]), float(costs[1]))
    return out


def clock_updates(costs: tuple[float, float], train) -> dict:
    """The `train` settings that put a run on the modelled clock at `costs` (a short cost only where the run
    has a sequence-length warm-up: elsewhere it would be ignored, which the settings refuse)."""
    step, short = costs
    return {"step_seconds": step, **({"short_step_seconds": short} if train.short_seq.fraction else {})}
