"""The two tables of experiments/adaptive/README.md (section F: loss-adaptive masking against uniform, 30% masking
and `mapnet-ht-lite`), subsets of section E's (`tiny`, CPU) and E2's (`mini`, H200) arms, from the same kept
`mapnet compare` results.json files and `bench_strategies.py` printouts as tables_blimp_arms.py, whose readers they
use: the plateau, the paired Δ final loss (2 decimals), steps to uniform's final mean loss (interpolated on the arm's
mean curve; uniform takes the whole run), the printed step cost, the time to uniform's final (steps / the run's
steps × step cost), BLiMP at the end, and the paired Δ BLiMP at equal steps and at equal time (blimp_table.py's
reading). Bold, by rule: a plateau left on fewer seeds than all, and a Δ loss whose interval lies below zero with its
steps and time to uniform's final.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import tables_blimp_arms as arms
from arms_table import pm
from compare_tables import load, markdown, strategy

ROWS = [
    ("uniform", "uniform"),
    ("30% masking", "uniform@0.3"),
    ("`mapnet-ht-lite`", "mapnet-ht-lite"),
    ("adaptive (published)", "adaptive"),
    ("adaptive-soft", "adaptive-soft"),
    ("adaptive-ht", "adaptive-ht"),
    ("adaptive-soft-ht", "adaptive-soft-ht"),
]
TINY_COSTS = ("experiments/adaptive/bench_adaptive_tiny40-idle.txt", *arms.TINY_COSTS)  # the page's printout first


def adaptive_arms(path: str, cost_paths: Sequence[str], time_heading: str) -> str:
    doc, cost = load(path), arms.costs(cost_paths)
    steps = max(doc["eval_steps"])
    body = []
    for label, name in ROWS:
        a = strategy(doc, name)
        d = a.get("paired_vs_uniform", {}).get("eval_loss")
        better = arms.below_zero(d)
        reached = float(steps) if name == "uniform" else (a.get("steps_to_target") or {}).get("mean_curve")
        ratio = 1.0 if name == "uniform" else cost.get(name)
        time = "–" if reached is None or ratio is None else f"{reached / steps * ratio:.2f}×"
        left = arms.left_plateau(doc, name)
        n = left.split(" of ")[1]
        blimp, at_steps, at_time, _ = arms.blimp_cells(doc, name, cost)
        body.append(
            [
                label,
                arms.bold(left, left != f"{n} of {n}"),
                arms.bold(pm(d, "+.2f"), better),
                "not reached" if reached is None else arms.bold(f"{reached:,.0f}", better),
                arms.cost_cell(cost, name),
                arms.bold(time, better),
                blimp,
                at_steps,
                at_time,
            ]
        )
    headings = [
        "arm",
        "left the plateau",
        "Δ final loss (nats)",
        "steps to uniform's final",
        "step cost",
        time_heading,
        "BLiMP",
        "Δ BLiMP, equal steps",
        "Δ BLiMP, equal time",
    ]
    return arms.minus(markdown(headings, body))


TABLES: dict[str, Callable[[], str]] = {
    "adaptive-tiny": partial(adaptive_arms, arms.TINY, TINY_COSTS, "wall to uniform's final"),
    "adaptive-mini": partial(adaptive_arms, arms.MINI, arms.MINI_COSTS, "GPU time to uniform's final"),
}
