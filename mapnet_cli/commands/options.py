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
PrintSettingsOpt = Annotated[
    bool,
    typer.Option("--print-settings", help="Print the fully resolved settings as TOML and exit."),
]
