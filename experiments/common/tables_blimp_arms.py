"""The tables of experiments/blimp-arms/README.md (section E: every masking arm on BLiMP at `tiny`, CPU) and of
experiments/blimp-arms-mini/README.md (section E2: the same at `mini` on an H200), from their kept `mapnet compare`
results.json files and the `bench_strategies.py` printouts of the step costs.

The cells are blimp_table.py's and learning_table.py's (the scripts the pages name): BLiMP as mean ± half the 95%
t-interval over seeds, in accuracy points; Δ paired by seed; "equal wall time" the arm's BLiMP curve read at
uniform's final step divided by the arm's step cost (interpolated between checkpoints), or, for an arm cheaper than
uniform, the arm's final against uniform's curve at the final step times the cost, as blimp_table.py reads it.
Bold, by rule: "0 of 3" (no seed left the plateau), a Δ loss whose interval lies below zero and a Δ BLiMP whose
interval lies above zero (better than uniform beyond the interval; the row's label and BLiMP too where it is the
equal-steps Δ), the curve's highest point.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import partial

import bench_printout
from arms_table import pm
from blimp_table import at_step, fmt
from compare_tables import REPO, load, markdown, strategy
from learning_table import left_plateau, seeds_below

from mapnet_cli.intervals import mean_ci

TINY = "experiments/blimp-arms/curves/results.json"  # every arm, BLiMP at every checkpoint (finals = results.json's)
TINY_COSTS = (
    "experiments/learning-arms-tiny/bench_strategies-all.txt",
    "experiments/adaptive/bench_adaptive_tiny40-idle.txt",
)
MINI = "experiments/blimp-arms-mini/results.json"
MINI_COSTS = ("experiments/blimp-arms-mini/bench_strategies-h200.txt",)

TINY_ROWS = [
    ("uniform", "uniform"),
    ("30% masking", "uniform@0.3"),
    ("40% masking", "uniform@0.4"),
    ("`mapnet-ht-lite`", "mapnet-ht-lite"),
    ("`mapnet-ht`", "mapnet-ht"),
    ("whole-word", "whole-word"),
    ("span", "span"),
    ("PMI", "pmi"),
    ("the paper's MAP-Net", "mapnet"),
    ("stratified", "stratified"),
    ("frequency-HT", "frequency-ht"),
    ("adaptive (published)", "adaptive"),
    ("adaptive-soft", "adaptive-soft"),
    ("adaptive-ht", "adaptive-ht"),
    ("adaptive-soft-ht", "adaptive-soft-ht"),
]
MINI_ROWS = [
    ("uniform", "uniform"),
    ("30% masking", "uniform@0.3"),
    ("40% masking", "uniform@0.4"),
    ("`mapnet-ht-lite`", "mapnet-ht-lite"),
    ("adaptive (hard)", "adaptive"),
    ("adaptive-soft", "adaptive-soft"),
    ("adaptive-ht", "adaptive-ht"),
    ("adaptive-soft-ht", "adaptive-soft-ht"),
    ("`mapnet-ht`", "mapnet-ht"),
    ("whole-word", "whole-word"),
    ("span", "span"),
    ("PMI", "pmi"),
    ("the paper's MAP-Net", "mapnet"),
    ("stratified", "stratified"),
    ("frequency-HT", "frequency-ht"),
]


def minus(table: str) -> str:
    """The pages' minus sign (U+2212) for the readers' ASCII hyphen before a number."""
    return re.sub(r"(?<![\w`])-(?=\d)", "−", table)


def bold(text: str, on: bool = True) -> str:
    return f"**{text}**" if on and text not in ("–", "") else text


def above_zero(ci: dict | None) -> bool:
    return bool(ci and ci.get("ci95") and ci["ci95"][0] > 0)


def below_zero(ci: dict | None) -> bool:
    return bool(ci and ci.get("ci95") and ci["ci95"][1] < 0)


def share(ci: dict) -> str:
    """A fraction as `16.3% ± 1.0` (percent, the half-interval in points)."""
    return f"{100 * ci['mean']:.1f}% ± {100 * (ci['ci95'][1] - ci['ci95'][0]) / 2:.1f}"


def better(doc: dict, name: str) -> bool:
    """Whether a strategy's held-out loss, paired by seed against uniform, is below it beyond the interval."""
    return below_zero(strategy(doc, name).get("paired_vs_uniform", {}).get("eval_loss"))


