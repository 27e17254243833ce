"""The cheap MAP-Net arm against the full one (docs/results.md, section D): `mapnet-ht-lite` (a one-block
proposal that learns on every 4th step) paired by seed with section A's `mapnet-ht` and `uniform` runs.

    uv run python experiments/mapnet-cheap/lite_table.py experiments/learning-arms-tiny/results.json \
        runs/lite/lane-lite/results.json experiments/mapnet-cheap/bench_strategies.txt

The lite runs were trained in their own `compare` with section A's exact flags; a pairing is only
made where the two runs of a seed share their initial weights, data order and evaluation masks
(the hashes `compare` records; checked here, and the script stops on a mismatch). Δ = arm − other on
the same seed, mean ± 95% t-interval over seeds; the three held-out sets score the same models, so
each seed is one comparison. Steps to uniform's final mean loss (mixed set) are interpolated on the
arm's mean curve; the step cost is the ratio the `bench_strategies.py` printout's `tiny` block printed.
"""

from __future__ import annotations

import json
import sys

from arms_table import pm
from learning_table import machine, step_costs

from mapnet_cli.intervals import mean_ci

SETS = (("eval_loss", "mixed"), ("eval_loss@books", "books"), ("eval_loss@wiki", "Wikipedia"))
PAIRING = ("initial_weights_sha256", "data_order_sha256", "eval_sha256", "extra_eval_sha256")


def by_seed(doc: dict, strategy: str) -> dict[int, dict]:
    return {r["seed"]: r for r in doc["runs"] if r["strategy"] == strategy}


def steps_to(curves: list[list[dict]], target: float) -> float | None:
    """First step where the mean curve (over seeds, same eval steps) reaches `target`, linearly interpolated."""
    steps = [e["step"] for e in curves[0]]
    mean = [sum(c[i]["eval_loss"] for c in curves) / len(curves) for i in range(len(steps))]
    for i in range(1, len(steps)):
        if mean[i] <= target:
            a, b = mean[i - 1], mean[i]
            return steps[i - 1] + (steps[i] - steps[i - 1]) * (a - target) / (a - b) if a != b else float(steps[i])
    return None


def main(section_a: str, lite: str, bench: str) -> None:
    a, b = json.load(open(section_a, encoding="utf-8")), json.load(open(lite, encoding="utf-8"))
    arms = {
        "uniform": by_seed(a, "uniform"),
        "mapnet-ht": by_seed(a, "mapnet-ht"),
        "mapnet-ht-lite": by_seed(b, "mapnet-ht-lite"),
    }
    seeds = sorted(arms["mapnet-ht-lite"])
    for seed in seeds:
        for name in ("uniform", "mapnet-ht"):
            mismatch = [k for k in PAIRING if arms[name][seed][k] != arms["mapnet-ht-lite"][seed][k]]
            if mismatch:
                raise SystemExit(f"seed {seed}: {name} and mapnet-ht-lite differ in {', '.join(mismatch)}: not paired")
    final = {name: {s: runs[s]["eval"][-1] for s in seeds} for name, runs in arms.items()}
    costs = step_costs(bench)
    steps = arms["uniform"][seeds[0]]["eval"][-1]["step"]
    target = sum(final["uniform"][s]["eval_loss"] for s in seeds) / len(seeds)
    print(
        f"seeds {seeds} (paired: initial weights, data order and evaluation masks identical); "
        f"uniform's final mean loss (mixed) {target:.3f} at step {steps}"
    )
    print()
    print(
        "| arm | final loss per seed (mixed) | Δ vs uniform, mixed | Δ vs mapnet-ht: mixed | books | Wikipedia | "
        f"steps to uniform's final | step cost ({machine(bench)}, tiny) | wall to uniform's final |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in ("uniform", "mapnet-ht", "mapnet-ht-lite"):
        per_seed = ", ".join(f"{final[name][s]['eval_loss']:.3f}" for s in seeds)
        vs_u = mean_ci([final[name][s]["eval_loss"] - final["uniform"][s]["eval_loss"] for s in seeds])
        vs_ht = [mean_ci([final[name][s][k] - final["mapnet-ht"][s][k] for s in seeds]) for k, _ in SETS]
        reached = steps_to([arms[name][s]["eval"] for s in seeds], target)
        cost = costs.get(name, float("nan")) / costs["uniform"]
        wall = "–" if reached is None else f"{reached / steps * cost:.2f}×"
        print(
            f"| {name} | {per_seed} | {'–' if name == 'uniform' else pm(vs_u, '+.3f')} | "
            + " | ".join("–" if name != "mapnet-ht-lite" else pm(d, "+.3f") for d in vs_ht)
            + f" | {'not reached' if reached is None else f'{reached:.0f}'} | {cost:.2f}× | {wall} |"
        )


if __name__ == "__main__":
    main(*sys.argv[1:4])
