"""`mapnet export`: a checkpoint as a Hugging Face BertForMaskedLM folder.

mapnet export runs/base --out hf/base                       # the run's newest checkpoint
mapnet export runs/base/checkpoints/step-00400000 --out hf/base-400k
"""

from pathlib import Path
from typing import Annotated

import typer

HELP = "Export a checkpoint's encoder + MLM head for transformers (AutoModelForMaskedLM)."


def export(
    checkpoint: Annotated[
        Path,
        typer.Argument(
            help="A run folder (its newest complete checkpoint) or a step-XXXXXXXX folder.", show_default=False
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder to create (published atomically).", show_default=False)
    ],
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Delete and replace --out if it exists: only an output of this command's kind that mapnet wrote and "
            "that holds nothing else (else refused, naming what is there).",
        ),
    ] = False,
) -> None:
    """Export a checkpoint's encoder + MLM head for transformers (AutoModelForMaskedLM)."""
    from ..export import export as run_export  # here, not at the top: `mapnet --help` must not load torch
    from ..run_lock import output_lock

    with output_lock(out):
        done = run_export(checkpoint, out, overwrite)
    typer.echo(f"exported {done}")
