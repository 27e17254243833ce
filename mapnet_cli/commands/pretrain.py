"""`mapnet pretrain`: train the BERT encoder with masked language modelling.

    mapnet pretrain shards/ --out runs/tiny --preset tiny --steps 2000
    mapnet pretrain shards/ --out runs/base --preset base --gpus 8          # starts torchrun itself
    mapnet pretrain shards/ --out runs/base --resume                        # continue, exactly
    mapnet pretrain shards/ --out runs/mapnet --preset base --masking mapnet   # MAP-Net proposals (paper, 3.2-3.3)

The shards are the argument or `--data shards/` (the same). Recipes, time budgets, several nodes, torchrun and
SLURM, continued pretraining: docs/pretraining.md; every `--masking` and its settings: docs/masking.md.

Settings: defaults < preset < recipe < --config < flags, resolved once by `train.run_settings` (with --resume the
run's own settings are the base, and only what `MAY_CHANGE_ON_RESUME` allows may change: train/run_settings.py).

torch and the training modules are imported inside the command, so
`mapnet --help` and the data commands start without loading torch.
"""

from pathlib import Path
from typing import Annotated, Literal

import typer

from .. import artefacts
from ..errors import MapnetError
from ..output_paths import check_output
from .options import ConfigOpt, PrintSettingsOpt, RecipeOpt, SetOpt, TimeBudgetOpt
from .progress import train_with_progress

HELP = (
    "Pretrain the BERT encoder (uniform, stratified, frequency or MAP-Net masking) on shards; checkpoints, "
    "metrics, exact resume."
)


def shard_folder(argument: Path | None, data: Path | None) -> Path:
    """The shard folder, given as the SHARDS argument or as --data (both spellings are in use)."""
    if argument is None and data is None:
        raise MapnetError("no shard folder: mapnet pretrain SHARDS --out RUN (or --data SHARDS)")
    if argument is not None and data is not None and argument != data:
        raise MapnetError(f"two shard folders: SHARDS {argument} and --data {data}; give one")
    return argument if argument is not None else data


