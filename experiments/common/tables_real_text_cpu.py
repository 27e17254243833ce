"""experiments/real-text-cpu/README.md's tables (section 2: `tiny` and `mini` on real text), from its kept results."""

from functools import partial

from compare_tables import Column, curve, final, steps_to_target, table

TINY = "experiments/real-text-cpu/tiny/results-ablations.json"
ABLATIONS = [
    ("uniform", "uniform"),
    ("MAP-Net (paper)", "mapnet"),
    ("no importance weight", "mapnet-noweight"),
    ("unclipped weight", "mapnet-unclipped"),
    ("no exploration", "mapnet-noexplore"),
]
FINAL = [
    Column("mixed", final("eval_loss")),
    Column("held-out books", final("eval_loss@books")),
    Column("held-out Wikipedia", final("eval_loss@wiki")),
    Column("accuracy (mixed)", final("eval_accuracy", ".1%")),
    Column("steps to uniform's final loss (mixed)", steps_to_target()),
]

TABLES = {
    "real-text-tiny-final": partial(table, TINY, ABLATIONS, FINAL),
    "real-text-tiny-curve": partial(curve, TINY, "eval_loss", ABLATIONS),
}
