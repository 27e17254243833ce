"""experiments/real-text-cpu/README.md's tables (section 2: `tiny`, `mini` and the longer `tiny` run on real text), from
its kept results."""

from functools import partial

from arms_table import pm
from compare_tables import (
    Column,
    curve,
    final,
    load,
    markdown,
    rows_of,
    seconds_per_step,
    steps_to_target,
    strategy,
    table,
)

TINY = "experiments/real-text-cpu/tiny/results-ablations.json"
MINI = "experiments/real-text-cpu/mini/results.json"
LONG = "experiments/real-text-cpu/tiny-long/results.json"
ABLATIONS = [
    ("uniform", "uniform"),
    ("MAP-Net (paper)", "mapnet"),
    ("no importance weight", "mapnet-noweight"),
    ("unclipped weight", "mapnet-unclipped"),
    ("no exploration", "mapnet-noexplore"),
]
PAIR = [("uniform", "uniform"), ("MAP-Net", "mapnet")]
SETS = [("mixed", "eval_loss"), ("books", "eval_loss@books"), ("Wikipedia", "eval_loss@wiki")]


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

TABLES = {
    "real-text-tiny-final": partial(table, TINY, ABLATIONS, FINAL),
    "real-text-tiny-curve": partial(curve, TINY, "eval_loss", ABLATIONS),
    "real-text-mini-final": partial(table, MINI, PAIR, MINI_FINAL),
    "real-text-mini-curves": partial(curve_lists, MINI, PAIR, SETS),
    "real-text-tiny-long": partial(table, LONG, PAIR, LONG_FINAL),
}
