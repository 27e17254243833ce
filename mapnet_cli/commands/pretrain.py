"""`mapnet pretrain`: train the BERT encoder with masked language modelling.

    mapnet pretrain shards/ --out runs/tiny --preset tiny --steps 2000
    mapnet pretrain shards/ --out runs/tiny-paper --preset tiny --recipe paper      # the paper's settings, not `fast`
    mapnet pretrain --data shards/ --out runs/tiny --preset tiny            # the same: --data or the argument
    mapnet pretrain shards/ --out runs/base --preset base --gpus 8          # starts torchrun itself
    mapnet pretrain shards/ --out runs/base --resume                        # continue, exactly
    mapnet pretrain shards/ --out runs/hour --preset mini --time-budget 60m --set optim.warmup.fraction=0.05 --set train.short_seq.fraction=0.1
    mapnet pretrain shards/ --out runs/base --gpus 8 --nnodes 2 --node-rank 0 --rdzv-endpoint node0:29500
    torchrun --nproc-per-node 8 -m mapnet_cli.cli pretrain shards/ --out runs/base
    srun --ntasks-per-node 8 mapnet pretrain shards/ --out runs/base       # with MASTER_ADDR/PORT exported
    mapnet pretrain shards/ --out runs/dbg --preset tiny --nproc 2          # 2 CPU processes (gloo)
    mapnet pretrain shards/ --out runs/mapnet --preset base --masking mapnet   # MAP-Net proposals (paper, 3.2-3.3)
    mapnet pretrain shards/ --out runs/mapnet-raw --masking mapnet --importance unclipped
    mapnet pretrain shards/ --out runs/ht --masking mapnet --importance ht --set masking.mapnet.mix_uniform=0.5 --set masking.mapnet.target=gradnorm
    mapnet pretrain shards/ --out runs/strat --masking stratified
    mapnet pretrain shards/ --out runs/amlm --masking adaptive             # loss-adaptive (AMLM); see docs/masking.md
    mapnet pretrain shards/ --out runs/r40 --mask-prob 0.4
    mapnet pretrain shards/ --out runs/dapt --init-from hf/bert-base-uncased --masking mapnet   # continued pretraining
    mapnet pretrain shards/ --out runs/ww --masking whole-word              # or span, or pmi (after mapnet pmi-vocab)

Settings: defaults < preset < recipe < --config < flags. With --resume the base is the
settings the run was started with (its newest checkpoint's settings.toml);
--config and flags still apply on top for what may change mid-run (a larger
--steps, the device, logging, checkpoint and evaluation frequency:
MAY_CHANGE_ON_RESUME); a flag that would change anything else (the model, the
masking, the optimiser, the batch size, the seed ...) is a one-line error naming it.

torch and the training modules are imported inside the command, so
`mapnet --help` and the data commands start without loading torch.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from .. import settings as settings_mod
from ..atomic import make_dirs
from ..errors import MapnetError
from .. import artefacts
from ..output_paths import check_output
from .options import ConfigOpt, PrintSettingsOpt, RecipeOpt, SetOpt, TimeBudgetOpt
from .progress import ARGV_ENV, train_with_progress

HELP = "Pretrain the BERT encoder (uniform, stratified, frequency or MAP-Net masking) on shards; checkpoints, metrics, exact resume."


# What a resumed run may change: how long it trains (a larger --steps, a time budget), how it executes
# (device, precision, compilation, prefetching, micro-batches, processes), what it records and when
# (logging, checkpoints, evaluation frequency, variance snapshots) and what comes after (finetune).
# Everything else made the run what it is — the model, the masking, the optimiser and its schedule, the
# batch size, the sequence-length warm-up, the seed, the held-out sets — and is refused on resume: applied
# from the resume step on, settings.toml would describe the whole run with values it trained with only
# since. An allow-list, so a setting added later is refused on resume until someone decides otherwise.
MAY_CHANGE_ON_RESUME = ("train.steps", "train.time_budget", "train.micro_batch_size", "train.precision",
                        "train.compile", "train.compile_scope", "train.compile_mode", "train.prefetch", "train.device",
                        "train.eval_every", "train.checkpoint_every", "train.keep_last", "train.keep_steps",
                        "optim.impl", "shard.verify", "shard.workers", "preprocess.workers",
                        "logging", "distributed", "finetune", "variance")
# Inside a section that may change: what would still split the run (a second metrics file beside the first).
NEVER_ON_RESUME = ("logging.metrics_file",)


def resolve_settings(out: Path, resume: bool, config: Optional[Path], flags: dict, assignments: list[str]):
    """defaults < preset < config < flags; on --resume the run's own settings replace defaults < preset."""
    if not resume:
        from ..train import init_from  # with --init-from the model size is SOURCE's

        return init_from.resolve(config, flags, assignments)
    from ..model import checkpoint

    ckpt = checkpoint.latest_checkpoint(out)
    if ckpt is None:
        raise MapnetError(f"--resume: {out} has no complete checkpoint to continue from")
    base = checkpoint.load_settings(ckpt)
    # A changed strategy leaves the run's own table ignored: named as the change it is, before the rest is checked.
    settings = settings_mod.resolve(config, flags, assignments, base=base, base_is_run=True, check_ignored=False)
    refuse_fixed_changes(base, settings)
    if settings.problems():
        raise MapnetError("invalid settings: " + "; ".join(settings.problems()))
    from ..train.inputs import check_resume_steps

    check_resume_steps(settings, out)  # --steps below the run's newest step: before anything is launched or written
    return settings


