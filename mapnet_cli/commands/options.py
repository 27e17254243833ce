"""Option types shared by several commands, defined once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import MapnetError

ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", "-c", help="TOML settings file (defaults < preset < this file < flags).", show_default=False),
]
SetOpt = Annotated[
    Optional[list[str]],
    typer.Option("--set", metavar="SECTION.KEY=VALUE", help="Override any setting (repeatable).", show_default=False),
]
RecipeOpt = Annotated[
    Optional[str],
    typer.Option("--recipe", help="Training recipe: fast (tiny, mini and small's default: pre-LN, no dropout, eps 1e-12, "
                 "clipping, a higher LR) or paper (the paper's settings; medium and base's default); sets train.recipe.",
                 show_default=False),
]
PrintSettingsOpt = Annotated[
    bool,
    typer.Option("--print-settings", help="Print the fully resolved settings as TOML and exit."),
]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu, cuda or auto.")]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="Replace --out if it exists.")]


def evaluation_device(device: str):
    """--device of an evaluating command (probe, blimp) as a torch.device: "auto" is CUDA where there is one."""
    import torch

    if device not in ("cpu", "cuda", "auto"):
        raise MapnetError(f"--device must be cpu, cuda or auto (got {device!r})")
    if device == "cuda" and not torch.cuda.is_available():
        raise MapnetError("--device cuda but no CUDA device is available")
    return torch.device("cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) else "cpu")
