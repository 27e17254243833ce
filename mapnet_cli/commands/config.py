"""`mapnet config show`: print the fully resolved settings.

mapnet config show --preset tiny --config run.toml --set optim.lr=3e-4
mapnet config show --recipe hour --time-budget 60m      # the recipe's shape and its warm-ups laid out in time
mapnet config show --docs
"""

from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from .. import settings as settings_mod
from .options import ConfigOpt, RecipeOpt, SetOpt
from .shown import cells

app = typer.Typer(help="Inspect settings.", no_args_is_help=True, rich_markup_mode=None)  # plain help, as `mapnet`


@app.command("show")
def show(
    config: ConfigOpt = None,
    set_: SetOpt = None,
    preset: Annotated[str | None, typer.Option("--preset", help="Model size preset.")] = None,
    recipe: RecipeOpt = None,
    time_budget: Annotated[
        str | None,
        typer.Option(
            "--time-budget",
            help="Show the settings of a run to this training-time budget, e.g. 90s, 20m, 2h (its warm-ups "
            "as fractions of it); sets train.time_budget.",
            show_default=False,
        ),
    ] = None,
    docs: Annotated[bool, typer.Option("--docs", help="List every setting with its default and meaning.")] = False,
) -> None:
    """Print the resolved settings as TOML (what a command would run with)."""
    console = Console()
    if docs:
        rows = settings_mod.field_docs()
        # The name is what one types after --set: never cut or wrapped. The default folds and the meaning
        # wraps into what is left, so the table fits 80 columns; box.SIMPLE spends no columns on borders.
        table = Table(box=box.SIMPLE, show_lines=False, pad_edge=False)
        table.add_column("setting", no_wrap=True, min_width=max(len(key) for key, _, _ in rows))
        table.add_column("default", overflow="fold", max_width=16)
        table.add_column("meaning", ratio=1, overflow="fold")
        for key, default, doc in rows:
            table.add_row(*cells(key, default, doc))  # a default such as ["*.tsv"] is text, not markup
        console.print(table)
        return
    flags = {"model": {"preset": preset}, "train": {"recipe": recipe, "time_budget": time_budget}}
    resolved = settings_mod.resolve(config, flags, set_ or (), extra_sections=("recipe",))
    text = resolved.to_toml()
    if console.is_terminal:
        console.print(Syntax(text, "toml"))
    else:
        typer.echo(text, nl=False)