def refuse_fixed_changes(base, settings) -> None:
    """One line naming every setting outside MAY_CHANGE_ON_RESUME that the flags or --config changed: silently
    keeping the run's value, or applying the new one from here on, would write a settings.toml that lies
    (preset = "mini" beside tiny sizes; batch_size = 16 for a run that trained on 8 until now)."""
    old, new = settings_mod.flat(base.to_dict()), settings_mod.flat(settings.to_dict())
    changed = [f"{key} (the run has {old.get(key)!r}, asked {value!r})" for key, value in new.items()
               if (key in NEVER_ON_RESUME or key.split(".")[0] not in MAY_CHANGE_ON_RESUME)
               and key not in MAY_CHANGE_ON_RESUME and old.get(key) != value]
    if changed:
        raise MapnetError(f"--resume cannot change {', '.join(changed)}: a resumed run continues what it trained; "
                          "drop the flag, or start a new run with another --out")


def shard_folder(argument: Optional[Path], data: Optional[Path]) -> Path:
    """The shard folder, given as the SHARDS argument or as --data (both spellings are in use)."""
    if argument is None and data is None:
        raise MapnetError("no shard folder: mapnet pretrain SHARDS --out RUN (or --data SHARDS)")
    if argument is not None and data is not None and argument != data:
        raise MapnetError(f"two shard folders: SHARDS {argument} and --data {data}; give one")
    return argument if argument is not None else data