def pretrain(
    shards: Annotated[
        Path | None, typer.Argument(help="Shard folder written by `mapnet shard` (or --data).", show_default=False)
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Run folder (checkpoints, metrics.jsonl, run.json).", show_default=False)
    ] = ...,
    data: Annotated[
        Path | None, typer.Option("--data", help="Shard folder, as the SHARDS argument.", show_default=False)
    ] = None,
    preset: Annotated[
        str | None, typer.Option("--preset", help="Model size: tiny, mini, small, medium, base.", show_default=False)
    ] = None,
    recipe: RecipeOpt = None,
    steps: Annotated[
        int | None, typer.Option("--steps", help="Optimizer steps; sets train.steps.", show_default=False)
    ] = None,
    time_budget: TimeBudgetOpt = None,
    batch_size: Annotated[
        int | None,
        typer.Option("--batch-size", help="Global batch in sequences; sets train.batch_size.", show_default=False),
    ] = None,
    micro_batch_size: Annotated[
        int | None,
        typer.Option(
            "--micro-batch-size",
            help="Sequences per forward pass per device; sets train.micro_batch_size.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Sets train.seed.", show_default=False)] = None,
    device: Annotated[
        str | None, typer.Option("--device", help="auto, cpu or cuda; sets train.device.", show_default=False)
    ] = None,
    masking: Annotated[
        Literal["uniform", "mapnet", "stratified", "frequency", "adaptive", "whole-word", "span", "pmi", "hybrid"]
        | None,
        typer.Option(
            "--masking",
            metavar="<strategy>",
            help="uniform (RandMask), mapnet (learned proposals), stratified (disjoint masks per sequence), frequency "
            "(static proposal, HT weights), adaptive (AMLM: a per-token table moved by the model's scores), "
            "whole-word, span (SpanBERT), pmi (PMI-Masking; needs mapnet pmi-vocab) or hybrid (GPT-BERT: one row "
            "in masking.hybrid.causal_every causal); sets masking.strategy.",
            show_default=False,
        ),
    ] = None,
    mask_prob: Annotated[
        float | None,
        typer.Option(
            "--mask-prob",
            help="Masking rate (paper 0.15; MosaicBERT 0.3, Wettig et al. 0.4); sets masking.mask_prob. Evaluation "
            "masks keep train.eval_mask_prob.",
            show_default=False,
        ),
    ] = None,
    init_from: Annotated[
        Path | None,
        typer.Option(
            "--init-from",
            help="Continued pretraining: start from this encoder, a mapnet run/checkpoint folder or a local Hugging "
            "Face BERT folder (config.json + model.safetensors + tokenizer.json). The model size is SOURCE's; "
            "optimizer, schedule, step and masking start fresh; the shards must use SOURCE's tokenizer. Sets "
            "model.init_from.",
            show_default=False,
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue from the newest complete checkpoint in --out. With MAP-Net and "
            "masking.mapnet.explore_steps = 0 the exploration schedule spans train.steps, so raising --steps on "
            "resume stretches it from the current step on.",
        ),
    ] = False,
    stop_at: Annotated[
        int | None,
        typer.Option(
            "--stop-at",
            help="Checkpoint and exit after this step (e.g. a job's time slice); --resume continues.",
            show_default=False,
        ),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option("--gpus", help="Start one process per GPU on this node (torchrun, NCCL).", show_default=False),
    ] = None,
    nproc: Annotated[
        int | None, typer.Option("--nproc", help="Start N CPU processes (gloo) — tests, debugging.", show_default=False)
    ] = None,
    nnodes: Annotated[
        int | None, typer.Option("--nnodes", help="Nodes in the job (passed to torchrun).", show_default=False)
    ] = None,
    node_rank: Annotated[
        int | None, typer.Option("--node-rank", help="This node's rank (passed to torchrun).", show_default=False)
    ] = None,
    rdzv_endpoint: Annotated[
        str | None, typer.Option("--rdzv-endpoint", help="host:port to meet at (multi-node).", show_default=False)
    ] = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    print_settings: PrintSettingsOpt = False,
) -> None:
    """Pretrain the BERT encoder (uniform, stratified, frequency or MAP-Net masking) on shards; checkpoints, metrics,
    exact resume."""
    shards = shard_folder(shards, data)
    flags = {
        "model": {"preset": preset, "init_from": str(init_from) if init_from is not None else None},
        "train": {
            "recipe": recipe,
            "steps": steps,
            "time_budget": time_budget,
            "batch_size": batch_size,
            "micro_batch_size": micro_batch_size,
            "seed": seed,
            "device": device,
        },
        "masking": {"strategy": masking, "mask_prob": mask_prob},
        "distributed": {
            "gpus": gpus,
            "nproc": nproc,
            "nnodes": nnodes,
            "node_rank": node_rank,
            "rdzv_endpoint": rdzv_endpoint,
        },
    }
    from ..train.run_settings import run_settings

    settings = run_settings(shards, out, resume=resume, config=config, flags=flags, assignments=set_ or ())
    if print_settings:
        typer.echo(settings.to_toml(), nl=False)
        return
    if stop_at is not None and stop_at < 1:
        raise MapnetError(f"--stop-at must be >= 1 (got {stop_at})")
    # A run continues in its own folder (--resume) and never replaces it; --config is left out of the inputs
    # because the launcher hands its workers a settings file inside the run.
    check_output(out, [shards, settings.model.init_from or None], kind=artefacts.RUN, reuse=True)

    from .. import distributed
    from ..train.tracking import require

    require(settings.logging)  # a missing tensorboard/wandb package: one line, before torchrun starts anything
    if distributed.should_launch(settings.distributed.gpus, settings.distributed.nproc):
        from ..train.launch import launch

        launch(shards, out, settings, resume, stop_at)
        return
    from ..run_lock import output_lock

    with output_lock(out):
        train_with_progress(shards, out, settings, resume, stop_at)
