"""`mapnet finetune-glue`: GLUE dev scores of pretrained checkpoints, with the paper's protocol.

    mapnet finetune-glue --task RTE --checkpoint runs/bert --data glue_data --out out/glue
    mapnet finetune-glue --task all --checkpoint runs/bert/checkpoints/step-01000000 --data glue_data --out out/glue
    mapnet finetune-glue --task rte,sst2,qnli --checkpoints runs/bert runs/mapnet --data glue_data --out out/curves
    mapnet finetune-glue --task sst2 --checkpoint runs/tiny --data glue_data --out out/quick --quick
    mapnet finetune-glue --task mrpc --checkpoint runs/bert --data glue_data --out out/g --grid "16,32x1e-5,2e-5"
    --seeds 3
    mapnet finetune-glue --protocol small --init both --checkpoints runs/mini --data glue_data --out out/small
    mapnet finetune-glue --protocol small --checkpoints runs/mini --data glue_data --out out/small --gpus 8
    mapnet finetune-glue --protocol small --checkpoints runs/mini --data glue_data --out out/small --engine dask

Settings: defaults < --protocol (--quick = --protocol quick) < --config < flags
(`--set finetune.key=value` reaches every field, e.g. finetune.run_score=last_epoch);
the protocols are the table in `settings/presets.py`. `--init random` fine-tunes the
checkpoint's architecture from random weights (the control), `--init both` the
checkpoint and that control, with the margin over it. Re-running with the same
--out resumes: finished runs are read from results.json, not redone.
"""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .. import artefacts
from .. import settings as settings_mod
from .. import spread as spreading
from ..comma_list import comma_list
from ..errors import MapnetError
from ..output_paths import check_output
from ..run_lock import output_lock
from ..settings import PROTOCOLS
from .options import ConfigOpt, Engine, EngineAddressOpt, PrintSettingsOpt, SetOpt, check_engine_address
from .progress import SweepProgress
from .shown import cells

HELP = "Fine-tune checkpoints on GLUE (grid x seeds, best mean config) and report dev scores."


def parse_grid(text: str) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """'16,32x1e-5,2e-5' -> ((16, 32), (1e-5, 2e-5))."""
    parts = text.lower().split("x")
    if len(parts) != 2:
        raise MapnetError(f"--grid expects BATCH_SIZES x LEARNING_RATES, e.g. '16,32x1e-5,2e-5' (got {text!r})")
    return (
        tuple(comma_list(parts[0], "--grid batch sizes", convert=int)),
        tuple(comma_list(parts[1], "--grid learning rates", convert=float)),
    )


