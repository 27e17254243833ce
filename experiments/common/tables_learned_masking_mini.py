"""experiments/learned-masking-mini/README.md's tables (RESULTS section 3b: the masking arms on real text at `mini`,
400 steps, 3 paired seeds, plateau era), from the two kept `mapnet compare` results files beside it:

- `learned-masking-mini-final` / `learned-masking-mini-paired`: the first comparison (uniform, uniform@0.3, mapnet-ht,
  stratified, frequency-ht), results.json;
- `learned-masking-mini-mapnet-final` / `learned-masking-mini-mapnet-paired`: the four MAP-Net arms against a rerun of
  the same uniform arm, mapnet-arms-results.json.

Final tables: held-out loss per set (mean ± half the 95% t-interval over seeds, 3 decimals) and accuracy on the mixed
set (percent ± points). Paired tables: arm − uniform per seed on each set, seeds whose final mixed loss is below
uniform's, steps to uniform's final mean mixed loss on the arm's mean curve (with its share of the run's steps where
reached) and per seed ("–": that seed's curve never reaches it).

Bold, by rule: the arms whose Δ mixed interval lies below zero (every cell of their rows but the per-seed steps).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from arms_table import pm
from compare_tables import load, markdown, strategy
from learning_table import seeds_below
from tables_blimp_arms import better, bold, minus, reached, share

HERE = "experiments/learned-masking-mini"
RESULTS = f"{HERE}/results.json"
MAPNET = f"{HERE}/mapnet-arms-results.json"
SETS = ("eval_loss", "eval_loss@books", "eval_loss@wiki")
LABEL = {RESULTS: {}, MAPNET: {"uniform": "uniform (rerun)", "mapnet": "mapnet (paper)"}}


def final_losses(path: str, label: dict[str, str] | None = None) -> str:
    """The final held-out losses of a comparison's strategies (`label`: their names on the page; the mini page's
    own by default), bold where paired against uniform the loss is below it beyond the interval."""
    doc, label = load(path), LABEL[path] if label is None else label
    body = []
    for name in doc["strategies"]:
        f, on = strategy(doc, name)["final"], better(doc, name)
        cells = [label.get(name, name), *(pm(f[k], ".3f") for k in SETS), share(f["eval_accuracy"])]
        body.append([bold(c, on) for c in cells])
    return markdown(["strategy", "mixed", "held-out books", "held-out Wikipedia", "accuracy (mixed)"], body)


def paired(path: str, label: dict[str, str] | None = None, below: str = "seeds below uniform (mixed)") -> str:
    """Each strategy − uniform, paired by seed, with the steps its mean curve takes to uniform's final loss."""
    doc, label = load(path), LABEL[path] if label is None else label
    steps = max(doc["eval_steps"])
    body = []
    for name in doc["strategies"]:
        if name == "uniform":
            continue
        a, on = strategy(doc, name), better(doc, name)
        _, reach, per_seed = reached(a, steps)
        d = a["paired_vs_uniform"]
        cells = [label.get(name, name), *(pm(d[k], "+.3f") for k in SETS), seeds_below(doc, name), reach]
        body.append([*(bold(c, on) for c in cells), per_seed])
    headings = ["strategy", "Δ mixed", "Δ books", "Δ Wikipedia", below]
    return minus(markdown([*headings, "steps to uniform's final (mean curve)", "per seed"], body))


TABLES: dict[str, Callable[[], str]] = {
    "learned-masking-mini-final": partial(final_losses, RESULTS),
    "learned-masking-mini-paired": partial(paired, RESULTS),
    "learned-masking-mini-mapnet-final": partial(final_losses, MAPNET),
    "learned-masking-mini-mapnet-paired": partial(paired, MAPNET),
}