def pretrain(
    shards: Annotated[Optional[Path], typer.Argument(help="Shard folder written by `mapnet shard` (or --data).", show_default=False)] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder (checkpoints, metrics.jsonl, run.json).", show_default=False)] = ...,
    data: Annotated[Optional[Path], typer.Option("--data", help="Shard folder, as the SHARDS argument.", show_default=False)] = None,
    preset: Annotated[Optional[str], typer.Option("--preset", help="Model size: tiny, mini, small, medium, base.", show_default=False)] = None,
    recipe: RecipeOpt = None,
    steps: Annotated[Optional[int], typer.Option("--steps", help="Optimizer steps; sets train.steps.", show_default=False)] = None,
    time_budget: TimeBudgetOpt = None,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size", help="Global batch in sequences; sets train.batch_size.", show_default=False)] = None,
    micro_batch_size: Annotated[Optional[int], typer.Option("--micro-batch-size", help="Sequences per forward pass per device; sets train.micro_batch_size.", show_default=False)] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Sets train.seed.", show_default=False)] = None,
    device: Annotated[Optional[str], typer.Option("--device", help="auto, cpu or cuda; sets train.device.", show_default=False)] = None,
    masking: Annotated[Optional[Literal["uniform", "mapnet", "stratified", "frequency", "adaptive", "whole-word", "span", "pmi"]], typer.Option("--masking", help="uniform (RandMask), mapnet (learned proposals), stratified (disjoint masks per sequence), frequency (static proposal, HT weights), adaptive (AMLM: a per-token table moved by the model's scores), whole-word, span (SpanBERT) or pmi (PMI-Masking; needs mapnet pmi-vocab); sets masking.strategy.", show_default=False)] = None,
    importance: Annotated[Optional[Literal["clipped", "unclipped", "none", "ht"]], typer.Option("--importance", help="MAP-Net's importance weights: the paper's per-sequence clipped (default) / unclipped / none, or ht (per-position Horvitz-Thompson); sets masking.mapnet.importance.", show_default=False)] = None,
    mask_prob: Annotated[Optional[float], typer.Option("--mask-prob", help="Masking rate (paper 0.15; MosaicBERT 0.3, Wettig et al. 0.4); sets masking.mask_prob. Evaluation masks keep train.eval_mask_prob.", show_default=False)] = None,
    init_from: Annotated[Optional[Path], typer.Option("--init-from", help="Continued pretraining: start from this encoder, a mapnet run/checkpoint folder or a local Hugging Face BERT folder (config.json + model.safetensors + tokenizer.json). The model size is SOURCE's; optimizer, schedule, step and masking start fresh; the shards must use SOURCE's tokenizer. Sets model.init_from.", show_default=False)] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue from the newest complete checkpoint in --out. With MAP-Net and masking.mapnet.explore_steps = 0 the exploration schedule spans train.steps, so raising --steps on resume stretches it from the current step on.")] = False,
    stop_at: Annotated[Optional[int], typer.Option("--stop-at", help="Checkpoint and exit after this step (e.g. a job's time slice); --resume continues.", show_default=False)] = None,
    variance_every: Annotated[Optional[int], typer.Option("--variance-every", help="Record the gradient-variance decomposition (cheap settings) in the metrics file every N steps; sets variance.every.", show_default=False)] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", help="Start one process per GPU on this node (torchrun, NCCL).", show_default=False)] = None,
    nproc: Annotated[Optional[int], typer.Option("--nproc", help="Start N CPU processes (gloo) — tests, debugging.", show_default=False)] = None,
    nnodes: Annotated[Optional[int], typer.Option("--nnodes", help="Nodes in the job (passed to torchrun).", show_default=False)] = None,
    node_rank: Annotated[Optional[int], typer.Option("--node-rank", help="This node's rank (passed to torchrun).", show_default=False)] = None,
    rdzv_endpoint: Annotated[Optional[str], typer.Option("--rdzv-endpoint", help="host:port to meet at (multi-node).", show_default=False)] = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    print_settings: PrintSettingsOpt = False,
) -> None:
    """Pretrain the BERT encoder (uniform, stratified, frequency or MAP-Net masking) on shards; checkpoints, metrics, exact resume."""
    shards = shard_folder(shards, data)
    flags = {
        "model": {"preset": preset, "init_from": str(init_from) if init_from is not None else None},
        "train": {"recipe": recipe, "steps": steps, "time_budget": time_budget, "batch_size": batch_size, "micro_batch_size": micro_batch_size,
                  "seed": seed, "device": device},
        "masking": {"strategy": masking, "mask_prob": mask_prob, "mapnet": {"importance": importance}},
        "variance": {"every": variance_every},
        "distributed": {"gpus": gpus, "nproc": nproc, "nnodes": nnodes, "node_rank": node_rank,
                        "rdzv_endpoint": rdzv_endpoint},
    }
    settings = resolve_settings(out, resume, config, flags, list(set_ or ()))
    d = settings.distributed
    if d.nproc and settings.train.device == "auto":  # --nproc means CPU workers, even on a GPU machine
        settings = settings_mod.apply(settings, {"train": {"device": "cpu"}}, "--nproc")
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
    from ..run_lock import output_lock

    require(settings.logging)  # a missing tensorboard/wandb package: one line, before torchrun starts anything
    if distributed.should_launch(d.gpus, d.nproc):
        from ..train.inputs import check_launch

        check_launch(settings, shards, (d.gpus or d.nproc) * d.nnodes)  # once here, not once per worker
        # The launcher holds the lock for the job (its workers accept it); other nodes' launchers do not lock.
        with output_lock(out, active=d.node_rank == 0):
            _launch(shards, out, settings, resume, stop_at)
        return
    with output_lock(out):
        train_with_progress(shards, out, settings, resume, stop_at)


def _launch(shards: Path, out: Path, settings, resume: bool, stop_at: Optional[int]) -> None:
    """Re-run this command under torchrun with exactly the settings resolved here."""
    from .. import distributed
    from ..run_lock import held_fds

    make_dirs(out)
    frozen = out / f".launch-settings-{os.getpid()}.toml"
    frozen.write_text(settings.to_toml(), encoding="utf-8")
    args = ["pretrain", str(shards), "--out", str(out), "--config", str(frozen)]
    args += ["--resume"] if resume else []
    args += ["--stop-at", str(stop_at)] if stop_at is not None else []
    try:
        # The workers record the command the user typed, not their own re-invocation.
        env = {**os.environ, ARGV_ENV: json.dumps(sys.argv)}
        code, signum = distributed.launch(args, settings.distributed, env=env, pass_fds=held_fds())
    finally:
        frozen.unlink(missing_ok=True)
    if signum:  # passed on to the workers, which checkpoint the step they are in (train/stop_signals.py)
        from ..model import checkpoint
        from ..train.stop_signals import Stopped, signal_name

        last = checkpoint.latest_checkpoint(out)
        if last is None:
            raise MapnetError(f"stopped by {signal_name(signum)} before the first checkpoint; nothing to resume")
        raise Stopped(signum, checkpoint.read_config(last)["step"], last)
    if code:
        raise MapnetError(f"training processes failed (torchrun exit code {code}); their messages are above")
