"""The table of experiments/synthetic-tiny/README.md (RESULTS section 1: uniform against MAP-Net on the embedded
synthetic corpus, `tiny`, 300 steps, 3 seeds), from its kept `mapnet compare` results.json,
experiments/synthetic-tiny/synthetic-tiny-uniform-vs-mapnet.json.

- `synthetic-tiny-final`: per strategy, the held-out MLM loss of the mean curve over seeds at each evaluation step
  (three decimals), the last step as mean ± half its 95% t-interval (the aggregate's `final`, bold), the final
  accuracy in percent ± the interval's half-width in points (one decimal), and the step at which the strategy's mean
  curve reaches uniform's final mean loss (the aggregate's `steps_to_target.mean_curve`; uniform, the target, takes
  the whole run by definition).

The page's two other tables (held-out loss per token kind, MAP-Net's proposal mass per kind) are typed by hand: the
per-kind evaluation and the training metrics they come from were not kept (the results.json holds the whole-set loss
and accuracy only); their figures are `no_raw` in the page's registry.
"""

from __future__ import annotations

from arms_table import pm
from compare_tables import load, markdown, strategy

RESULTS = "experiments/synthetic-tiny/synthetic-tiny-uniform-vs-mapnet.json"
ROWS = [("uniform", "uniform"), ("MAP-Net", "mapnet")]


def percent(ci: dict) -> str:
    """`13.8% ± 1.9`: a share's mean in percent and its interval's half-width in points."""
    return f"{100 * ci['mean']:.1f}% ± {100 * (ci['ci95'][1] - ci['ci95'][0]) / 2:.1f}"


def final_table() -> str:
    doc = load(RESULTS)
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


TABLES = {"synthetic-tiny-final": final_table}
