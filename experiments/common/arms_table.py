"""Markdown tables of a `mapnet compare` results.json: final held-out loss per set, the paired
difference to uniform (and in BLiMP points, when the comparison scored BLiMP), steps to uniform's final loss,
and the training s/step.

    uv run python experiments/common/arms_table.py runs/learning/arms-tiny/results.json

Paired differences are per seed index (same initial weights, data order and evaluation masks),
strategy minus uniform, with a 95% t-interval over seeds; the three held-out sets score the same
models, so each seed is one independent comparison whatever the number of sets.
"""

from __future__ import annotations

import json
import sys


def pm(ci: dict | None, fmt: str) -> str:
    if ci is None:
        return "–"
    if ci.get("ci95") is None:
        return format(ci["mean"], fmt)
    return f"{format(ci['mean'], fmt)} ± {format((ci['ci95'][1] - ci['ci95'][0]) / 2, fmt.lstrip('+'))}"


def points(ci: dict | None) -> str:
    """A paired BLiMP accuracy difference (a fraction) in accuracy points."""
    if ci is None:
        return "–"
    scaled = {"mean": 100 * ci["mean"], "ci95": None if ci.get("ci95") is None else [100 * x for x in ci["ci95"]]}
    return pm(scaled, "+.1f")


def main(path: str) -> None:
    doc = json.load(open(path, encoding="utf-8"))
    agg = doc["aggregate"]["strategies"]
    sets = [("eval_loss", "mixed"), ("eval_loss@books", "books"), ("eval_loss@wiki", "Wikipedia")]
    print("| strategy | " + " | ".join(f"{name}" for _, name in sets) + " | accuracy (mixed) | s/step |")
    print("|---|" + "---|" * (len(sets) + 2))
    for name, a in agg.items():
        cells = [pm(a["final"].get(m), ".3f") for m, _ in sets]
        print(
            f"| {name} | " + " | ".join(cells) + f" | {pm(a['final']['eval_accuracy'], '.1%')} | "
            f"{pm(a['seconds_per_step'], '.3f')} |"
        )
    print()
    blimp = any("blimp" in a.get("paired_vs_uniform", {}) for a in agg.values())
    print(
        "| strategy | Δ mixed | Δ books | Δ Wikipedia | seeds better than uniform (mixed) | "
        "steps to uniform's final (mixed) | per seed |" + (" Δ BLiMP (points) |" if blimp else "")
    )
    print("|---|---|---|---|---|---|---|" + ("---|" if blimp else ""))
    runs = doc["runs"]
    uniform = {r["seed_index"]: r for r in runs if r["strategy"] == "uniform"}
    for name, a in agg.items():
        if name == "uniform":
            continue
        d = a.get("paired_vs_uniform", {})
        mine = [r for r in runs if r["strategy"] == name]
        better = sum(r["eval"][-1]["eval_loss"] < uniform[r["seed_index"]]["eval"][-1]["eval_loss"] for r in mine)
        st = a.get("steps_to_target", {})
        reached = st.get("mean_curve")
        per_seed = ", ".join("–" if s is None else f"{s:.0f}" for s in st.get("per_seed", []))
        print(
            f"| {name} | {pm(d.get('eval_loss'), '+.3f')} | {pm(d.get('eval_loss@books'), '+.3f')} | "
            f"{pm(d.get('eval_loss@wiki'), '+.3f')} | {better} of {len(mine)} | "
            f"{'not reached' if reached is None else f'{reached:.0f}'} | {per_seed} |"
            + (f" {points(d.get('blimp'))} |" if blimp else "")
        )


if __name__ == "__main__":
    main(sys.argv[1])
