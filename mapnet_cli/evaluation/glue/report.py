"""Tables, learning curves and plots, all derived from a sweep's `summary`.

    rows = result_rows(summary)          # per checkpoint x entry: metrics, score, best config
    header, rows = table2_rows(summary)  # the paper's Table 2: rows = runs, columns = steps
    write_curves(summary, out_dir)       # learning_curves.json / .csv (+ .png with matplotlib)

Everything here is plain data (lists of strings); the CLI renders it with
rich. Numbers are shown in points (x100) with two decimals, as the paper.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from ...atomic import write_json, write_text
from . import metrics as M
from .tasks import TASKS


def points(value: float | None) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.2f}"


def pm(mean: float | None, std: float | None) -> str:
    return points(mean) if std is None else f"{points(mean)} ± {points(std)}"


def _entry_order(entry: str) -> int:
    order = list(M.SCORE_ENTRIES) + ["WNLI"]
    return order.index(entry) if entry in order else len(order)


def result_rows(summary: dict) -> list[list[str]]:
    """[checkpoint, entry, metrics, score, best config, seeds] for every run entry, then a GLUE row each."""
    rows = []
    for ck in summary["checkpoints"]:
        label = f"{ck['run']}@{ck['step']}"
        entries = []
        for task, t in ck["tasks"].items():
            best = t["best"]
            for entry in TASKS[task].entries:
                if best is None:
                    entries.append(
                        (entry, [label, entry, "-", "-", "not run yet", f"0/{t['configs'][0]['seeds_planned']}"])
                    )
                    continue
                e = best["entries"][entry]
                metrics = " / ".join(f"{name} {pm(v['mean'], v['std'])}" for name, v in e["metrics"].items())
                cfg = f"bs {best['batch_size']}, lr {best['lr']:g}"
                seeds = f"{best['seeds_done']}/{best['seeds_planned']}" + (
                    "" if t["complete"] else " (sweep incomplete)"
                )
                entries.append((entry, [label, entry, metrics, pm(e["score"], e["score_std"]), cfg, seeds]))
        rows.extend(r for _, r in sorted(entries, key=lambda x: _entry_order(x[0])))
        g = ck["glue"]
        rows.append(
            [
                label,
                "GLUE",
                f"mean over {len(g['entries'])}/{g['of']}: {', '.join(g['entries']) or '-'}",
                points(g["score"]),
                "",
                "",
            ]
        )
    return rows


RESULT_HEADER = ["checkpoint", "entry", "metrics (mean ± std over seeds)", "score", "best config", "seeds"]


def ci_points(ci: dict | None, signed: bool = False) -> str:
    """'85.32 ± 1.20' (mean ± half-width of the 95% interval, in points); one value has no interval."""
    if ci is None or ci.get("mean") is None:
        return "-"
    mean = f"{100 * ci['mean']:+.2f}" if signed else points(ci["mean"])
    if ci.get("ci95") is None:
        return f"{mean} (n={ci['n']}, no interval)"
    return f"{mean} ± {100 * (ci['ci95'][1] - ci['ci95'][0]) / 2:.2f}"


STATS_HEADER = ["checkpoint", "entry", "seeds", "score (mean ± 95% CI)", "margin over random init (paired by seed)"]


def stats_rows(summary: dict) -> list[list[str]]:
    """Per checkpoint x entry (then GLUE): mean ± 95% t-interval over fine-tuning seeds, and the paired
    margin over the checkpoint's random-init control ("control" on the control's own rows)."""
    rows = []
    for ck in summary["checkpoints"]:
        label = f"{ck['run']}@{ck['step']}"
        stats = ck.get("stats") or {}
        margin = (ck.get("margin") or {}).get("entries", {})
        for entry in sorted(stats, key=lambda e: (e == "GLUE", _entry_order(e))):
            st = stats[entry]
            if ck.get("init") == "random":
                m = "control"
            elif entry in margin:
                m = f"{ci_points(margin[entry], signed=True)} (n={margin[entry]['n']})"
            else:
                m = "-"
            rows.append([label, entry, str(st["n"]), ci_points(st), m])
    return rows


def _grid(summary: dict, value) -> tuple[list[str], list[list[str]]]:
    runs = list(dict.fromkeys(ck["run"] for ck in summary["checkpoints"]))
    steps = sorted({ck["step"] for ck in summary["checkpoints"]})
    cell = {(ck["run"], ck["step"]): value(ck) for ck in summary["checkpoints"]}
    header = ["run"] + [_step_label(s) for s in steps]
    rows = [[run] + [points(cell.get((run, s))) for s in steps] for run in runs]
    return header, rows


def _step_label(step: int) -> str:
    return f"{step // 1000}k" if step >= 1000 and step % 1000 == 0 else str(step)


def table2_rows(summary: dict, entry: str = "GLUE") -> tuple[list[str], list[list[str]]]:
    """The paper's Table 2 shape for `entry` ("GLUE" = the aggregated score)."""
    if entry == "GLUE":
        return _grid(summary, lambda ck: ck["glue"]["score"])
    return _grid(summary, lambda ck: ck["entries"].get(entry))


