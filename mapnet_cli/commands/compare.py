"""`mapnet compare`: uniform vs. MAP-Net (and its ablations) over seeds, from the same start.

    mapnet compare shards/ --out runs/compare --preset tiny --steps 300 --seeds 3
    mapnet compare shards/ --out runs/cmp --strategies uniform,mapnet --variance --glue-tasks sst2 --glue-data glue_data
    mapnet compare shards/ --out runs/cmp --preset mini --glue-protocol small --glue-data glue_data
    mapnet compare shards/ --out runs/warm --init-from runs/uniform-long --strategies uniform,mapnet --seeds 3
    mapnet compare shards/ --out runs/cmp --strategies uniform,uniform@0.3 --blimp blimp/ --blimp-every-checkpoint
    mapnet compare shards/ --out runs/20m --preset mini --time-budget 20m --set optim.warmup.fraction=0.05 \
        --set train.short_seq.fraction=0.1 --strategies uniform,uniform@0.3    # every arm the same training time
    mapnet compare shards/ --out runs/20m --preset mini --time-budget 20m --strategies uniform,mapnet-ht-lite \
        --step-costs costs.json            # the same time on the modelled clock, each arm at its measured step cost

Rerunning the same command reuses finished runs and recomputes the aggregate.
"""

import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Column, Table

from .. import artefacts
from .. import compare as cmp
from .. import settings as settings_mod
from .. import spread as spreading
from ..atomic import make_dirs, sha256_file, write_json, write_text
from ..errors import MapnetError
from ..output_paths import check_output
from ..run_lock import output_lock
from ..settings import PROTOCOLS, protocol
from ..train import init_from as init_mod
from .options import (
    ConfigOpt,
    Engine,
    EngineAddressOpt,
    PrintSettingsOpt,
    RecipeOpt,
    SetOpt,
    TimeBudgetOpt,
    check_engine_address,
)
from .progress import RunsProgress, SweepProgress, train_with_progress
from .shown import cells, shown

HELP = (
    "Compare masking strategies over seeds from identical starts: held-out loss, s/step, steps to uniform's final "
    "loss; GLUE and zero-shot BLiMP with their controls on request."
)


