"""`mapnet quickstart`: the main job on the embedded default data.

mapnet quickstart
mapnet quickstart --masking mapnet                   # same corpus and shards, its own run-mapnet/
mapnet quickstart --masking mapnet --out runs/quickstart-mapnet --steps 600
"""

import shutil
import time
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .. import artefacts
from .. import quickstart as qs
from ..output_paths import check_output
from ..run_lock import output_lock
from .options import ConfigOpt, PrintSettingsOpt, RecipeOpt, SetOpt
from .phases_shown import phase_at

HELP = "Run the whole chain on the embedded synthetic corpus: preprocess, shard, pretrain `tiny`, summary."


class Masking(str, Enum):
    uniform = "uniform"
    mapnet = "mapnet"


def quickstart(
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Folder for corpus/, shards/ and run/ (run-mapnet/ with --masking mapnet)."),
    ] = Path("runs/quickstart"),
    steps: Annotated[
        int | None,
        typer.Option(
            "--steps", help="Pretraining steps (default: train.steps of data_recipes/tiny.toml).", show_default=False
        ),
    ] = None,
    recipe: RecipeOpt = None,
    masking: Annotated[
        Masking | None, typer.Option("--masking", help="uniform (baseline) or mapnet.", show_default=False)
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Sets train.seed.", show_default=False)] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Start from scratch: delete --out (a quickstart folder mapnet made, holding nothing else; else "
            "refused) instead of reusing its finished stages.",
        ),
    ] = False,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    print_settings: PrintSettingsOpt = False,
) -> None:
    """Run the whole chain on the embedded synthetic corpus: preprocess, shard, pretrain `tiny`, summary."""
    flags = {
        "train": {"steps": steps, "seed": seed, "recipe": recipe},
        "masking": {"strategy": masking.value if masking else None},
    }
    settings = qs.resolve_settings(flags, list(set_ or ()), config)
    if print_settings:
        typer.echo(settings.to_toml(), nl=False)
        return
    # Finished stages in --out are reused; --overwrite deletes the folder: only one quickstart made, and never
    # with a --config inside it.
    check_output(out, [config], kind=artefacts.QUICKSTART, reuse=True, overwrite=overwrite)
    console = Console(stderr=True)
    stages = qs.Stages.under(out, settings.masking.strategy)
    # Held from before --overwrite deletes anything until the summary: the lock file is beside out/, not in it.
    with output_lock(out):
        if overwrite and out.exists():
            shutil.rmtree(out)
        started = time.perf_counter()
        with console.status("preparing the synthetic corpus and shards", spinner="dots"):
            qs.prepare_data(stages, settings, lambda msg: console.print(msg, highlight=False, markup=False))

        from .progress import train_with_progress

        state = qs.run_stage(stages, settings)
        if state == "done":
            console.print(f"reusing the finished run {stages.run}", highlight=False, markup=False)
        else:
            train_with_progress(stages.shards, stages.run, settings, resume=state == "resume", stop_at=None)
        _summary(Console(), stages, settings, time.perf_counter() - started)


def _summary(console: Console, stages: qs.Stages, settings, seconds: float) -> None:
    evals = qs.eval_history(stages.run, settings.logging.metrics_file)
    table = Table(title=f"held-out MLM, {settings.masking.strategy} masking")
    table.add_column("step", justify="right")
    table.add_column("loss", justify="right")
    table.add_column("accuracy", justify="right")
    phased = bool(phase_at(settings, 0))  # a step run with the sequence-length warm-up
    if phased:
        table.add_column("what the model had trained on")
    for ev in evals:
        phase = [phase_at(settings, ev["step"]) if ev["step"] else "nothing yet"] if phased else []
        table.add_row(str(ev["step"]), f"{ev['eval_loss']:.4f}", f"{ev['eval_accuracy']:.2%}", *phase)
    console.print(table)
    if phased:
        console.print(
            f"(held-out sequences are read whole: during the sequence-length warm-up, steps 1-"
            f"{settings.train.short_seq.steps}, their positions past {settings.train.short_seq.len} are untrained, so "
            "the loss there can rise; it falls once whole sequences are trained)",
            highlight=False,
        )
    if len(evals) >= 2:
        first, last = evals[0], evals[-1]
        console.print(
            f"held-out loss {first['eval_loss']:.3f} (step {first['step']}) -> {last['eval_loss']:.3f} "
            f"(step {last['step']}); accuracy {first['eval_accuracy']:.1%} -> {last['eval_accuracy']:.1%}",
            highlight=False,
        )
    kinds = sorted(k.split("/", 1)[1] for k in (evals[-1] if evals else {}) if k.startswith("eval_loss/"))
    if kinds and len(evals) >= 2:
        per_kind = Table(title="held-out loss by token kind (synthetic corpus)")
        per_kind.add_column("step", justify="right")
        for kind in kinds:
            per_kind.add_column(kind, justify="right")
        for ev in (evals[0], evals[-1]):
            per_kind.add_row(str(ev["step"]), *[_nats(ev[f"eval_loss/{k}"]) for k in kinds])
        console.print(per_kind)
    history = qs.mapnet_history(stages.run, settings.logging.metrics_file)
    if history:
        kinds = sorted(k.split("/", 2)[2] for k in history[-1] if k.startswith("mapnet/mass/"))
        mass = Table(title="MAP-Net proposal mass by token kind (uniform share in brackets)")
        mass.add_column("step", justify="right")
        for kind in kinds:
            mass.add_column(kind, justify="right")
        for record in (history[0], history[len(history) // 2], history[-1]):
            mass.add_row(
                str(record["step"]),
                *[f"{record[f'mapnet/mass/{k}']:.3f} ({record[f'mapnet/share/{k}']:.3f})" for k in kinds],
            )
        console.print(mass)
    console.print(
        f"done in {seconds:.0f} s. Next: mapnet inspect-masks {stages.run} | mapnet export {stages.run} --out "
        f"{stages.run.parent / 'hf'} | mapnet finetune-glue --task sst2 --quick --checkpoint {stages.run} ...",
        highlight=False,
        markup=False,
    )  # the paths as they are, brackets included


def _nats(value) -> str:
    return "-" if value is None else f"{value:.3f}"