def entry_curve_rows(summary: dict) -> tuple[list[str], list[list[str]]]:
    """Every entry's Table-2 grid stacked: rows = (entry, run), columns = steps (the paper's Figure 3 as numbers)."""
    entries = sorted({e for ck in summary["checkpoints"] for e in ck["entries"]}, key=_entry_order)
    header, rows = None, []
    for entry in entries:
        header, grid = table2_rows(summary, entry)
        rows.extend([entry, *row] for row in grid)
    return (["entry", *header] if header else ["entry", "run"]), rows


def curves(summary: dict) -> list[dict]:
    """Flat learning-curve records: one per (run, step, entry), entry "GLUE" included."""
    out = []
    for ck in summary["checkpoints"]:
        for t in ck["tasks"].values():
            best = t["best"]
            if best is None:
                continue
            for entry, e in best["entries"].items():
                out.append(
                    {
                        "run": ck["run"],
                        "step": ck["step"],
                        "entry": entry,
                        "score": e["score"],
                        "std": e["score_std"],
                        "seeds": best["seeds_done"],
                        "batch_size": best["batch_size"],
                        "lr": best["lr"],
                    }
                )
        if ck["glue"]["score"] is not None:
            out.append(
                {
                    "run": ck["run"],
                    "step": ck["step"],
                    "entry": "GLUE",
                    "score": ck["glue"]["score"],
                    "std": None,
                    "seeds": None,
                    "batch_size": None,
                    "lr": None,
                }
            )
    return sorted(out, key=lambda r: (_entry_order(r["entry"]), r["run"], r["step"]))


def write_curves(summary: dict, out_dir) -> list[str]:
    """learning_curves.json and .csv, plus a PNG when matplotlib is importable; returns notes."""
    records = curves(summary)
    write_json(out_dir / "learning_curves.json", records)
    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=["run", "step", "entry", "score", "std", "seeds", "batch_size", "lr"], lineterminator="\n"
    )
    writer.writeheader()
    writer.writerows(records)
    write_text(out_dir / "learning_curves.csv", buf.getvalue())
    notes = [f"learning curves: {out_dir / 'learning_curves.csv'}"]
    from ...plotting import MISSING, pyplot

    if pyplot() is None:
        notes.append(f"no plot: {MISSING}")
        return notes
    plot_curves(records, out_dir / "learning_curves.png")
    notes.append(f"plot: {out_dir / 'learning_curves.png'}")
    return notes


def plot_curves(records: list[dict], path) -> None:
    """One panel per entry (the paper's Figure 3 shows RTE, SST-2, QNLI): score vs. pretraining step, a line per run."""
    from ...plotting import pyplot, save_figure

    plt = pyplot()
    entries = list(dict.fromkeys(r["entry"] for r in records))
    cols = min(3, len(entries)) or 1
    rows = math.ceil(len(entries) / cols) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.4 * rows), squeeze=False)
    for ax, entry in zip(axes.flat, entries):
        for run in dict.fromkeys(r["run"] for r in records):
            pts = sorted(
                (r["step"], 100 * r["score"], 100 * (r["std"] or 0.0))
                for r in records
                if r["entry"] == entry and r["run"] == run
            )
            if not pts:
                continue
            xs, ys, es = zip(*pts)
            ax.errorbar(xs, ys, yerr=es if any(es) else None, marker="o", capsize=3, label=run)
        ax.set_title(entry)
        ax.set_xlabel("pretraining step")
        ax.set_ylabel("dev score")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(entries) :]:
        ax.set_visible(False)
    fig.tight_layout()
    save_figure(fig, Path(path))