def compare(
    shards: Annotated[Path, typer.Argument(help="Shard folder (from `mapnet shard`).", show_default=False)],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="Output folder: runs/, results.json, command.txt, plots.", show_default=False),
    ],
    strategies: Annotated[
        str, typer.Option("--strategies", help=f"Comma list of: {', '.join(cmp.STRATEGIES)}.")
    ] = "uniform,mapnet",
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds per strategy: train.seed, train.seed+1, ...")] = 3,
    steps: Annotated[int | None, typer.Option("--steps", help="Sets train.steps.", show_default=False)] = None,
    time_budget: TimeBudgetOpt = None,
    step_costs: Annotated[
        Path | None,
        typer.Option(
            "--step-costs",
            help="With --time-budget: a step-costs JSON (benchmarks/step_costs.py's); every arm counts its own "
            "measured step costs toward the budget instead of its wall time (train.step_seconds, the modelled "
            "clock), so the steps each arm buys do not depend on the machine's load.",
            show_default=False,
        ),
    ] = None,
    preset: Annotated[
        str | None, typer.Option("--preset", help="Model preset (tiny, mini, small, medium, base).", show_default=False)
    ] = None,
    recipe: RecipeOpt = None,
    init_from: Annotated[
        Path | None,
        typer.Option(
            "--init-from",
            help="Every run starts from this encoder (a mapnet run/checkpoint or a local Hugging Face BERT folder), "
            "as pretrain --init-from; sets model.init_from.",
            show_default=False,
        ),
    ] = None,
    variance: Annotated[
        bool,
        typer.Option(
            "--variance",
            help="Measure a cheap gradient-variance decomposition (variance.snapshot_*) at every checkpoint.",
        ),
    ] = False,
    glue_tasks: Annotated[
        str | None,
        typer.Option(
            "--glue-tasks",
            help="GLUE tasks to fine-tune the final checkpoints on, e.g. cola,sst2,mrpc (default: the "
            "--glue-protocol's tasks).",
            show_default=False,
        ),
    ] = None,
    glue_data: Annotated[
        Path | None, typer.Option("--glue-data", help="GLUE folder in the standard layout.", show_default=False)
    ] = None,
    glue_protocol: Annotated[
        str | None,
        typer.Option(
            "--glue-protocol",
            help="Fine-tuning protocol (default quick): "
            + "; ".join(f"{p.name}: {p.summary}" for p in PROTOCOLS.values())
            + ". A random-init control is fine-tuned once per pretraining seed.",
            show_default=False,
        ),
    ] = None,
    glue_every_checkpoint: Annotated[
        bool,
        typer.Option(
            "--glue-every-checkpoint",
            help="Fine-tune every kept checkpoint, not only the final one: a GLUE-vs-step curve and plot.",
        ),
    ] = False,
    blimp: Annotated[
        Path | None,
        typer.Option(
            "--blimp",
            help="A BLiMP folder: score every run (and a random-init encoder per seed, and the shards' unigram model) "
            "zero-shot, as `mapnet blimp`.",
            show_default=False,
        ),
    ] = None,
    blimp_pairs: Annotated[
        int, typer.Option("--blimp-pairs", help="With --blimp: the first N pairs of each paradigm (0: all).")
    ] = 0,
    blimp_method: Annotated[str, typer.Option("--blimp-method", help="With --blimp: pll or word-l2r.")] = "pll",
    blimp_every_checkpoint: Annotated[
        bool,
        typer.Option(
            "--blimp-every-checkpoint",
            help="With --blimp: score every kept checkpoint, not only the final one (a BLiMP-vs-step curve, and BLiMP "
            "at uniform's training time).",
        ),
    ] = False,
    engine: Annotated[
        Engine | None,
        typer.Option(
            "--engine",
            help="Where the runs train and are scored (GLUE, BLiMP): local (one after another in this process, the "
            "default) or dask (side by side as tasks of a Dask cluster: --engine-address or DASK_SCHEDULER_ADDRESS, "
            "else a local one of engine.workers processes); every run the same as alone; sets engine.name.",
            show_default=False,
        ),
    ] = None,
    engine_address: EngineAddressOpt = None,
    gpus: Annotated[
        int,
        typer.Option(
            "--gpus",
            help="Train up to N runs at once on this node's GPUs, one GPU each (or --gpus-per-run each, through "
            "torchrun), as Dask tasks of a local cluster.",
        ),
    ] = 0,
    gpus_per_run: Annotated[
        int, typer.Option("--gpus-per-run", help="With --gpus: GPUs of each run (torchrun, as pretrain --gpus).")
    ] = 1,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    print_settings: PrintSettingsOpt = False,
) -> None:
    """Compare masking strategies over seeds from identical starts."""
    from ..evaluation.glue.tasks import task_names

    proto = protocol(glue_protocol or "quick")
    if glue_data is None and (glue_tasks is not None or glue_protocol is not None):
        raise MapnetError("--glue-tasks and --glue-protocol need --glue-data")
    if glue_data is not None and glue_tasks is None and not proto.tasks:
        raise MapnetError(f"--glue-data needs --glue-tasks (the {proto.name} protocol names no tasks)")
    if glue_every_checkpoint and glue_data is None:
        raise MapnetError("--glue-every-checkpoint needs --glue-tasks and --glue-data")
    if blimp is None and (blimp_pairs or blimp_method != "pll" or blimp_every_checkpoint):
        raise MapnetError("--blimp-pairs, --blimp-method and --blimp-every-checkpoint need --blimp")
    names = cmp.parse_strategies(strategies)
    tasks = (task_names(glue_tasks) if glue_tasks else list(proto.tasks)) if glue_data is not None else []
    model_flags = {"preset": preset, "init_from": str(init_from) if init_from is not None else None}
    # With --init-from the model size is SOURCE's, as in pretrain.
    # Not refused here for a strategy-specific key (masking.span.p): plan_runs gives it to the arms that use it.
    # The GLUE protocol (quick unless --glue-protocol) sits under the config file and the flags, as in finetune-glue.
    base = init_mod.resolve(
        config,
        {
            "model": model_flags,
            "train": {"steps": steps, "time_budget": time_budget, "recipe": recipe},
            "engine": {"name": engine.value if engine else None},
        },
        set_ or (),
        check_ignored=False,
        protocol=proto.name,
    )
    check_engine_address(engine_address, base.engine.name)
    spreading.check_options(base.engine, gpus, gpus_per_run)
    from ..train.run_settings import with_corpus_cleaning

    base = with_corpus_cleaning(base, shards)  # as pretrain records it: a reused run's settings then match
    costs = None
    if step_costs is not None:
        from ..compare.costs import read_step_costs

        costs = read_step_costs(step_costs, names)
        costs_sha256 = sha256_file(step_costs)  # of the file as it was read, not as it may be hours later
    plan = cmp.plan_runs(base, names, seeds, out, costs)
    if print_settings:
        typer.echo(base.to_toml(), nl=False)
        return
    if base.distributed.gpus or base.distributed.nproc:
        raise MapnetError(
            "mapnet compare starts its runs itself; leave distributed.gpus and distributed.nproc at 0 "
            "(--gpus N --gpus-per-run K trains runs on K GPUs each)"
        )
    # before any work: more GPUs than this machine has, or none
    spread = spreading.from_options(base.engine, engine_address, gpus, gpus_per_run)
    if gpus:
        if gpus_per_run > 1:  # each run on K GPUs through torchrun, as `pretrain --gpus K`
            plan = [
                replace(
                    pr,
                    settings=settings_mod.apply(pr.settings, {"distributed": {"gpus": gpus_per_run}}, "--gpus-per-run"),
                )
                for pr in plan
            ]
    # Rerunning reuses what is in --out; it never replaces it.
    check_output(
        out,
        [shards, base.model.init_from or None, glue_data, blimp, config, step_costs],
        kind=artefacts.COMPARISON,
        reuse=True,
    )

    suite = blimp_cfg = None
    if blimp is not None:  # the folder and settings are checked before any training
        from ..evaluation.blimp.data import load_suite
        from ..evaluation.blimp.evaluate import BlimpConfig

        blimp_cfg = BlimpConfig(method=blimp_method)
        problems = blimp_cfg.problems()
        if problems:
            raise MapnetError("--blimp-method: " + "; ".join(problems))
        suite = load_suite(blimp, blimp_pairs)
    # Every arm's inputs, the GLUE files and the BLiMP sentences' length, before the first run trains: found late,
    # they cost every run before.
    from ..compare.plan import check_inputs

    check_inputs(plan, shards, tasks, glue_data, base.finetune, suite)
    err = Console(stderr=True)
    note = lambda text: err.print(text, highlight=False, markup=False)  # noqa: E731
    with output_lock(out):
        make_dirs(out)
        write_text(out / "command.txt", shlex.join(sys.argv) + "\n")
        if spread is not None:
            todo = cmp.runs_to_train(plan, note)
            if todo:
                note(
                    f"training {len(todo)} runs side by side ({spread.where()}); each run's log and "
                    "metrics are in its folder"
                )
            with RunsProgress(err, base.logging.progress) as shown_runs:
                cmp.train_in_parallel(todo, shards, spread, shown_runs.tick)
            reused = cmp.reused_of(plan, todo)
        else:
            reused = cmp.run_all(
                plan, shards, lambda pr, resume: train_with_progress(shards, pr.path, pr.settings, resume, None), note
            )
        glue = None
        if tasks:
            events = SweepProgress(err, base.logging.progress)
            with events.progress:
                glue = cmp.glue_results(
                    plan,
                    tasks,
                    glue_data,
                    out,
                    base.finetune,
                    events,
                    glue_every_checkpoint,
                    preset=proto.name,
                    spread=spread,
                )
        if variance:
            note("measuring the gradient variance at every checkpoint")
        scores = None
        if suite is not None:
            note(f"scoring BLiMP ({len(suite.paradigms)} paradigms, {suite.pairs:,} pairs, {blimp_method})")
            # On the device the runs trained on (train.device): a GPU machine scores on its GPU.
            scores = cmp.blimp_results(
                plan,
                shards,
                suite,
                blimp_cfg,
                out,
                blimp_every_checkpoint,
                note,
                device=base.train.device,  # the runs' own device: a GPU machine scores on its GPU
                spread=spread,
            )
        runs = cmp.collect(plan, shards, reused, variance=variance, glue=glue, blimp=scores)
        doc = cmp.results_document(
            plan,
            runs,
            sys.argv,
            shards,
            cmp.glue_controls(glue),
            cmp.blimp_controls(scores) if scores is not None else None,
        )
        if tasks:
            doc["glue_protocol"] = {"name": proto.name, "tasks": tasks}
        if costs is not None:
            doc["step_costs"] = {
                "file": str(step_costs),
                "sha256": costs_sha256,
                "arms": {name: {"step_seconds": c[0], "short_step_seconds": c[1]} for name, c in costs.items()},
            }
        if suite is not None:
            doc["blimp"] = {
                "folder": str(blimp),
                "sha256": suite.sha256,
                "paradigms": len(suite.paradigms),
                "pairs_per_paradigm": blimp_pairs,
                "pairs": suite.pairs,
                "method": blimp_method,
                "every_checkpoint": blimp_every_checkpoint,
            }
        write_json(out / cmp.RESULTS, doc)
        console = Console()
        if not console.is_terminal:  # a log file or a pipe: room for every column rather than elided numbers
            console = Console(width=max(console.width, 240))
        print_table(console, doc)
        for text in cmp.write_plots(doc, out):
            note(text)
        note(f"results: {out / cmp.RESULTS}")


