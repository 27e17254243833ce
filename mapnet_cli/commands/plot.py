"""`mapnet plot`: a run's curves, or several runs overlaid, in one image.

    mapnet plot runs/a --out curves.png
    mapnet plot runs/uniform runs/mapnet --out curves.png      # the same panels, a line per run
    mapnet plot cmp/runs/*/seed0 --out seeds.svg               # any format matplotlib writes (.png, .pdf, .svg)

Panels: training loss, held-out loss (the main set and each train.extra_eval
set), learning rate, and for MAP-Net runs the proposal entropy and its mass per
token kind. Needs matplotlib (pip install 'mapnet[plots]').
"""

from pathlib import Path
from typing import Annotated

import typer

from .. import artefacts
from ..errors import MapnetError
from ..output_paths import check_output
from .options import OverwriteOpt

HELP = "Plot loss, held-out loss, learning rate (and MAP-Net's entropy and mass) of one or more runs."
FORMATS = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


def plot(
    runs: Annotated[list[Path], typer.Argument(help="Run folders (each with its metrics.jsonl).", show_default=False)],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Image to write (.png, .pdf, .svg, .jpg).", show_default=False)
    ],
    overwrite: OverwriteOpt = False,
) -> None:
    """Plot loss, held-out loss, learning rate (and MAP-Net's entropy and mass) of one or more runs."""
    from ..plotting import run_curves, save_figure

    check_output(out, runs, kind=artefacts.PLOT, overwrite=overwrite)
    if out.suffix.lower() not in FORMATS:
        raise MapnetError(f"--out {out}: use one of {', '.join(FORMATS)}")
    if not out.parent.is_dir():
        raise MapnetError(f"--out {out}: folder {out.parent} does not exist")
    save_figure(run_curves(runs), out)
    typer.echo(f"plot: {out}")