def finetune_glue(
    data: Annotated[
        Path,
        typer.Option(
            "--data", "-d", help="GLUE folder in the standard layout (GLUE_DIR/RTE/train.tsv, ...).", show_default=False
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Output folder: results.json, tables, curves (re-use it to resume).", show_default=False
        ),
    ],
    task: Annotated[
        str | None,
        typer.Option(
            "--task",
            "-t",
            help="CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI (any case, dash optional), a comma list, or "
            "all (default: the protocol's tasks).",
            show_default=False,
        ),
    ] = None,
    checkpoint: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoint",
            "-k",
            help="A checkpoint folder, or a run folder (its newest complete checkpoint). Repeatable.",
            show_default=False,
        ),
    ] = None,
    checkpoints: Annotated[
        list[Path] | None,
        typer.Option(
            "--checkpoints",
            help="A run folder: every complete checkpoint in RUN/checkpoints (a learning-curve sweep). Repeatable; "
            "more paths may follow as arguments.",
            show_default=False,
        ),
    ] = None,
    more: Annotated[
        list[Path] | None, typer.Argument(help="More run folders for the --checkpoints sweep.", show_default=False)
    ] = None,
    grid: Annotated[
        str | None,
        typer.Option("--grid", help="Batch sizes x learning rates, e.g. '16,32x1e-5,2e-5'.", show_default=False),
    ] = None,
    batch_sizes: Annotated[
        str | None, typer.Option("--batch-sizes", help="Comma list; sets finetune.batch_sizes.", show_default=False)
    ] = None,
    lrs: Annotated[
        str | None, typer.Option("--lrs", help="Comma list; sets finetune.learning_rates.", show_default=False)
    ] = None,
    seeds: Annotated[
        int | None, typer.Option("--seeds", help="Seeds per configuration (paper: 10).", show_default=False)
    ] = None,
    epochs: Annotated[
        int | None, typer.Option("--epochs", help="Epochs per run (paper: 10).", show_default=False)
    ] = None,
    max_train: Annotated[
        int | None,
        typer.Option("--max-train", help="Cap training examples (a fixed subset; 0: all).", show_default=False),
    ] = None,
    max_dev: Annotated[
        int | None,
        typer.Option(
            "--max-dev", help="Cap dev examples (0: all; not comparable with published scores).", show_default=False
        ),
    ] = None,
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="Smoke-test preset, the same as --protocol quick: bs 32, lr 8e-5, 2 seeds, 2 epochs, 2000 train "
            "examples.",
        ),
    ] = False,
    protocol: Annotated[
        str | None,
        typer.Option(
            "--protocol",
            help="Named preset under --config and the flags: "
            + "; ".join(f"{p.name}: {p.summary}" for p in PROTOCOLS.values())
            + ".",
            show_default=False,
        ),
    ] = None,
    init: Annotated[
        str,
        typer.Option(
            "--init",
            help="pretrained: the checkpoints' weights; random: their architecture and tokenizer from random weights "
            "(the control; seeded per fine-tuning seed); both: the checkpoints and their control, with the paired "
            "margin.",
        ),
    ] = "pretrained",
    device: Annotated[
        str | None, typer.Option("--device", help="auto, cpu or cuda; sets finetune.device.", show_default=False)
    ] = None,
    engine: Annotated[
        Engine | None,
        typer.Option(
            "--engine",
            help="Where the runs run: local (one after another in this process, the default) or dask (side by side as "
            "tasks of a Dask cluster: --engine-address or DASK_SCHEDULER_ADDRESS, else a local one of engine.workers "
            "processes); every run the same as alone, results.json written here; sets engine.name.",
            show_default=False,
        ),
    ] = None,
    engine_address: EngineAddressOpt = None,
    gpus: Annotated[
        int,
        typer.Option("--gpus", help="Run up to N fine-tuning runs at once on this node's GPUs, one GPU each."),
    ] = 0,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    print_settings: PrintSettingsOpt = False,
) -> None:
    """Fine-tune checkpoints on GLUE (grid x seeds, best mean config) and report dev scores."""
    from ..evaluation.glue import report, sweep
    from ..evaluation.glue.pretrained import find_checkpoints, with_controls
    from ..evaluation.glue.tasks import task_names

    if quick:
        if protocol not in (None, "quick"):
            raise MapnetError(f"--quick is --protocol quick; it cannot go with --protocol {protocol}")
        protocol = "quick"
    proto = settings_mod.protocol(protocol) if protocol is not None else None
    if init not in ("pretrained", "random", "both"):
        raise MapnetError(f"--init must be pretrained, random or both (got {init!r})")

    flags: dict = {}
    if grid is not None:
        if batch_sizes is not None or lrs is not None:
            raise MapnetError("give either --grid or --batch-sizes/--lrs, not both")
        flags["batch_sizes"], flags["learning_rates"] = parse_grid(grid)
    if batch_sizes is not None:
        flags["batch_sizes"] = tuple(comma_list(batch_sizes, "--batch-sizes", convert=int))
    if lrs is not None:
        flags["learning_rates"] = tuple(comma_list(lrs, "--lrs", convert=float))
    for key, value in (
        ("seeds", seeds),
        ("epochs", epochs),
        ("max_train", max_train),
        ("max_dev", max_dev),
        ("device", device),
    ):
        if value is not None:
            flags[key] = value
    # A protocol is a preset: below the config file and the flags, so either can still change any of it.
    engine_flags = {"name": engine.value} if engine else {}
    settings = settings_mod.resolve(config, {"finetune": flags, "engine": engine_flags}, set_ or (), protocol=protocol)
    if print_settings:
        typer.echo(settings.to_toml(), nl=False)
        return
    check_engine_address(engine_address, settings.engine.name)
    spread = spreading.from_options(settings.engine, engine_address, gpus, 1)
    if task is None and not (proto and proto.tasks):
        raise MapnetError(
            "name the tasks: --task T (or a --protocol that has its own, e.g. small: "
            f"{', '.join(PROTOCOLS['small'].tasks)})"
        )
    tasks = task_names(task) if task is not None else list(proto.tasks)
    sweep_paths = [*(checkpoints or ()), *(more or ())]
    if more and not checkpoints:
        raise MapnetError(f"unexpected argument {str(more[0])!r} (extra paths belong to --checkpoints)")
    if not checkpoint and not sweep_paths:
        raise MapnetError("name what to fine-tune: --checkpoint RUN_OR_CKPT, or --checkpoints RUN ... for a sweep")
    # Re-using --out resumes the sweep from its results.json; it never replaces the folder.
    check_output(out, [data, *(checkpoint or ()), *sweep_paths, config], kind=artefacts.GLUE, reuse=True)
    refs, controls = with_controls(find_checkpoints(checkpoint or (), sweep_paths), init)

    err = Console(stderr=True)
    if settings.finetune.max_dev:
        err.print(
            f"note: dev sets capped at {settings.finetune.max_dev} examples: scores are not comparable "
            "with published ones",
            highlight=False,
            markup=False,
        )
    with output_lock(out):
        events = SweepProgress(err, settings.logging.progress)
        with events.progress:
            doc = sweep.run_sweep(
                refs, tasks, data, out, settings.finetune, events, controls=controls, preset=protocol, spread=spread
            )
        summary = doc["summary"]
        console = Console()
        table = Table(*report.RESULT_HEADER, title=f"GLUE dev ({summary['run_score'].replace('_', ' ')} per run)")
        for row in report.result_rows(summary):
            table.add_row(*cells(*row), end_section=row[1] == "GLUE")  # run labels: paths, as given
        console.print(table)
        if len(refs) > 1 or sweep_paths or init != "pretrained":
            t = Table(
                *report.STATS_HEADER,
                title="Per entry over fine-tuning seeds (points; 95% t-interval; "
                "margin = checkpoint − its random-init control, paired by seed)",
            )
            rows = report.stats_rows(summary)
            for i, row in enumerate(rows):
                t.add_row(*cells(*row), end_section=i + 1 < len(rows) and rows[i + 1][0] != row[0])
            console.print(t)
        if len(refs) > 1 or sweep_paths:
            header, rows = report.table2_rows(summary)
            t2 = Table(*cells(*header), title="GLUE score by pretraining step (the paper's Table 2)")
            for row in rows:
                t2.add_row(*cells(*row))
            console.print(t2)
            header, rows = report.entry_curve_rows(summary)
            t3 = Table(*cells(*header), title="Dev score by pretraining step, per entry (best configuration's mean)")
            for i, row in enumerate(rows):
                t3.add_row(*cells(*row), end_section=i + 1 < len(rows) and rows[i + 1][0] != row[0])
            console.print(t3)
            for note in report.write_curves(summary, out):
                err.print(note, highlight=False, markup=False)
        err.print(f"results: {out / sweep.RESULTS}", highlight=False, markup=False)