def reached(aggregate: dict, steps: int | None = None) -> tuple[float | None, str, str]:
    """When a strategy's mean curve reaches uniform's final loss: (the step or None, its cell — `not reached`, or
    the step with its fraction of the run's `steps` where given — and the per-seed steps, `–` for a seed that never
    reached it)."""
    reach = aggregate.get("steps_to_target") or {}
    mean, seeds = reach.get("mean_curve"), reach.get("per_seed") or []
    if mean is None:
        cell = "not reached"
    else:
        cell = f"{mean:,.0f}" if steps is None else f"{mean:,.0f} ({mean / steps:.2f}×)"
    return mean, cell, ", ".join("–" if s is None else f"{s:,.0f}" for s in seeds)


def costs(paths: Sequence[str]) -> dict[str, float]:
    """{arm: step cost relative to uniform}, the first printout naming an arm winning (blimp_table.py's rule)."""
    return {arm: ratio for arm, (ratio, _) in bench_printout.step_costs([REPO / p for p in paths]).items()}


def machine(paths: Sequence[str]) -> str:
    return " / ".join(dict.fromkeys(run.where for p in paths for run in bench_printout.read(REPO / p)))


def cost_cell(cost: dict[str, float], name: str) -> str:
    return "1.00×" if name == "uniform" else "–" if name not in cost else f"{cost[name]:.2f}×"


def equal_wall(doc: dict, name: str, cost: dict[str, float]) -> dict | None:
    """Δ BLiMP vs uniform at uniform's wall time, paired by seed (blimp_table.py's reading); None where uniform, not
    costed, or a seed's curve was not scored that far."""
    r = cost.get(name)
    if name == "uniform" or r is None:
        return None
    steps = max(doc["eval_steps"])
    uniform = {x["seed_index"]: x for x in doc["runs"] if x["strategy"] == "uniform"}
    mine = sorted((x for x in doc["runs"] if x["strategy"] == name), key=lambda x: x["seed_index"])
    if r >= 1:
        pairs = [(at_step(x, steps / r), uniform[x["seed_index"]]["blimp"]["accuracy"]) for x in mine]
    else:
        pairs = [(x["blimp"]["accuracy"], at_step(uniform[x["seed_index"]], steps * r)) for x in mine]
    diffs = [None if a is None or b is None else a - b for a, b in pairs]
    return None if None in diffs else mean_ci(diffs)


def delta_blimp(doc: dict, name: str) -> dict | None:
    return strategy(doc, name).get("paired_vs_uniform", {}).get("blimp")


def blimp_cells(doc: dict, name: str, cost: dict[str, float]) -> tuple[str, str, str, bool]:
    """BLiMP, Δ at equal steps, Δ at equal wall time, and whether the equal-steps Δ lies above zero."""
    steps, wall = delta_blimp(doc, name), equal_wall(doc, name, cost)
    lead = above_zero(steps)
    return (
        bold(fmt(strategy(doc, name)["blimp"], ".1f"), lead),
        bold(fmt(steps), above_zero(steps)),
        bold(fmt(wall), above_zero(wall)),
        lead,
    )


def plateau_cell(doc: dict, name: str) -> str:
    left = left_plateau(doc, name)
    return bold(left, left.startswith("0 of"))


