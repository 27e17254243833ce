"""The `mapnet` command: wires the subcommands and formats errors in one place.

mapnet --help
mapnet config show --preset tiny
"""

from __future__ import annotations

import os
import sys

import typer
from rich.console import Console
from rich.markup import escape

from .atomic import out_of_space
from .commands import blimp as blimp_cmd
from .commands import compare as compare_cmd
from .commands import config as config_cmd
from .commands import export as export_cmd
from .commands import finetune_glue as finetune_glue_cmd
from .commands import inspect_masks as inspect_masks_cmd
from .commands import plot as plot_cmd
from .commands import pmi_vocab as pmi_vocab_cmd
from .commands import preprocess as preprocess_cmd
from .commands import pretrain as pretrain_cmd
from .commands import probe as probe_cmd
from .commands import quickstart as quickstart_cmd
from .commands import shard as shard_cmd
from .commands import variance as variance_cmd
from .errors import LAUNCHED_ENV, MapnetError

app = typer.Typer(
    name="mapnet",
    help="Variance-reduced masked-language-model pretraining with a mask proposal network (MAP-Net).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # click's plain help: it wraps to any width (80 columns included), shows flags without a `<bool>` value,
    # and pipes into `less`/logs without box-drawing characters.
    rich_markup_mode=None,
)
app.add_typer(config_cmd.app, name="config")
# One line per command; a command is listed only when it does something real.
app.command("quickstart", help=quickstart_cmd.HELP)(quickstart_cmd.quickstart)
app.command("preprocess")(preprocess_cmd.preprocess)
app.command("shard", help=shard_cmd.HELP)(shard_cmd.shard)
app.command("pmi-vocab", help=pmi_vocab_cmd.HELP)(pmi_vocab_cmd.pmi_vocab)
app.command("pretrain", help=pretrain_cmd.HELP)(pretrain_cmd.pretrain)
app.command("export", help=export_cmd.HELP)(export_cmd.export)
app.command("inspect-masks", help=inspect_masks_cmd.HELP)(inspect_masks_cmd.inspect_masks)
app.command("finetune-glue", help=finetune_glue_cmd.HELP)(finetune_glue_cmd.finetune_glue)
app.command("probe", help=probe_cmd.HELP)(probe_cmd.probe)
app.command("blimp", help=blimp_cmd.HELP)(blimp_cmd.blimp)
app.command("variance", help=variance_cmd.HELP)(variance_cmd.variance)
app.command("compare", help=compare_cmd.HELP)(compare_cmd.compare)
app.command("plot", help=plot_cmd.HELP)(plot_cmd.plot)


def main() -> None:
    """Console-script entry point: one red line and exit code 2 for user errors.

    typer/click run in standalone mode: they format usage errors themselves
    (exit 2) and turn Ctrl-C into exit 130; `MapnetError` passes through them
    and is printed here, once, as is a full disk that reached no writer's own check.
    """
    try:
        app()
    except MapnetError as exc:
        fail(exc)
    except OSError as exc:  # a full disk outside the writers that name their file (atomic.py): still one line
        reason = out_of_space(exc)
        if reason is None:
            raise
        fail(MapnetError(f"{reason} ({exc.filename})" if exc.filename else reason))


def fail(exc: MapnetError) -> None:
    rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    if not (exc.once_per_job and (rank != 0 or LAUNCHED_ENV in os.environ)):  # one line, not one per process
        # escape: a path such as runs/[exp1]/... is text, not rich markup (it would vanish from the line)
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
