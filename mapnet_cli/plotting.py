"""Figures from run folders, and the matplotlib plumbing every plot in mapnet shares.

    fig = run_curves([Path("runs/a"), Path("runs/b")])     # what `mapnet plot runs/a runs/b --out curves.png` draws
    save_figure(fig, Path("curves.png"))

`run_curves` reads each run's metrics file (`metrics_file.read_metrics`: a step a
resume repeated counts once, the later line) and draws one panel per curve,
one line per run: training loss, held-out loss (the main set, then each
`train.extra_eval` set), learning rate, and, for runs that log them, MAP-Net's
proposal entropy and its mass on each token kind. matplotlib is the `plots`
extra; `pyplot()` uses the Agg backend (files only, never a window).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from .artefacts import PLOT_MARK
from .atomic import atomic_file
from .errors import MapnetError, warn

MISSING = "matplotlib is not installed (pip install 'mapnet[plots]')"


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")  # files only; never a window
    import matplotlib.pyplot as plt

    return plt


LINE_STYLES = ("-", "--", ":", "-.")


def line_styles(count: int) -> list[dict]:
    """`count` {color, linestyle} for matplotlib's plot (call after `pyplot()` found matplotlib): the colour cycle
    first, then the same colours dashed, dotted, dash-dotted, all distinct up to 4 x 10 lines with the default
    cycle. Its 10 colours alone would draw the 11th of compare's 15 arms exactly like the 1st."""
    plt = pyplot()
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    return [
        {"color": colours[i % len(colours)], "linestyle": LINE_STYLES[i // len(colours) % len(LINE_STYLES)]}
        for i in range(count)
    ]


def save_figure(fig, path: Path, dpi: int = 120) -> None:
    """Write `fig` to `path` atomically and close it: `atomic.atomic_file` (a temp file renamed into place,
    removed on any failure; a full disk is one line naming `path`), so a killed run leaves no half image."""
    plt = pyplot()
    fmt = path.suffix.lstrip(".").lower() or "png"
    try:
        with atomic_file(path, "wb") as fh:
            fig.savefig(fh, format=fmt, dpi=dpi, **_marked(fmt))
    finally:
        plt.close(fig)


def _marked(fmt: str) -> dict:
    """savefig's arguments that put mapnet's mark in the image's metadata: `plot --overwrite` replaces only an
    image that carries it (`artefacts.kind_of`)."""
    if fmt in ("jpg", "jpeg"):
        return {"pil_kwargs": {"comment": PLOT_MARK.encode()}}
    return {"metadata": {"Software" if fmt == "png" else "Creator": PLOT_MARK}}


def metrics_path(run: Path) -> Path:
    """RUN/<logging.metrics_file> (from the run's settings.toml; metrics.jsonl when it has none)."""
    if not run.is_dir():
        raise MapnetError(f"{run} is not a run folder")
    name = "metrics.jsonl"
    settings = run / "settings.toml"
    if settings.is_file():
        try:
            name = tomllib.loads(settings.read_text(encoding="utf-8")).get("logging", {}).get("metrics_file", name)
        except tomllib.TOMLDecodeError as exc:
            raise MapnetError(f"{settings} is not valid TOML: {exc}") from None
    path = run / name
    if not path.is_file():
        raise MapnetError(f"{run} has no {name}: is it a `mapnet pretrain` run folder?")
    return path


NON_FINITE = "NaN or infinite"


def _not_a_number(value) -> str | None:
    """Why a metrics value cannot be a point, as JSON names it ("a list", ...), or None for a number."""
    if isinstance(value, bool):  # an int to Python, but no loss: it would draw as 0 or 1
        return "true/false"
    if isinstance(value, (int, float)):
        return None
    return {list: "a list", dict: "an object", str: "a string"}.get(type(value), type(value).__name__)


def _curves(run: Path, dropped: dict[str, dict[str, int]] | None = None) -> dict[str, tuple[list[int], list[float]]]:
    """{panel key: (steps, values)} of one run; a metric's None points (nothing to average) are left out, and so
    are NaN and infinities (a diverged run logs them; matplotlib would draw nothing for them, silently) and values
    that are no number (a list, a list holding NaN, a string: mapnet never logs them under a panel's key), which
    are counted in `dropped` ({key: {why: points}})."""
    import math

    from .metrics_file import read_metrics

    try:
        evals, trains = read_metrics(metrics_path(run))
    except ValueError as exc:  # json.JSONDecodeError: a line that is not JSON
        raise MapnetError(f"{run}: unreadable metrics line ({exc})") from None
    out: dict[str, tuple[list[int], list[float]]] = {}
    for records, keep in (
        (trains, lambda k: k in ("loss", "lr") or k == "mapnet/entropy" or k.startswith("mapnet/mass/")),
        (evals, lambda k: k == "eval_loss" or k.startswith("eval_loss@")),
    ):
        for key in dict.fromkeys(k for r in records for k in r if keep(k)):
            points, why = [], {}
            for r in records:
                value = r.get(key)
                if value is None:
                    continue
                reason = _not_a_number(value) or (None if math.isfinite(value) else NON_FINITE)
                if reason is None:
                    points.append((r["step"], float(value)))
                else:
                    why[reason] = why.get(reason, 0) + 1
            if dropped is not None and why:
                dropped[key] = why
            if points:
                out[key] = ([s for s, _ in points], [v for _, v in points])
    return out


PANELS = (
    ("loss", "training loss (masked positions)"),
    ("eval_loss", "held-out MLM loss"),
    ("lr", "learning rate"),
    ("mapnet/entropy", "proposal entropy / log n"),
)


def _panel_keys(found: set[str]) -> list[tuple[str, str]]:
    keys = [(k, title) for k, title in PANELS[:2] if k in found]
    keys += [(k, f"held-out MLM loss ({k.partition('@')[2]})") for k in sorted(found) if k.startswith("eval_loss@")]
    keys += [(k, title) for k, title in PANELS[2:] if k in found]
    keys += [
        (k, f"proposal mass on {k.rpartition('/')[2]} tokens") for k in sorted(found) if k.startswith("mapnet/mass/")
    ]
    return keys


def run_curves(runs: list[Path], labels: list[str] | None = None):
    """One matplotlib Figure: a panel per curve (see the module doc), a line per run labelled by its folder name.

    Each line's data is exactly the metrics file's values at its steps (tests read them back with
    `line.get_xdata()` / `get_ydata()`)."""
    plt = pyplot()
    if plt is None:
        raise MapnetError(f"mapnet plot needs matplotlib: {MISSING}")
    if not runs:
        raise MapnetError("no run folder given: mapnet plot RUN... --out FILE.png")
    dropped: dict[Path, dict[str, dict[str, int]]] = {run: {} for run in runs}
    curves = {run: _curves(run, dropped[run]) for run in runs}
    labels = labels or _labels(runs)
    panels = _panel_keys({k for c in curves.values() for k in c})
    shown = {key for key, _ in panels}

    def lost(only) -> str:  # "RUN: loss at 2 steps (a list, a string), ...; RUN2: ..." for the reasons `only` keeps
        per_run = []
        for run, keys in dropped.items():
            items = []
            for key, why in keys.items():
                mine = {r: n for r, n in why.items() if only(r)}
                if mine:
                    named = [r for r in mine if r != NON_FINITE]
                    items.append(f"{key} at {sum(mine.values())} steps" + (f" ({', '.join(named)})" if named else ""))
            per_run.append((run, items))
        return "; ".join(f"{run}: {', '.join(items)}" for run, items in per_run if items)

    nan, other = lost(lambda r: r == NON_FINITE), lost(lambda r: r != NON_FINITE)
    if not panels:
        raise MapnetError(
            f"nothing to plot in {', '.join(map(str, runs))}: "
            + (
                f"every value is NaN, infinite or not a number ({'; '.join(filter(None, (nan, other)))})"
                if other
                else f"every value is NaN or infinite ({nan})"
                if nan
                else "no metrics lines yet"
            )
        )

    # One line per kind of loss, each naming the panels left out whole: a figure without them must say so.
    def gone(only) -> list[str]:
        return sorted(
            {
                key
                for keys in dropped.values()
                for key, why in keys.items()
                if key not in shown and any(only(r) for r in why)
            }
        )

    if nan:
        no_panel = gone(lambda r: r == NON_FINITE)
        warn(
            f"not drawn, NaN or infinite: {nan} (the run diverged there; its line stops or is absent)"
            + (f"; no panel for {', '.join(no_panel)}" if no_panel else "")
        )
    if other:
        no_panel = gone(lambda r: r != NON_FINITE)
        warn(
            f"not drawn, not a number: {other} (mapnet logs numbers there: is the metrics file edited?)"
            + (f"; no panel for {', '.join(no_panel)}" if no_panel else "")
        )
    cols = min(2, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.6 * rows), squeeze=False)
    styles = line_styles(len(runs))
    for ax, (key, title) in zip(axes.flat, panels):
        for i, run in enumerate(runs):
            if key in curves[run]:
                steps, values = curves[run][key]
                ax.plot(
                    steps, values, label=labels[i], **styles[i], marker="o" if len(steps) < 30 else None, markersize=3
                )
        ax.set_title(title, fontsize="medium")
        ax.set_xlabel("step")
        ax.set_gid(key)  # which metric a panel shows, for tests and scripts
        ax.grid(alpha=0.3)
        if key == "lr":
            ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        if len(runs) > 1:
            ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def _labels(runs: list[Path]) -> list[str]:
    """Folder names, or the paths as given where two runs share a name (runs/a/seed0, runs/b/seed0)."""
    names = [run.resolve().name for run in runs]
    return [str(run) if names.count(name) > 1 else name for run, name in zip(runs, names)]


__all__ = ["MISSING", "pyplot", "line_styles", "save_figure", "metrics_path", "run_curves"]
