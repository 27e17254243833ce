"""Option types shared by several commands, defined once."""

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from ..errors import MapnetError

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", help="TOML settings file (defaults < preset < this file < flags).", show_default=False
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", metavar="SECTION.KEY=VALUE", help="Override any setting (repeatable).", show_default=False),
]
RecipeOpt = Annotated[
    str | None,
    typer.Option(
        "--recipe",
        help="Training recipe: fast (tiny, mini and small's default: pre-LN, no dropout, eps 1e-12, "
        "clipping, a higher LR), paper (the paper's settings; medium and base's default) or hour (fast with bf16 where "
        "the hardware computes it, the modern block, 30% masking, batch 64 and its own shape, for 64-token shards); "
        "sets train.recipe.",
        show_default=False,
    ),
]
PrintSettingsOpt = Annotated[
    bool,
    typer.Option("--print-settings", help="Print the fully resolved settings as TOML and exit."),
]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu, cuda or auto.")]
TimeBudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--time-budget",
        help="Train until this much training time is spent, e.g. 90s, 20m, 2h, 1h30m (evaluation and "
        "checkpoints not counted); the schedule is laid out in time (optim.warmup.fraction, train.short_seq.fraction); "
        "sets train.time_budget.",
        show_default=False,
    ),
]
OverwriteOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Delete and replace --out if it exists: only an output of this command's kind that mapnet wrote and that "
        "holds nothing else (else refused, naming what is there).",
    ),
]


class Engine(str, Enum):
    """`--engine`: where preprocess and shard run their per-file work (settings.ENGINES)."""

    local = "local"
    dask = "dask"


EngineOpt = Annotated[
    Engine | None,
    typer.Option(
        "--engine",
        help="Where the per-file work runs: local (this machine's process pool, the default) or dask "
        "(tasks on a Dask cluster, same output bytes; pip install 'mapnet[distributed]'); sets engine.name.",
        show_default=False,
    ),
]
TasksOpt = Annotated[
    int | None,
    typer.Option(
        "--tasks",
        help="Engine tasks: the files are cut into at most this many groups of about equal size "
        "(0: one task per file); sets engine.tasks.",
        show_default=False,
    ),
]
EngineAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--engine-address",
        metavar="tcp://HOST:8786",
        help="The running Dask scheduler to use with --engine "
        "dask (default: DASK_SCHEDULER_ADDRESS, else a local cluster started for this run, of preprocess.workers or "
        "shard.workers processes).",
        show_default=False,
    ),
]


def check_engine_address(address: str | None, engine: str) -> None:
    """An address given to the local pool would be ignored: one line instead. With dask, the address (or
    DASK_SCHEDULER_ADDRESS) is of Dask's form, checked before any folder is made."""
    if address and engine != "dask":
        raise MapnetError('--engine-address needs --engine dask (or engine.name = "dask")')
    if engine == "dask":
        from ..data.engine import scheduler_address

        scheduler_address(address)