def print_table(console: Console, doc: dict) -> None:
    header, rows = cmp.table_rows(doc)
    target = doc["aggregate"]["target"]
    title = "masking strategies (mean ± 95% CI over seeds)"
    # fold, never "…": a table of numbers with elided digits looks complete and is not.
    table = Table(*(Column(shown(h), overflow="fold") for h in header), title=title)
    for row in rows:
        table.add_row(*cells(*row))  # arm names and numbers: text, not markup
    console.print(table)
    control = doc["aggregate"].get("glue_control")
    if control:
        n = len(control["seed_indices"])
        console.print(
            f"GLUE Δ vs random init: per pretraining seed, the strategy's GLUE score minus that seed's "
            f"random-init control (each averaged over fine-tuning seeds first), then a 95% t-interval over "
            f"{n} pretraining seeds = {n} independent comparisons",
            highlight=False,
        )
    b = doc.get("blimp")
    if b:
        n = len(doc["aggregate"]["blimp_control"]["seed_indices"]) if doc["aggregate"].get("blimp_control") else 0
        console.print(
            f"BLiMP: accuracy % ({b['method']}, mean over {b['paradigms']} paradigms, {b['pairs']:,} pairs; a tie "
            f"is wrong); Δ paired by pretraining seed, a 95% t-interval over {n} seeds = {n} independent "
            "comparisons per column; \"at uniform's time\": the strategy's BLiMP curve read at the seconds "
            "uniform trained for (needs --blimp-every-checkpoint)",
            highlight=False,
        )
    if doc.get("step_costs"):  # the seconds in the table are the clock's, not this machine's while it trained
        console.print(
            f"s/step and every time axis: the modelled clock's seconds (--step-costs {doc['step_costs']['file']}: "
            "each arm's measured cost a step); each run's wall time is run.json's budget.wall_seconds",
            highlight=False,
            markup=False,
        )
    plateau = cmp.unigram_line(doc)
    if plateau:
        console.print(plateau, highlight=False, markup=False)
    if target:
        console.print(
            f"target: uniform's final mean held-out loss {target['final_mean_eval_loss']:.4f} "
            f"(steps to target: interpolated on the mean curve)",
            highlight=False,
        )
    failed = [k for k, ok in doc["checks"].items() if not ok]
    if failed:
        console.print(f"[bold yellow]warning:[/] fairness checks failed: {', '.join(failed)}", highlight=False)
