"""PNG plots of the aggregated curves (when matplotlib is importable)."""

from __future__ import annotations

from pathlib import Path


def write_plots(doc: dict, out: Path) -> list[str]:
    """PNG plots when matplotlib is importable; returns one-line notes either way."""
    from ..plotting import MISSING, line_styles, pyplot, save_figure

    plt = pyplot()
    if plt is None:
        return [f"no plots: {MISSING}"]

    aggs = doc["aggregate"]["strategies"]
    panels = [
        ("loss_vs_step.png", "step", "held-out MLM loss", lambda a: (a["steps"], a["curve"]["eval_loss"])),
        (
            "loss_vs_time.png",
            "training seconds",
            "held-out MLM loss",
            lambda a: ([p["mean"] for p in a["curve"]["elapsed"]], a["curve"]["eval_loss"]),
        ),
        (
            "variance_vs_step.png",
            "step",
            "total gradient variance",
            lambda a: (a["variance"]["steps"], a["variance"]["total_variance"]) if "variance" in a else None,
        ),
        (
            "glue_vs_step.png",
            "step",
            "GLUE score",
            lambda a: (a["glue_curve"]["steps"], a["glue_curve"]["score"]) if "glue_curve" in a else None,
        ),
        (
            "blimp_vs_step.png",
            "step",
            "BLiMP accuracy",
            lambda a: (a["blimp_curve"]["steps"], a["blimp_curve"]["accuracy"]) if "blimp_curve" in a else None,
        ),
    ]
    for m in sorted({m for a in aggs.values() for m in a["curve"] if m.startswith("eval_loss@")}):
        name = m.partition("@")[2]
        panels.append(
            (
                f"loss_vs_step-{name}.png",
                "step",
                f"held-out MLM loss ({name})",
                lambda a, m=m: (a["steps"], a["curve"][m]) if m in a["curve"] else None,
            )
        )
    notes = []
    # One style per arm for every figure, so an arm looks the same in all of them.
    style = dict(zip(aggs, line_styles(len(aggs))))
    for filename, xlabel, ylabel, pick in panels:
        series = {n: pick(a) for n, a in aggs.items() if pick(a) is not None}
        if not series:
            continue
        crowded = len(series) > 6  # the legend would cover the curves: put it beside them
        fig, ax = plt.subplots(figsize=(8.5 if crowded else 6, 4))
        for name, (xs, ys) in series.items():
            mean = [y["mean"] for y in ys]
            ax.plot(xs, mean, marker="o", label=name, **style[name])
            if all(y["ci95"] for y in ys):
                # Bands of many arms overlap into one grey: fainter, and in the arm's own colour.
                ax.fill_between(
                    xs,
                    [y["ci95"][0] for y in ys],
                    [y["ci95"][1] for y in ys],
                    color=style[name]["color"],
                    alpha=0.08 if crowded else 0.2,
                    linewidth=0,
                )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if crowded:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
        else:
            ax.legend()
        fig.tight_layout()
        save_figure(fig, out / filename)
        notes.append(f"plot: {out / filename}")
    return notes
