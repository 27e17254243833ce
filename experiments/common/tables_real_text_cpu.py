"""experiments/real-text-cpu/README.md's tables (section 2: `tiny`, `mini` and the longer `tiny` run on real text), from
its kept results.

From the kept runs of the original session (mapnet at 32b4155):
- `real-text-tiny-final`, `real-text-tiny-curve`: tiny/results-ablations.json (all five strategies).
- `real-text-mini-final`, `real-text-mini-curves`: mini/results.json.
- `real-text-tiny-long`: tiny-long/results.json.

From the 2026-12-03 rerun (`rerun-2026-12-03/`: uniform and MAP-Net only, 3 seeds, the same shards' evaluation sets,
initial weights and data order per seed as the kept runs, mapnet of that day; no variance, no GLUE):
- `real-text-rerun-<preset>-final`: the whole-set final losses (mean ± half the 95% t-interval over seeds) of the
  kept runs (<preset>/results.json) and of the rerun (rerun-2026-12-03/<preset>/results.json), row by row.
- `real-text-rerun-<preset>-frequency`: rerun-2026-12-03/<preset>/loss_by_frequency.json (loss_by_frequency.py
  --json on the rerun's final checkpoints): per held-out set each frequency group's share of the masked tokens, and
  per strategy its final loss on each group, mean ± std (ddof 1) over the 3 seeds; bold the lower of the two means;
  the last row MAP-Net's mean minus uniform's.
- `real-text-rerun-<preset>-mapnet`: the rerun's MAP-Net training lines (runs/mapnet/seed-<n>/metrics.jsonl,
  `kind = "train"`) at every 100th step, each the mean over the 3 seeds of that one logged batch's value.
- `real-text-rerun-<preset>-inspect`: rerun-2026-12-03/<preset>/inspect-masks-books.json (`mapnet inspect-masks`
  on MAP-Net seed 0's final checkpoint, held-out books): its `most` and `least` word lists.
"""

import json
import statistics
from functools import partial

from arms_table import pm
from compare_tables import (
    REPO,
    Column,
    curve,
    final,
    load,
    markdown,
    rows_of,
    seconds_per_step,
    signed,
    steps_to_target,
    strategy,
    table,
)

from mapnet_cli.metrics_file import read_metrics

TINY = "experiments/real-text-cpu/tiny/results-ablations.json"
MINI = "experiments/real-text-cpu/mini/results.json"
LONG = "experiments/real-text-cpu/tiny-long/results.json"
RERUN = "experiments/real-text-cpu/rerun-2026-12-03"
ABLATIONS = [
    ("uniform", "uniform"),
    ("MAP-Net (paper)", "mapnet"),
    ("no importance weight", "mapnet-noweight"),
    ("unclipped weight", "mapnet-unclipped"),
    ("no exploration", "mapnet-noexplore"),
]
PAIR = [("uniform", "uniform"), ("MAP-Net", "mapnet")]
SETS = [("mixed", "eval_loss"), ("books", "eval_loss@books"), ("Wikipedia", "eval_loss@wiki")]
HELD = [("books", "heldout-books"), ("Wikipedia", "heldout-wiki")]
GROUPS = [
    ("100 most frequent types", "top-100 types"),
    ("types 101–1000", "types 101-1000"),
    ("rarer types", "rarer types"),
    ("all", "all"),
]
SEEDS = ["seed-0", "seed-1", "seed-2"]


def glue(fmt: str = ".2f"):
    """The GLUE quick score (a fraction in the file) in points, mean ± half its 95% interval over seeds."""

    def cell(doc: dict, name: str) -> str:
        g = strategy(doc, name).get("glue")
        if g is None:
            return "–"
        return pm({"mean": 100 * g["mean"], "ci95": [100 * x for x in g["ci95"]]}, fmt)

    return cell


def mean_at(key: str, step: int, fmt: str = ".3f"):
    """The mean curve of `key` at one evaluation step, the mean alone (no interval)."""

    def cell(doc: dict, name: str) -> str:
        a = strategy(doc, name)
        return format(a["curve"][key][a["steps"].index(step)]["mean"], fmt)

    return cell


def curve_lists(path: str, rows, sets, fmt: str = ".3f", first: str = "strategy") -> str:
    """One row per strategy, one column per evaluation set: its mean curve at every evaluation step, comma-separated."""
    doc = load(path)
    body = []
    for label, name in rows_of(doc, rows):
        a = strategy(doc, name)
        body.append([label, *(", ".join(format(p["mean"], fmt) for p in a["curve"][key]) for _, key in sets)])
    return markdown([first, *(heading for heading, _ in sets)], body)


FINAL_LOSSES = [  # the three held-out sets' final loss and the mixed set's accuracy, in every final table here
    Column("mixed", final("eval_loss")),
    Column("held-out books", final("eval_loss@books")),
    Column("held-out Wikipedia", final("eval_loss@wiki")),
    Column("accuracy (mixed)", final("eval_accuracy", ".1%")),
]
FINAL = [*FINAL_LOSSES, Column("steps to uniform's final loss (mixed)", steps_to_target())]
MINI_FINAL = [
    *FINAL_LOSSES,
    Column("s/step", seconds_per_step()),
    Column("GLUE quick", glue()),
]
LONG_FINAL = [
    *(Column(str(s), mean_at("eval_loss", s)) for s in (500, 1000, 1500)),
    Column("2000 (mixed)", final("eval_loss")),
    Column("books", final("eval_loss@books")),
    Column("Wikipedia", final("eval_loss@wiki")),
    Column("accuracy (mixed)", final("eval_accuracy", ".1%")),
]


