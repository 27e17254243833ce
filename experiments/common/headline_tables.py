"""The headline tables of README.md and docs/results.md (docs/_snippets/headline.md): every masking arm against
uniform at `tiny` on the CPU (RESULTS section E) and at `mini` on an H200 (section E2), in loss, steps, step cost,
time to uniform's final loss and zero-shot grammar.

    uv run python experiments/common/doc_tables.py --write     # writes them, with every other table of the manual

Every cell of a row comes from one `mapnet compare` results.json, so an arm's loss and its BLiMP score the same
models (section E trained section A's arms again with checkpoints kept; its paper's-MAP-Net runs end at +0.93,
not section A's +0.98). Step costs are the ratios `benchmarks/bench_strategies.py` printed, from the printouts
named (the first figure found for an arm wins), and the column names the machine they were measured on.
A Δ is bold where its 95% interval excludes zero.
"""

from __future__ import annotations

import json
from pathlib import Path

import bench_printout
from arms_table import pm
from blimp_table import fmt
from learning_table import left_plateau, seeds_below

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"

LABELS = {  # what a reader calls each arm; the order of the rows
    "uniform": "uniform",
    "uniform@0.3": "30% masking (`uniform@0.3`)",
    "uniform@0.4": "40% masking (`uniform@0.4`)",
    "mapnet-ht": "MAP-Net, HT weights (`mapnet-ht`)",
    "mapnet-ht-lite": "MAP-Net, HT, lite proposal (`mapnet-ht-lite`)",
    "adaptive": "loss-adaptive, published: hard, unweighted (`adaptive`)",
    "adaptive-soft": "loss-adaptive, soft (`adaptive-soft`)",
    "adaptive-ht": "loss-adaptive, HT (`adaptive-ht`)",
    "adaptive-soft-ht": "loss-adaptive, soft + HT (`adaptive-soft-ht`)",
    "whole-word": "whole-word",
    "stratified": "stratified",
    "frequency-ht": "frequency-HT",
    "mapnet": "MAP-Net, the paper's arm (`mapnet`)",
    "span": "span (SpanBERT)",
    "pmi": "PMI-Masking",
}


def rel(path: Path) -> str:
    path = path.resolve()
    return path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)


def delta(ci: dict | None, f: str, scale: float = 1.0) -> str:
    """A paired difference, mean ± half its 95% interval, with a true minus sign; bold where the interval excludes 0."""
    text = (fmt(ci, f, scale) if scale != 1.0 else pm(ci, f)).replace("-", "−")
    lo_hi = (ci or {}).get("ci95")
    return f"**{text}**" if lo_hi and (lo_hi[0] > 0 or lo_hi[1] < 0) else text


def headline(results: Path, benches: list[Path], preset: str, time_name: str) -> str:
    doc = json.loads(results.read_text(encoding="utf-8"))
    agg = doc["aggregate"]["strategies"]
    found = {arm: v for arm, v in bench_printout.step_costs(benches, preset).items() if arm in agg}
    machines = " / ".join(dict.fromkeys(run.where for _, run in found.values()))
    steps = max(doc["eval_steps"])
    arms = [a for a in LABELS if a in agg] + [a for a in agg if a not in LABELS]
    lines = [
        f"| arm, `{preset}` | left the plateau | Δ final loss (nats) | seeds below uniform | steps to uniform's final "
        "| "
        f"step cost ({machines}) | {time_name} to uniform's final | Δ BLiMP (points) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in arms:
        cost = found.get(name, (None, None))[0]
        cost_cell = "–" if cost is None else f"{cost:.2f}×"
        if name == "uniform":
            lines.append(f"| uniform | {left_plateau(doc, name)} | – | – | {steps:,} | {cost_cell} | 1.00× | – |")
            continue
        d = agg[name].get("paired_vs_uniform", {})
        reached = agg[name].get("steps_to_target", {}).get("mean_curve")
        to_final = "not reached" if reached is None else f"{reached:,.0f} ({reached / steps:.2f}×)"
        time = "–" if reached is None or cost is None else f"{reached / steps * cost:.2f}×"
        lines.append(
            f"| {LABELS.get(name, name)} | {left_plateau(doc, name)} | {delta(d.get('eval_loss'), '+.2f')} | "
            f"{seeds_below(doc, name)} | {to_final} | {cost_cell} | {time} | {delta(d.get('blimp'), '+.1f', 100.0)} |"
        )
    return "\n".join(lines) + "\n\n" + sources(doc, results, found, steps)


def sources(doc: dict, results: Path, found: dict, steps: int) -> str:
    """The line under a headline table: where its figures come from, and the controls they are read against."""
    target, entropy = doc["aggregate"]["target"]["final_mean_eval_loss"], doc["unigram"]["train_entropy"]
    b, ctl = doc["blimp"], doc["aggregate"]["blimp_control"]
    uniform_blimp = fmt(doc["aggregate"]["strategies"]["uniform"]["blimp"], ".1f")
    unigram = "" if ctl.get("unigram") is None else f", the shards' unigram model {100 * ctl['unigram']:.1f}"
    by_run: dict[Path, list[str]] = {}
    for arm, (_, run) in found.items():
        if arm != "uniform":
            by_run.setdefault(run.path, []).append(arm)
    costs = []
    for i, (path, arms) in enumerate(by_run.items()):
        run = next(r for _, r in found.values() if r.path == path)
        which = "" if i == 0 else " for " + ", ".join(f"`{a}`" for a in arms)
        costs.append(f"`{rel(path)}` ({run.machine}, load average {run.load_before:.2f} before){which}")
    return (
        f"*Generated from `{rel(results)}`: {steps:,} steps, seeds {', '.join(map(str, doc['seeds']))}; uniform's "
        f"final mixed loss {target:.3f} nats, {entropy - target:.2f} below the training tokens' unigram entropy "
        f"({entropy:.3f}); BLiMP {b['paradigms']} paradigms × {b['pairs_per_paradigm']} pairs, uniform "
        f"{uniform_blimp}, "
        f"random weights {fmt(ctl['random_init'], '.1f')}{unigram}. Step costs: {'; '.join(costs)}.*"
    )


def tiny() -> str:
    return headline(
        EXPERIMENTS / "blimp-arms" / "results.json",
        [
            EXPERIMENTS / "learning-arms-tiny" / "bench_strategies-all.txt",
            EXPERIMENTS / "adaptive" / "bench_adaptive_tiny40-idle.txt",
        ],
        "tiny",
        "wall time",
    )


def mini() -> str:
    return headline(
        EXPERIMENTS / "blimp-arms-mini" / "results.json",
        [EXPERIMENTS / "blimp-arms-mini" / "bench_strategies-h200.txt"],
        "mini",
        "GPU time",
    )


if __name__ == "__main__":
    print(tiny(), mini(), sep="\n\n")
