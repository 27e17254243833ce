"""The BLiMP table of experiments/blimp-arms (results section E): every masking arm judged on zero-shot grammar, at
equal
steps and at equal wall time, paired by seed.

    uv run python experiments/common/blimp_table.py runs/blimp-arms/arms/results.json \
        experiments/learning-arms-tiny/bench_strategies-all.txt [more bench printouts...]

From `mapnet compare --blimp ... --blimp-every-checkpoint` (BLiMP at every kept checkpoint of every run).
Per arm: who left the plateau (final mixed loss at least 1 nat under the training tokens' unigram entropy),
the paired loss difference to uniform, BLiMP at the end (mean ± 95% t-interval over seeds), its paired
difference to uniform at equal steps, and at equal wall time. Equal wall time uses the step costs
`benchmarks/bench_strategies.py` printed (the printouts given; the first figure found for an arm wins), because the
comparison's own runs shared the machine: an arm whose step costs r x uniform's is read at step S / r of
its BLiMP curve (interpolated between checkpoints) against uniform's final; a cheaper arm (r < 1) is read
at its final against uniform's curve at step S x r. One comparison per seed: the held-out sets and the
BLiMP paradigms score the same models. Differences are in accuracy points (x100).
"""

from __future__ import annotations

import json
import sys

import bench_printout
import numpy as np

from mapnet_cli.intervals import mean_ci


def fmt(ci: dict | None, f: str = "+.1f", scale: float = 100.0) -> str:
    if not ci:
        return "–"
    mean = format(scale * ci["mean"], f)
    return (
        mean if ci["ci95"] is None else f"{mean} ± {format(scale * (ci['ci95'][1] - ci['ci95'][0]) / 2, f.lstrip('+'))}"
    )


def at_step(run: dict, step: float) -> float | None:
    """The run's BLiMP curve at `step`, linear between scored checkpoints; None outside them (never the nearest end)."""
    curve = run["blimp"]["curve"]
    steps = [c["step"] for c in curve]
    if not steps[0] <= step <= steps[-1]:
        return None
    return float(np.interp(step, steps, [c["accuracy"] for c in curve]))


def main(results: str, benches: list[str]) -> None:
    doc = json.load(open(results, encoding="utf-8"))
    agg, runs = doc["aggregate"]["strategies"], doc["runs"]
    found = bench_printout.step_costs(benches)
    costs = {arm: ratio for arm, (ratio, _) in found.items()}
    machines = " / ".join(dict.fromkeys(run.where for _, run in found.values()))
    steps = max(doc["eval_steps"])
    uniform = {r["seed_index"]: r for r in runs if r["strategy"] == "uniform"}
    bar = doc["unigram"]["train_entropy"] - 1.0
    ctl = doc["aggregate"]["blimp_control"]
    b = doc["blimp"]
    unigram = "–" if ctl.get("unigram") is None else f"{100 * ctl['unigram']:.1f}"
    print(
        f"BLiMP {b['method']}, {b['paradigms']} paradigms x first {b['pairs_per_paradigm']} pairs = {b['pairs']:,} "
        "pairs; "
        f"{steps} steps; seeds {doc['seeds']}; random-init control {fmt(ctl['random_init'], '.1f')}, "
        f"unigram control {unigram}"
    )
    print()
    print(
        "| arm | left the plateau | Δ loss, mixed (nats) | BLiMP | Δ BLiMP vs uniform, equal steps | "
        f"Δ vs random init | step cost ({machines}) | Δ BLiMP vs uniform, equal wall time |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, a in agg.items():
        mine = sorted((r for r in runs if r["strategy"] == name), key=lambda r: r["seed_index"])
        left = f"{sum(r['eval'][-1]['eval_loss'] <= bar for r in mine)} of {len(mine)}"
        r = costs.get(name)
        if name == "uniform":
            print(
                f"| uniform | {left} | – | {fmt(a['blimp'], '.1f')} | – | {fmt(a.get('blimp_vs_random_init'))} | "
                "1.00× | – |"
            )
            continue
        d = a.get("paired_vs_uniform", {})
        wall = "–"
        if r is not None:
            if r >= 1:
                pairs = [(at_step(x, steps / r), uniform[x["seed_index"]]["blimp"]["accuracy"]) for x in mine]
                where = f"step {steps / r:.0f}"
            else:
                pairs = [(x["blimp"]["accuracy"], at_step(uniform[x["seed_index"]], steps * r)) for x in mine]
                where = f"uniform at step {steps * r:.0f}"
            diffs = [None if a is None or b is None else a - b for a, b in pairs]
            wall = f"– (not scored at {where})" if None in diffs else f"{fmt(mean_ci(diffs))} ({where})"
        print(
            f"| {name} | {left} | {fmt(d.get('eval_loss'), '+.3f', 1.0)} | {fmt(a['blimp'], '.1f')} | "
            f"{fmt(d.get('blimp'))} | "
            f"{fmt(a.get('blimp_vs_random_init'))} | {'–' if r is None else f'{r:.2f}×'} | {wall} |"
        )
    print()
    print("Fields (BLiMP per field, mean over seeds):")
    fields = sorted({f for a in agg.values() for f in a.get("blimp_fields", {})})
    print("| arm | " + " | ".join(fields) + " |")
    print("|---|" + "---|" * len(fields))
    for name, a in agg.items():
        print(f"| {name} | " + " | ".join(fmt(a["blimp_fields"].get(f), ".1f") for f in fields) + " |")
    print()
    if not doc["blimp"].get("every_checkpoint"):
        print("(final checkpoints only: no curve, and no BLiMP at equal wall time; compare --blimp-every-checkpoint)")
        return
    print("BLiMP curve (mean over seeds) by step:")
    some = next(iter(agg.values()))
    print("| arm | " + " | ".join(str(s) for s in some["blimp_curve"]["steps"]) + " |")
    print("|---|" + "---|" * len(some["blimp_curve"]["steps"]))
    for name, a in agg.items():
        print(f"| {name} | " + " | ".join(f"{100 * p['mean']:.1f}" for p in a["blimp_curve"]["accuracy"]) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
