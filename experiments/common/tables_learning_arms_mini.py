"""experiments/learning-arms-mini/README.md's tables (RESULTS section A2: uniform, 30% masking and the lite MAP-Net
arm past the plateau at `mini`, 1,000 steps, 3 paired seeds), from its kept `mapnet compare` results.json and the
two `bench_strategies.py` printouts run alone beside the paused lanes (bench_strategies.txt, bench_strategies-2.txt),
with learning_table.py's readings:

- the final held-out losses (mean ± half the 95% t-interval over seeds, 3 decimals; accuracy in percent, the
  half-interval in points) and how many seeds left the plateau (final mixed loss ≥ 1 nat below the training tokens'
  unigram entropy); uniform's row, the reference, lists its seeds' final mixed losses and how far below the entropy
  they ended;
- the paired differences to uniform (arm − uniform per seed), seeds below uniform, steps to uniform's final mean
  mixed loss (interpolated on the arm's mean curve, as a share of the run's steps, then per seed; "–" not reached),
  the step cost each printout printed, and the wall time to uniform's final (steps / the run's steps × the step
  cost) over the two printouts. The wall time takes each printout's ratio of its printed milliseconds (736.4 / 644.0
  = 1.1435, good to ±0.0002 at these sizes) rather than its printed ratio, rounded to ±0.005 (1.14), whose rounding
  alone moves the product's second decimal (0.767 × 1.14 = 0.875);
- the mean curves on the mixed set at every evaluation.

Bold, by rule: the arms whose Δ mixed interval lies below zero (their name, final losses, Δ mixed, steps and wall
time).
"""

from __future__ import annotations

from collections.abc import Callable

import bench_printout
from arms_table import pm
from compare_tables import REPO, curve, load, markdown, strategy
from learning_table import left_plateau
from tables_blimp_arms import better, bold, minus, share
from tables_learning_arms_tiny import paired_cells, seed_finals

RESULTS = "experiments/learning-arms-mini/results.json"
BENCH = ("experiments/learning-arms-mini/bench_strategies.txt", "experiments/learning-arms-mini/bench_strategies-2.txt")
PRESET = "mini"


def costs() -> list[dict[str, tuple[float, float]]]:
    """Each printout's {arm: (ms, printed ratio)} at `mini`, in the order of BENCH (one run a file)."""
    out = []
    for path in BENCH:
        (run,) = bench_printout.read(REPO / path)
        out.append(run.presets[PRESET])
    return out


def final_losses() -> str:
    doc = load(RESULTS)
    entropy = doc["unigram"]["train_entropy"]
    body = []
    for name in doc["strategies"]:
        f, on = strategy(doc, name)["final"], better(doc, name)
        left = left_plateau(doc, name)
        if name == "uniform":
            finals = seed_finals(doc, name)
            gaps = sorted(entropy - x for x in finals)
            left += (
                " ("
                + ", ".join(f"{x:.3f}" for x in finals)
                + f": {gaps[0]:.2f}–{gaps[-1]:.2f} nats below {entropy:.3f})"
            )
        cells = [
            *(pm(f[k], ".3f") for k in ("eval_loss", "eval_loss@books", "eval_loss@wiki")),
            share(f["eval_accuracy"]),
        ]
        body.append([bold(name, on), *(bold(c, on) for c in cells), left])
    return markdown(["arm", "mixed", "books", "Wikipedia", "accuracy (mixed)", "left the plateau"], body)


def paired_costs() -> str:
    doc = load(RESULTS)
    printouts = costs()
    steps = max(doc["eval_steps"])
    target = f"{doc['aggregate']['target']['final_mean_eval_loss']:.3f}"
    body = []
    for name in doc["strategies"]:
        if name == "uniform":
            continue
        on = better(doc, name)
        mean, cells = paired_cells(doc, name, steps)
        ratios = ", ".join(f"{p[name][1]:.2f}×" for p in printouts)
        if mean is None:
            wall = "–"
        else:
            walls = sorted(mean / steps * p[name][0] / p["uniform"][0] for p in printouts)
            wall = bold(f"{walls[0]:.2f}–{walls[-1]:.2f}×", on)
        body.append([*cells, ratios, wall])
    headings = ["arm", "Δ mixed", "Δ books", "Δ Wikipedia", "seeds below uniform", f"steps to {target} (per seed)"]
    return minus(markdown([*headings, "idle step cost (two runs)", f"wall time to {target}"], body))


def mean_curves() -> str:
    return curve(RESULTS, "eval_loss", first="arm")


TABLES: dict[str, Callable[[], str]] = {
    "learning-arms-mini-final": final_losses,
    "learning-arms-mini-paired": paired_costs,
    "learning-arms-mini-curves": mean_curves,
}
