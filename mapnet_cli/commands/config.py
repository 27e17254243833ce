"""`mapnet config show`: print the fully resolved settings.

    mapnet config show --preset tiny --config run.toml --set optim.lr=3e-4
    mapnet config show --docs
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from .. import settings as settings_mod
from .options import ConfigOpt, SetOpt

app = typer.Typer(help="Inspect settings.", no_args_is_help=True)


@app.command("show")
def show(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    preset: Annotated[Optional[str], typer.Option("--preset", help="Model size preset.")] = None,
    docs: Annotated[bool, typer.Option("--docs", help="List every setting with its default and meaning.")] = False,
) -> None:
    """Print the resolved settings as TOML (what a command would run with)."""
    console = Console()
    if docs:
        table = Table("setting", "default", "meaning", show_lines=False)
        for key, default, doc in settings_mod.field_docs():
            table.add_row(key, default, doc)
        console.print(table)
        return
    resolved = settings_mod.resolve(config, {"model": {"preset": preset}}, set_ or (), extra_sections=("recipe",))
    text = resolved.to_toml()
    if console.is_terminal:
        console.print(Syntax(text, "toml"))
    else:
        typer.echo(text, nl=False)
