"""The headline table of docs/results.md (section A): what each masking arm buys over uniform on an
encoder that learns, in loss, in steps and in wall time.

    uv run python experiments/common/learning_table.py runs/learning/arms-tiny/results.json \
        experiments/learning-arms-tiny/bench_strategies.txt

Loss: the paired difference to uniform (per seed index: same initial weights, data order and
evaluation masks), arm minus uniform, mean ± 95% t-interval over seeds, on each held-out set (the
sets score the same models: one comparison per seed). Steps: to uniform's final mean loss on the
mixed set, interpolated on the arm's mean curve (uniform takes the whole run by definition). Cost:
the step cost `benchmarks/bench_strategies.py` printed (its printout is the second argument; the column
names the machine it ran on), because the comparison's own runs shared the machine. Wall time to uniform's
final loss, relative to uniform: (steps to it / the run's steps) x step cost; "–" where the arm never
reached it.
"Left the plateau": seeds whose final mixed loss is at least 1 nat below the training tokens' unigram
entropy (the bar of RESULTS section 0).
"""

from __future__ import annotations

import json
import sys

import bench_printout
from arms_table import pm


def step_costs(path: str, preset: str | None = None) -> dict[str, float]:
    """{arm: step cost relative to uniform, as the bench_strategies.py printout printed it} (its first run and
    preset block unless `preset` is given; uniform is 1.0)."""
    return {arm: ratio for arm, (ratio, _) in bench_printout.step_costs([path], preset).items()}


def exact_step_costs(path: str, preset: str | None = None) -> dict[str, float]:
    """The same step costs from the printout's milliseconds, for products: the printed ratio is rounded to two
    decimals, so a wall time made from it can be one hundredth off (0.767 × 1.14 = 0.87× where the milliseconds
    give 0.767 × 736.4 / 644.0 = 0.88×)."""
    out = {}
    for arm, (_, run) in bench_printout.step_costs([path], preset).items():
        block = run.presets[preset] if preset else next(iter(run.presets.values()))
        out[arm] = block[arm][0] / block["uniform"][0]
    return out


def machine(path: str) -> str:
    """Where the printout's costs were measured, for a column header ("CPU, 2 threads", "H200")."""
    return bench_printout.read(path)[0].where


def left_plateau(doc: dict, name: str) -> str:
    """ "k of n": the arm's seeds whose final mixed loss is at least 1 nat below the training tokens' unigram
    entropy."""
    bar = doc["unigram"]["train_entropy"] - 1.0
    mine = [r for r in doc["runs"] if r["strategy"] == name]
    return f"{sum(r['eval'][-1]['eval_loss'] <= bar for r in mine)} of {len(mine)}"


def seeds_below(doc: dict, name: str) -> str:
    """ "k of n": the arm's seeds whose final mixed loss is below uniform's on the same seed."""
    uniform = {r["seed_index"]: r for r in doc["runs"] if r["strategy"] == "uniform"}
    mine = [r for r in doc["runs"] if r["strategy"] == name]
    below = sum(r["eval"][-1]["eval_loss"] < uniform[r["seed_index"]]["eval"][-1]["eval_loss"] for r in mine)
    return f"{below} of {len(mine)}"


def main(results: str, bench: str) -> None:
    doc = json.load(open(results, encoding="utf-8"))
    agg, costs, exact = doc["aggregate"]["strategies"], step_costs(bench), exact_step_costs(bench)
    steps = max(doc["eval_steps"])
    unigram = doc.get("unigram", {})
    print(
        f"training tokens' unigram entropy {unigram.get('train_entropy', float('nan')):.3f}; "
        f"uniform's final mean loss (mixed) {doc['aggregate']['target']['final_mean_eval_loss']:.3f}; "
        f"{steps} steps; seeds {doc['seeds']}"
    )
    print()
    print(
        "| arm | final loss, mixed | left the plateau | Δ mixed | Δ books | Δ Wikipedia | seeds below uniform | "
        f"steps to uniform's final | step cost ({machine(bench)}) | wall to uniform's final |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, a in agg.items():
        left = left_plateau(doc, name)
        final = pm(a["final"]["eval_loss"], ".3f")
        cost_ratio = costs.get(name)
        if name == "uniform":
            print(f"| uniform | {final} | {left} | – | – | – | – | {steps} | 1.00× | 1.00× |")
            continue
        d = a.get("paired_vs_uniform", {})
        reached = a.get("steps_to_target", {}).get("mean_curve")
        wall = "–" if reached is None or cost_ratio is None else f"{reached / steps * exact[name]:.2f}×"
        print(
            f"| {name} | {final} | {left} | {pm(d.get('eval_loss'), '+.3f')} | {pm(d.get('eval_loss@books'), '+.3f')} "
            "| "
            f"{pm(d.get('eval_loss@wiki'), '+.3f')} | {seeds_below(doc, name)} | "
            f"{'not reached' if reached is None else f'{reached:.0f}'} | "
            f"{'–' if cost_ratio is None else f'{cost_ratio:.2f}×'} | {wall} |"
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
