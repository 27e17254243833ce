"""The `mapnet` command: wires the subcommands and formats errors in one place.

    mapnet --help
    mapnet config show --preset tiny
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from .errors import MapnetError
from .commands import config as config_cmd

app = typer.Typer(
    name="mapnet",
    help="Variance-reduced masked-language-model pretraining with a mask proposal network (MAP-Net).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(config_cmd.app, name="config")
# Command registrations (one line each; a command is listed only when it does something real):
# @register preprocess
# @register shard
# @register pretrain
# @register export
# @register inspect-masks
# @register finetune-glue
# @register variance


def main() -> None:
    """Console-script entry point: one red line and exit code 2 for user errors."""
    try:
        app(standalone_mode=False)
    except MapnetError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        Console(stderr=True).print("[bold red]interrupted[/]: nothing partial was published", highlight=False)
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as exc:  # click usage errors arrive here in standalone_mode=False
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


if __name__ == "__main__":
    main()