# ------------------------------------------------------------------ the 2026-12-03 rerun
def rerun_json(preset: str, name: str) -> dict:
    return json.loads((REPO / RERUN / preset / name).read_text(encoding="utf-8"))


def kept_vs_rerun(preset: str) -> str:
    """Per strategy the kept runs' final losses, then the rerun's (mean ± half the 95% interval over seeds)."""
    kept = load(f"experiments/real-text-cpu/{preset}/results.json")
    rerun = load(f"{RERUN}/{preset}/results.json")
    body = []
    for label, name in PAIR:
        for run, doc in (("kept runs", kept), ("rerun 2026-12-03", rerun)):
            body.append([f"{label}, {run}", *(c.cell(doc, name) for c in FINAL_LOSSES)])
    return markdown(["strategy, run", *(c.heading for c in FINAL_LOSSES)], body)


def frequency(preset: str) -> str:
    """Final loss per frequency group of the masked token, mean ± std over seeds; each set's group shares first."""
    doc = rerun_json(preset, "loss_by_frequency.json")
    body = []
    for label, held in HELD:
        d = doc[held]
        body.append(
            [f"{label} (share of masked tokens)", "", *(format(d["share"][k], ".1%") for _, k in GROUPS[:-1]), ""]
        )
        means = {s: {k: statistics.mean(d[s][k]) for _, k in GROUPS} for _, s in PAIR}
        for name, s in PAIR:
            cells = []
            for _, k in GROUPS:
                cell = f"{means[s][k]:.3f} ± {statistics.stdev(d[s][k]):.3f}"
                cells.append(f"**{cell}**" if means[s][k] == min(m[k] for m in means.values()) else cell)
            body.append([label, name, *cells])
        body.append(
            [label, "MAP-Net − uniform", *(signed(means["mapnet"][k] - means["uniform"][k]) for _, k in GROUPS)]
        )
    return markdown(["held-out set", "strategy", *(h for h, _ in GROUPS)], body)


def train_lines(preset: str, seed: str) -> dict[int, dict]:
    _, trains = read_metrics(REPO / RERUN / preset / "runs" / "mapnet" / seed / "metrics.jsonl")
    return {r["step"]: r for r in trains}


MAPNET_ROWS = [
    ("normalised entropy of the proposal", "mapnet/entropy", ".3f"),
    ("loss on MAP-chosen positions (nats)", "mapnet/loss_map_tokens", ".3f"),
    ("loss on uniformly chosen positions (nats)", "mapnet/loss_uniform_tokens", ".3f"),
    ("log-ratio log r of a MAP-Net mask", "mapnet/log_ratio", "+.2f"),
    ("share of MAP-Net weights clipped", "mapnet/clipped_fraction", ".2f"),
    ("uniformly masked share of the batch", "mapnet/uniform_fraction", ".2f"),
]


def mapnet_diagnostics(preset: str, every: int = 100) -> str:
    """MAP-Net's logged training diagnostics at every `every`-th step up to the last, mean over the seeds."""
    runs = [train_lines(preset, s) for s in SEEDS]
    steps = [t for t in sorted(runs[0]) if t % every == 0]
    body = []
    for label, key, fmt in MAPNET_ROWS:
        means = [statistics.mean(r[t][key] for r in runs) for t in steps]
        body.append([label, *(signed(m, 2) if fmt.startswith("+") else format(m, fmt) for m in means)])
    return markdown(["step", *(str(t) for t in steps)], body)


def inspect(preset: str) -> str:
    """inspect-masks' most and least masked words: occurrences, mask rate, and the rate relative to uniform."""
    doc = rerun_json(preset, "inspect-masks-books.json")

    def cells(word: dict) -> list[str]:
        return [
            f"*{word['word']}*",
            str(word["occurrences"]),
            format(word["mask_rate"], ".3f"),
            f"{word['relative']:.2f}×",
        ]

    body = [[str(i + 1), *cells(m), *cells(l)] for i, (m, l) in enumerate(zip(doc["most"], doc["least"], strict=True))]
    headings = ["", "most masked", "occurrences", "mask rate", "× uniform"]
    headings += ["least masked", "occurrences", "mask rate", "× uniform"]
    return markdown(headings, body)


TABLES = {
    "real-text-tiny-final": partial(table, TINY, ABLATIONS, FINAL),
    "real-text-tiny-curve": partial(curve, TINY, "eval_loss", ABLATIONS),
    "real-text-mini-final": partial(table, MINI, PAIR, MINI_FINAL),
    "real-text-mini-curves": partial(curve_lists, MINI, PAIR, SETS),
    "real-text-tiny-long": partial(table, LONG, PAIR, LONG_FINAL),
    "real-text-rerun-tiny-final": partial(kept_vs_rerun, "tiny"),
    "real-text-rerun-tiny-frequency": partial(frequency, "tiny"),
    "real-text-rerun-tiny-mapnet": partial(mapnet_diagnostics, "tiny"),
    "real-text-rerun-tiny-inspect": partial(inspect, "tiny"),
    "real-text-rerun-mini-final": partial(kept_vs_rerun, "mini"),
    "real-text-rerun-mini-frequency": partial(frequency, "mini"),
    "real-text-rerun-mini-mapnet": partial(mapnet_diagnostics, "mini"),
}
