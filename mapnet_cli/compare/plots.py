"""PNG plots of the aggregated curves (when matplotlib is importable)."""

from __future__ import annotations

from pathlib import Path


def write_plots(doc: dict, out: Path) -> list[str]:
    """PNG plots when matplotlib is importable; returns one-line notes either way."""
    from ..plotting import MISSING, pyplot, save_figure

    plt = pyplot()
    if plt is None:
        return [f"no plots: {MISSING}"]

    aggs = doc["aggregate"]["strategies"]
    panels = [("loss_vs_step.png", "step", "held-out MLM loss", lambda a: (a["steps"], a["curve"]["eval_loss"])),
              ("loss_vs_time.png", "training seconds", "held-out MLM loss",
               lambda a: ([p["mean"] for p in a["curve"]["elapsed"]], a["curve"]["eval_loss"])),
              ("variance_vs_step.png", "step", "total gradient variance",
               lambda a: (a["variance"]["steps"], a["variance"]["total_variance"]) if "variance" in a else None),
              ("glue_vs_step.png", "step", "GLUE score",
               lambda a: (a["glue_curve"]["steps"], a["glue_curve"]["score"]) if "glue_curve" in a else None),
              ("blimp_vs_step.png", "step", "BLiMP accuracy",
               lambda a: (a["blimp_curve"]["steps"], a["blimp_curve"]["accuracy"]) if "blimp_curve" in a else None)]
    for m in sorted({m for a in aggs.values() for m in a["curve"] if m.startswith("eval_loss@")}):
        name = m.partition("@")[2]
        panels.append((f"loss_vs_step-{name}.png", "step", f"held-out MLM loss ({name})",
                       lambda a, m=m: (a["steps"], a["curve"][m]) if m in a["curve"] else None))
    notes = []
    for filename, xlabel, ylabel, pick in panels:
        series = {n: pick(a) for n, a in aggs.items() if pick(a) is not None}
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, (xs, ys) in series.items():
            mean = [y["mean"] for y in ys]
            ax.plot(xs, mean, marker="o", label=name)
            if all(y["ci95"] for y in ys):
                ax.fill_between(xs, [y["ci95"][0] for y in ys], [y["ci95"][1] for y in ys], alpha=0.2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend()
        fig.tight_layout()
        save_figure(fig, out / filename)
        notes.append(f"plot: {out / filename}")
    return notes
