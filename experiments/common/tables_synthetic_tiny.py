"""The tables of experiments/synthetic-tiny/README.md (RESULTS section 1: uniform against MAP-Net on the embedded
synthetic corpus, `tiny`, 300 steps, 3 seeds, the paper's settings).

The rerun of 2026-12-03 (`rerun-2026-12-03/`: compare's results.json and each run's metrics.jsonl; the same data and
training settings, experiments/synthetic-tiny/section-1.toml) is the page's evidence; the first run's results.json
(`synthetic-tiny-uniform-vs-mapnet.json`, 2026-11-22, whole-set losses only) is kept beside it.

- `synthetic-tiny-final` (the rerun) and `synthetic-tiny-first-run`: per strategy, the held-out MLM loss of the mean
  curve over seeds at each evaluation step (three decimals), the last step as mean ± half its 95% t-interval (the
  aggregate's `final`, bold), the final accuracy in percent ± the interval's half-width in points, and the step at
  which the strategy's mean curve reaches uniform's final mean loss (`steps_to_target.mean_curve`).
- `synthetic-tiny-kinds`: held-out loss on the masked tokens of each kind (the runs' `eval_loss/<kind>` at steps 0
  and 300 in metrics.jsonl), mean ± half the 95% t-interval over the 3 seeds; step 0 is one row, since every strategy
  starts from the same weights per seed (the fairness checks say so), and its figure is the mean over seeds; the last
  row is MAP-Net − uniform paired by seed, mean ± half its 95% t-interval.
- `synthetic-tiny-mass`: MAP-Net's proposal mass per token kind (`mapnet/mass/<kind>`, a training step's mean over its
  sequences), in brackets the kind's share of the eligible tokens (`mapnet/share/<kind>`: what uniform masking gives
  it), the proposal's normalised entropy and the share of MAP-Net-masked sequences whose importance ratio was
  clipped, at four logged steps, each a mean over the 3 seeds; and at the last step the mass over the share (how many
  times uniform's rate MAP-Net gives a kind).
"""

from __future__ import annotations

import functools

from arms_table import pm
from compare_tables import REPO, load, markdown, strategy

from mapnet_cli.intervals import mean_ci
from mapnet_cli.metrics_file import read_metrics

FOLDER = "experiments/synthetic-tiny"
RERUN = f"{FOLDER}/rerun-2026-12-03"
RESULTS = f"{RERUN}/results.json"
FIRST_RUN = f"{FOLDER}/synthetic-tiny-uniform-vs-mapnet.json"
ROWS = [("uniform", "uniform"), ("MAP-Net", "mapnet")]
KINDS = ["determined", "long_range", "noise", "other"]
SEEDS = range(3)
MASS_STEPS = [10, 50, 160, 300]


def percent(ci: dict) -> str:
    """`13.8% ± 1.9`: a share's mean in percent and its interval's half-width in points."""
    return f"{100 * ci['mean']:.1f}% ± {100 * (ci['ci95'][1] - ci['ci95'][0]) / 2:.1f}"


def final_table(path: str) -> str:
    doc = load(path)
    target = doc["aggregate"]["target"]["strategy"]
    steps = doc["eval_steps"]
    body = []
    for label, name in ROWS:
        a = strategy(doc, name)
        curve = [format(a["curve"]["eval_loss"][a["steps"].index(s)]["mean"], ".3f") for s in steps[:-1]]
        reached = (a.get("steps_to_target") or {}).get("mean_curve")
        if reached is None:
            shown = "not reached"
        else:
            shown = f"{reached:,.0f}" + (" (by definition)" if name == target else "")
        final = f"**{pm(a['final']['eval_loss'], '.3f')}**"
        body.append([label, *curve, final, percent(a["final"]["eval_accuracy"]), shown])
    headings = ["strategy", *(f"step {s:,}" for s in steps), "final accuracy", "steps to uniform's final loss"]
    return markdown(headings, body)


@functools.cache  # every table cell reads these 15 small files again
def records(name: str, seed: int, kind: str) -> dict[int, dict]:
    """{step: record} of one run's metrics.jsonl lines of one kind ("eval", "train")."""
    evals, trains = read_metrics(REPO / RERUN / "runs" / name / f"seed-{seed}" / "metrics.jsonl")
    return {r["step"]: r for r in {"eval": evals, "train": trains}[kind]}


def over_seeds(name: str, kind: str, step: int, key: str) -> list[float]:
    return [records(name, seed, kind)[step][key] for seed in SEEDS]


def kinds_table() -> str:
    start = [f"{mean_ci(over_seeds('uniform', 'eval', 0, f'eval_loss/{k}'))['mean']:.3f}" for k in KINDS]
    body = [["both", "0", *start]]
    final_step = load(RESULTS)["eval_steps"][-1]
    for label, name in ROWS:
        cells = [pm(mean_ci(over_seeds(name, "eval", final_step, f"eval_loss/{k}")), ".3f") for k in KINDS]
        body.append([label, f"{final_step:,}", *cells])
    deltas = []
    for k in KINDS:
        key = f"eval_loss/{k}"
        pairs = zip(over_seeds("mapnet", "eval", final_step, key), over_seeds("uniform", "eval", final_step, key))
        deltas.append(pm(mean_ci([m - u for m, u in pairs]), "+.3f").replace("-", "−"))
    body.append(["MAP-Net − uniform, paired by seed", f"{final_step:,}", *deltas])
    return markdown(["strategy", "step", *KINDS], body)


def mass_table() -> str:
    def mean(step: int, key: str) -> float:
        return mean_ci(over_seeds("mapnet", "train", step, key))["mean"]

    body = []
    for step in MASS_STEPS:
        cells = [f"{mean(step, f'mapnet/mass/{k}'):.3f} ({mean(step, f'mapnet/share/{k}'):.3f})" for k in KINDS]
        clipped = over_seeds("mapnet", "train", step, "mapnet/clipped_fraction")
        # None where no sequence of the step was MAP-Net-masked (the exploration schedule starts all uniform).
        shown = "–" if None in clipped else f"{mean_ci(clipped)['mean']:.0%}"
        body.append([f"{step:,}", *cells, f"{mean(step, 'mapnet/entropy'):.2f}", shown])
    last = MASS_STEPS[-1]
    ratios = [f"{mean(last, f'mapnet/mass/{k}') / mean(last, f'mapnet/share/{k}'):.2f}×" for k in KINDS]
    body.append([f"{last:,}: mass ÷ share", *ratios, "", ""])
    return markdown(["step", *KINDS, "normalised entropy", "clipped ratios"], body)


TABLES = {
    "synthetic-tiny-final": lambda: final_table(RESULTS),
    "synthetic-tiny-first-run": lambda: final_table(FIRST_RUN),
    "synthetic-tiny-kinds": kinds_table,
    "synthetic-tiny-mass": mass_table,
}
