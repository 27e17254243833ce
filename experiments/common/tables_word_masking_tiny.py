"""experiments/word-masking-tiny/README.md's tables (RESULTS section 5: whole-word, span and PMI masking against
uniform, `tiny`, 600 steps), from its kept `mapnet compare` results.json.

- `word-masking-tiny-final`: each arm's final held-out loss per set (mean ± half its 95% t-interval over seeds), the
  paired difference to uniform per set (the aggregate's paired_vs_uniform) and the seeds whose final mixed loss is
  below uniform's on the same seed, 3 decimals. `final_table` is shared with tables_warm_start_tiny.py: there it adds
  the steps to uniform's final mean loss (the aggregate's, on the mean curve; uniform takes the whole run) and bolds
  a row whose mixed Δ interval lies below zero.
- `word-masking-tiny-curve`: the mean curve of the mixed set at every evaluation step, 3 decimals.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial

from arms_table import pm
from compare_tables import curve, load, markdown, strategy
from learning_table import seeds_below
from tables_blimp_arms import below_zero, bold, minus

RESULTS = "experiments/word-masking-tiny/results.json"
ROWS = [(name, name) for name in ("uniform", "whole-word", "span", "pmi", "mapnet-ht")]
SETS = [("mixed", "eval_loss"), ("held-out books", "eval_loss@books"), ("held-out Wikipedia", "eval_loss@wiki")]
CURVE_ROWS = [(name, name) for name in ("uniform", "pmi", "whole-word", "span")]


def final_table(path: str, rows: Sequence[tuple[str, str]], steps: bool = False) -> str:
    doc = load(path)
    body = []
    for label, name in rows:
        a = strategy(doc, name)
        d = a.get("paired_vs_uniform", {})
        cells = [pm(a["final"][key], ".3f") for _, key in SETS]
        if name == "uniform":
            cells += [""] * 4
        else:
            cells += [pm(d.get(key), "+.3f") for _, key in SETS] + [seeds_below(doc, name)]
        if steps:
            target = (a.get("steps_to_target") or {}).get("mean_curve")
            reached = max(doc["eval_steps"]) if name == "uniform" else target
            cells.append("not reached" if reached is None else f"{reached:,.0f}")
        body.append([bold(c, below_zero(d.get("eval_loss"))) for c in [label, *cells]])
    headings = ["strategy", *(h for h, _ in SETS), "Δ mixed", "Δ books", "Δ Wikipedia", "seeds below uniform (mixed)"]
    if steps:
        headings.append("steps to uniform's final (mean curve)")
    return re.sub(r"\|  (?=\|)", "| ", minus(markdown(headings, body)))


TABLES = {
    "word-masking-tiny-final": partial(final_table, RESULTS, ROWS),
    "word-masking-tiny-curve": partial(curve, RESULTS, "eval_loss", CURVE_ROWS),
}
