"""experiments/mapnet-cheap/README.md's table (RESULTS section D: the lite MAP-Net arm beside the full one), from its
kept raw files: the idle `bench_strategies.py` printout (experiments/mapnet-cheap/bench_strategies.txt: each arm's
printed step cost at `tiny` and `mini`, uniform's ms/step), the lite arm's `compare` (lite-results.json) and section
A's (experiments/learning-arms-tiny/results.json, its `uniform` and `mapnet-ht` runs), read and paired by seed with
experiments/mapnet-cheap/lite_table.py's own functions (it stops on a pairing mismatch).

Final mixed loss per seed (3 decimals); Δ = arm − other on the same seed, mean ± 95% t-interval (3 decimals); steps
to uniform's final mean loss, interpolated on the arm's mean curve; wall time to it = steps / the run's steps × the
`tiny` step cost (the ratio of its printed milliseconds). Bold: an arm (uniform aside) whose step meets the ≤ 1.15×
target at both presets.
"""

from __future__ import annotations

import re

import bench_printout
from arms_table import pm
from compare_tables import REPO, load, markdown, module_at
from learning_table import exact_step_costs, step_costs
from tables_blimp_arms import bold, minus

from mapnet_cli.intervals import mean_ci

HERE = REPO / "experiments" / "mapnet-cheap"
SECTION_A = "experiments/learning-arms-tiny/results.json"
LITE = "experiments/mapnet-cheap/lite-results.json"
BENCH = HERE / "bench_strategies.txt"
TARGET = 1.15
ROWS = [
    ("uniform", "uniform"),
    ("`mapnet-ht` (section A)", "mapnet-ht"),
    ("`mapnet-ht`, one block", "mapnet-ht-1layer"),
    ("`mapnet-ht-lite`", "mapnet-ht-lite"),
    ("the paper's MAP-Net", "mapnet"),
]
NOT_TRAINED = {"mapnet-ht-1layer": "not trained", "mapnet": "(section A)"}  # costed only: no losses in the two files


lite_table = module_at(HERE / "lite_table.py")


def runs() -> dict[str, dict[int, dict]]:
    """{arm: {seed: run}} of the three trained arms, each seed's pairing checked as lite_table.py checks it."""
    a, b = load(SECTION_A), load(LITE)
    arms = {
        "uniform": lite_table.by_seed(a, "uniform"),
        "mapnet-ht": lite_table.by_seed(a, "mapnet-ht"),
        "mapnet-ht-lite": lite_table.by_seed(b, "mapnet-ht-lite"),
    }
    for seed, lite in arms["mapnet-ht-lite"].items():
        for name in ("uniform", "mapnet-ht"):
            if any(arms[name][seed][k] != lite[k] for k in lite_table.PAIRING):
                raise ValueError(f"seed {seed}: {name} and mapnet-ht-lite are not paired")
    return arms


def lite() -> str:
    arms = runs()
    seeds = sorted(arms["mapnet-ht-lite"])
    final = {name: {s: by[s]["eval"][-1] for s in seeds} for name, by in arms.items()}
    steps = final["uniform"][seeds[0]]["step"]
    target = sum(final["uniform"][s]["eval_loss"] for s in seeds) / len(seeds)
    tiny, mini = step_costs(BENCH, "tiny"), step_costs(BENCH, "mini")
    # The printed ratio is rounded: the wall time takes the milliseconds' (learning_table.exact_step_costs).
    tiny_exact = exact_step_costs(BENCH, "tiny")
    ms = {p: block["uniform"][0] for p, block in bench_printout.read(BENCH)[0].presets.items()}  # uniform's ms/step
    body = []
    for label, name in ROWS:
        meets = name != "uniform" and tiny[name] <= TARGET and mini[name] <= TARGET
        cost = [
            f"{c[name]:.2f}× ({ms[p]:.0f} ms)" if name == "uniform" else bold(f"{c[name]:.2f}×", meets)
            for p, c in (("tiny", tiny), ("mini", mini))
        ]
        if name in NOT_TRAINED:
            body.append([bold(label, meets), *cost, NOT_TRAINED[name], "", "", "", ""])
            continue
        per_seed = ", ".join(f"{final[name][s]['eval_loss']:.3f}" for s in seeds)
        vs_u = mean_ci([final[name][s]["eval_loss"] - final["uniform"][s]["eval_loss"] for s in seeds])
        vs_ht = [mean_ci([final[name][s][k] - final["mapnet-ht"][s][k] for s in seeds]) for k, _ in lite_table.SETS]
        reached = lite_table.steps_to([arms[name][s]["eval"] for s in seeds], target)
        wall = "–" if reached is None else f"{reached / steps * tiny_exact[name]:.2f}×"
        body.append(
            [
                bold(label, meets),
                *cost,
                per_seed,
                "–" if name == "uniform" else pm(vs_u, "+.3f"),
                " / ".join(pm(d, "+.3f") for d in vs_ht) if name == "mapnet-ht-lite" else "–",
                "not reached" if reached is None else f"{reached:,.0f}",
                wall,
            ]
        )
    headings = [
        "arm",
        "step cost, `tiny`",
        "step cost, `mini`",
        "final loss per seed (mixed)",
        "Δ vs uniform",
        "Δ vs `mapnet-ht`: mixed / books / Wikipedia",
        "steps to uniform's final",
        "wall time to it",
    ]
    return re.sub(r"\|  (?=\|)", "| ", minus(markdown(headings, body)))


TABLES = {"mapnet-cheap-lite": lite}