def tiny_arms() -> str:
    """Section E's table: loss (paired Δ, 2 decimals), BLiMP at the end, Δ at equal steps and at equal wall time."""
    doc, cost = load(TINY), costs(TINY_COSTS)
    steps = max(doc["eval_steps"])
    body = []
    for label, name in TINY_ROWS:
        d = strategy(doc, name).get("paired_vs_uniform", {}).get("eval_loss")
        blimp, at_steps, at_wall, lead = blimp_cells(doc, name, cost)
        body.append(
            [
                bold(label, lead),
                plateau_cell(doc, name),
                bold(pm(d, "+.2f"), below_zero(d)),
                blimp,
                at_steps,
                at_wall,
                cost_cell(cost, name),
            ]
        )
    headings = [
        "arm",
        "left the plateau",
        "Δ final loss (nats)",
        f"BLiMP at {steps:,} steps",
        "Δ BLiMP vs uniform, equal steps",
        "Δ BLiMP, equal wall time",
        "step cost",
    ]
    return minus(markdown(headings, body))


def blimp_curve(path: str, rows: Sequence[tuple[str, str]]) -> str:
    """BLiMP (mean over seeds, points) at every scored checkpoint, the table's highest point in bold."""
    doc = load(path)
    curves = {name: strategy(doc, name)["blimp_curve"] for _, name in rows}
    steps = curves[rows[0][1]]["steps"]
    top = max(round(100 * p["mean"], 1) for c in curves.values() for p in c["accuracy"])
    body = []
    for label, name in rows:
        c = curves[name]
        assert c["steps"] == steps, f"{name}: scored at {c['steps']}, not {steps}"
        cells = [f"{100 * p['mean']:.1f}" for p in c["accuracy"]]
        body.append([label, *(bold(x, float(x) == top) for x in cells)])
    return markdown(["arm", *(f"{s:,}" for s in steps)], body)


def mini_loss() -> str:
    """Section E2's loss table: plateau, paired Δ (seeds below uniform where the interval lies below zero), steps to
    uniform's final mean loss, H200 step cost, GPU time to uniform's final (steps / run's steps × step cost)."""
    doc, cost = load(MINI), costs(MINI_COSTS)
    steps = max(doc["eval_steps"])
    body = []
    for label, name in MINI_ROWS:
        a = strategy(doc, name)
        d = a.get("paired_vs_uniform", {}).get("eval_loss")
        better = below_zero(d)
        if name == "uniform":
            reached = float(steps)
        else:
            reached = (a.get("steps_to_target") or {}).get("mean_curve")
        delta = "–" if name == "uniform" else pm(d, "+.3f")
        if better:
            delta = f"{bold(delta)} ({seeds_below(doc, name)})"
        ratio = 1.0 if name == "uniform" else cost.get(name)
        wall = "–" if reached is None or ratio is None else f"{reached / steps * ratio:.2f}×"
        body.append(
            [
                bold(label, better),
                plateau_cell(doc, name),
                delta,
                "not reached" if reached is None else bold(f"{reached:,.0f}", better),
                cost_cell(cost, name),
                bold(wall, better),
            ]
        )
    headings = [
        "arm",
        "left the plateau",
        "Δ final loss (nats)",
        "steps to uniform's final",
        f"step cost ({machine(MINI_COSTS)})",
        "GPU time to uniform's final",
    ]
    return minus(markdown(headings, body))


def mini_blimp() -> str:
    """Section E2's BLiMP table: at the end, Δ at equal steps and at equal GPU time, Δ vs each seed's random init."""
    doc, cost = load(MINI), costs(MINI_COSTS)
    steps = max(doc["eval_steps"])
    body = []
    for label, name in MINI_ROWS:
        blimp, at_steps, at_wall, lead = blimp_cells(doc, name, cost)
        body.append([bold(label, lead), blimp, at_steps, at_wall, fmt(strategy(doc, name).get("blimp_vs_random_init"))])
    headings = [
        "arm",
        f"BLiMP at {steps:,} steps",
        "Δ vs uniform, equal steps",
        "Δ vs uniform, equal GPU time",
        "Δ vs its random init",
    ]
    return minus(markdown(headings, body))


TABLES: dict[str, Callable[[], str]] = {
    "blimp-arms-tiny": tiny_arms,
    "blimp-arms-tiny-curve": partial(blimp_curve, TINY, TINY_ROWS),
    "blimp-arms-mini-loss": mini_loss,
    "blimp-arms-mini-blimp": mini_blimp,
}
