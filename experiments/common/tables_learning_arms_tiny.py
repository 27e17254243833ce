"""experiments/learning-arms-tiny/README.md's tables (RESULTS section A: ten masking arms past the plateau, `tiny`,
1,200 steps, 3 paired seeds), from its kept `mapnet compare` results.json and the idle `bench_strategies.py` printout
bench_strategies-all.txt, with learning_table.py's readings:

- the final held-out losses (mean ± half the 95% t-interval over seeds, 3 decimals; accuracy in percent) and how
  many seeds left the plateau (final mixed loss ≥ 1 nat below the training tokens' unigram entropy), with the seeds'
  final mixed losses where the interval is wider than ±0.25 nats;
- the paired differences to uniform (arm − uniform per seed), seeds below uniform, steps to uniform's final mean
  mixed loss (interpolated on the arm's mean curve, then per seed; "–" not reached), the printed step cost (ms and
  ratio) and the wall time to uniform's final (steps / the run's steps × the printed ratio);
- the mean curves on the mixed set at every evaluation.

Bold, by rule: the arms whose Δ mixed interval lies below zero (their final losses; their Δ mixed and steps).
"""

from __future__ import annotations

from collections.abc import Callable

import bench_printout
from arms_table import pm
from compare_tables import REPO, curve, load, markdown, strategy
from learning_table import left_plateau, seeds_below
from tables_blimp_arms import better, bold, minus, reached, share

RESULTS = "experiments/learning-arms-tiny/results.json"
BENCH = "experiments/learning-arms-tiny/bench_strategies-all.txt"
WIDE = 0.25  # nats: a final mixed interval wider than this lists the seeds' finals
LABEL = {"mapnet": "mapnet (paper)"}


def seed_finals(doc: dict, name: str) -> list[float]:
    runs = sorted((r for r in doc["runs"] if r["strategy"] == name), key=lambda r: r["seed_index"])
    return [r["eval"][-1]["eval_loss"] for r in runs]


def final_losses() -> str:
    doc = load(RESULTS)
    body = []
    for name in doc["strategies"]:
        f, on = strategy(doc, name)["final"], better(doc, name)
        left = left_plateau(doc, name)
        ci = f["eval_loss"]["ci95"]
        if (ci[1] - ci[0]) / 2 > WIDE:
            left += " (" + ", ".join(f"{x:.3f}" for x in seed_finals(doc, name)) + ")"
        cells = [
            *(pm(f[k], ".3f") for k in ("eval_loss", "eval_loss@books", "eval_loss@wiki")),
            share(f["eval_accuracy"]),
        ]
        body.append([LABEL.get(name, name), *(bold(c, on) for c in cells), left])
    bar = f"≥ 1 nat below {doc['unigram']['train_entropy']:.3f}"
    return markdown(["arm", "mixed", "books", "Wikipedia", "accuracy (mixed)", f"left the plateau ({bar})"], body)


def paired_cells(doc: dict, name: str, steps: int | None = None) -> tuple[float | None, list[str]]:
    """An arm's paired columns (arm − uniform per seed on each set, seeds below uniform, the step its mean curve
    reaches uniform's final loss with its share of `steps` where given, then per seed), bold where it is below
    uniform beyond the interval; and that step (None: not reached), for the wall-time column."""
    a, on = strategy(doc, name), better(doc, name)
    d = a["paired_vs_uniform"]
    mean, reach, per_seed = reached(a, steps)
    reach = reach if mean is None else bold(reach, on)
    if any(c.isdigit() for c in per_seed):
        reach += f" ({per_seed})"
    deltas = [bold(pm(d["eval_loss"], "+.3f"), on), pm(d["eval_loss@books"], "+.3f"), pm(d["eval_loss@wiki"], "+.3f")]
    return mean, [name, *deltas, seeds_below(doc, name), reach]


def paired_costs() -> str:
    doc = load(RESULTS)
    (run,) = bench_printout.read(REPO / BENCH)
    cost = run.presets["tiny"]
    steps = max(doc["eval_steps"])
    target = f"{doc['aggregate']['target']['final_mean_eval_loss']:.3f}"
    body = []
    for name in doc["strategies"]:
        if name == "uniform":
            continue
        mean, cells = paired_cells(doc, name)
        ms, ratio = cost[name]
        body.append([*cells, f"{ms:.1f} ms, {ratio:.2f}×", "–" if mean is None else f"{mean / steps * ratio:.2f}×"])
    headings = ["arm", "Δ mixed", "Δ books", "Δ Wikipedia", "seeds below uniform", f"steps to {target} (per seed)"]
    return minus(markdown([*headings, "idle step cost", f"wall time to {target}"], body))


def mean_curves() -> str:
    return curve(RESULTS, "eval_loss", first="arm")


TABLES: dict[str, Callable[[], str]] = {
    "learning-arms-tiny-final": final_losses,
    "learning-arms-tiny-paired": paired_costs,
    "learning-arms-tiny-curves": mean_curves,
}
