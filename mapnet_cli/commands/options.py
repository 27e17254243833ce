"""Option types shared by several commands, defined once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

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
