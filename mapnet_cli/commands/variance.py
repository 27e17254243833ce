"""`mapnet variance`: measure the paper's gradient-variance decomposition on a checkpoint.

    mapnet variance runs/tiny --sentences 64 --masks 8
    mapnet variance runs/mapnet/checkpoints/step-00020000 --project-dim 4096 --json > variance.json
    mapnet variance runs/tiny --schemes uniform,stratified,frequency,oracle
    mapnet variance runs/tiny --data shards/ --set variance.memory_gb=8

For S validation sequences x M masks per scheme it prints the mask variance tr E_x[Var(g|x)], the sentence
variance tr Var_x(E[g|x]) and the directly measured total tr Var(g) (unbiased; their sum equals the total), with
bootstrap 95% intervals, and the scale-free noise scale tr Var(g) / ||E g||^2, for uniform masking and — when the
checkpoint has a MAP-Net — MAP-Net's proposal with clipped, unclipped and no importance weights and under its HT
design; stratified / frequency masking for checkpoints trained with them (or by name: --schemes); the
gradient-norm oracle with --oracle. Settings: the checkpoint's own (its masking as trained) < --config < flags.
More command lines and the estimators: docs/evaluation.md#measuring-gradient-variance-mapnet-variance;
the JSON: docs/formats.md#gradient-variance-mapnet-variance-checkpoint-json.
"""

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .. import settings as settings_mod
from ..comma_list import comma_list
from .options import ConfigOpt, SetOpt
from .shown import cells, shown

HELP = "Measure the gradient-variance decomposition (mask / sentence / total) of a checkpoint, per masking scheme."


def resolve_settings(ckpt: Path, config: Path | None, flags: dict, assignments: list[str]):
    """The checkpoint's settings < config file < flags < --set."""
    from ..model import checkpoint  # torch-heavy: imported only when the command runs

    return settings_mod.resolve(config, flags, assignments, base=checkpoint.load_settings(ckpt), base_is_run=True)


def wanted_schemes(settings, oracle: bool) -> list[str]:
    """variance.schemes (or the checkpoint's defaults when empty), plus the oracle when asked for."""
    from ..evaluation.variance.schemes import default_schemes

    schemes = list(settings.variance.schemes or default_schemes(settings.masking))
    return schemes + ["oracle"] if oracle and "oracle" not in schemes else schemes


def variance(
    run: Annotated[
        Path,
        typer.Argument(
            help="Run folder (its newest checkpoint) or a step-XXXXXXXX checkpoint folder.", show_default=False
        ),
    ],
    sentences: Annotated[
        int | None,
        typer.Option("--sentences", "-S", help="Validation sequences S; sets variance.sentences.", show_default=False),
    ] = None,
    masks: Annotated[
        int | None,
        typer.Option(
            "--masks", "-M", help="Masks per sequence and scheme (>= 2); sets variance.masks.", show_default=False
        ),
    ] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print the JSON document (schema mapnet.variance/1) instead of tables.")
    ] = False,
    project_dim: Annotated[
        int | None,
        typer.Option(
            "--project-dim",
            help="Sketch gradients to D dims (0: exact); sets variance.project_dim.",
            show_default=False,
        ),
    ] = None,
    params: Annotated[
        list[str] | None,
        typer.Option(
            "--params", help="Only parameters whose name matches this fnmatch pattern (repeatable).", show_default=False
        ),
    ] = None,
    batch_sizes: Annotated[
        str | None,
        typer.Option(
            "--batch-sizes", help="Mini-batch sizes, e.g. 1,8,32; sets variance.batch_sizes.", show_default=False
        ),
    ] = None,
    bootstrap: Annotated[
        int | None,
        typer.Option(
            "--bootstrap", help="Bootstrap replicates (0: no intervals); sets variance.bootstrap.", show_default=False
        ),
    ] = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", help="Seed of sentences, masks, bootstrap; sets variance.seed.", show_default=False),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option("--data", help="Shard folder (default: the one in the run's run.json).", show_default=False),
    ] = None,
    schemes: Annotated[
        str | None,
        typer.Option(
            "--schemes",
            help="Schemes to measure, e.g. uniform,ht,stratified,frequency; sets variance.schemes.",
            show_default=False,
        ),
    ] = None,
    oracle: Annotated[
        bool,
        typer.Option(
            "--oracle",
            help="Also measure the oracle scheme (pi proportional to the encoder's gradient-norm proxy; costs extra "
            "forwards).",
        ),
    ] = False,
    config: ConfigOpt = None,
    set_: SetOpt = None,
) -> None:
    """Measure the gradient-variance decomposition (mask / sentence / total) of a checkpoint, per masking scheme."""
    from ..evaluation.variance.report import variance_report
    from ..evaluation.variance.target import load_target
    from ..model import checkpoint

    ckpt = checkpoint.resolve_checkpoint(run)
    sizes = None if batch_sizes is None else comma_list(batch_sizes, "--batch-sizes", convert=int, allow_empty=True)
    names = None if schemes is None else comma_list(schemes, "--schemes", allow_empty=True)  # checked by the settings
    flags = {
        "variance": {
            "sentences": sentences,
            "masks": masks,
            "project_dim": project_dim,
            "params": list(params) if params else None,
            "batch_sizes": sizes,
            "bootstrap": bootstrap,
            "seed": seed,
            "schemes": names,
        }
    }
    settings = resolve_settings(ckpt, config, flags, list(set_ or ()))
    err = Console(stderr=True)
    target = load_target(ckpt, data)
    v = settings.variance
    wanted = wanted_schemes(settings, oracle)
    what = f"{v.project_dim}-dim sketch" if v.project_dim else "exact gradients"
    with err.status(f"measuring {v.sentences} sentences x {v.masks} masks ({what})", spinner="dots"):
        report = variance_report(target, settings, wanted)
    if json_:
        typer.echo(json.dumps(report, indent=2, allow_nan=False))
        return
    render(report, Console())


def _fmt(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.4g}"


def _cell(entry: dict) -> str:
    ci = entry.get("ci95")
    return _fmt(entry["estimate"]) + (f" [{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci and None not in ci else "")


def _scale_cell(entry: dict) -> str:
    """A noise scale, where null means unbounded (the report's convention for these figures)."""

    def one(x):
        return "inf" if x is None else _fmt(x)

    ci = entry.get("ci95")
    return one(entry["estimate"]) + (f" [{one(ci[0])}, {one(ci[1])}]" if ci else "")


def render(report: dict, console: Console) -> None:
    """Rich tables of a `mapnet.variance/1` document."""
    g, d = report["gradient"], report["data"]
    console.print(
        f"[bold]{shown(report['checkpoint']['path'])}[/] — {len(d['sentences'])} validation sentences x "
        f"{d['masks_per_sentence']} masks, K ~ {d['mask_size_mean']:.1f} of n ~ {d['eligible_mean']:.1f} "
        f"positions; {g['mode']} gradients of {g['parameters']:,} parameters"
        + (f" sketched to {g['dimension']}" if g["mode"] == "sketch" else "")
        + f"; {g['evaluations']} backward passes in {g['seconds']:.1f} s",
        highlight=False,
    )
    table = Table(title="Gradient variance (traces; 95% bootstrap intervals)", show_lines=False)
    for col in (
        "scheme",
        "mask variance",
        "sentence variance",
        "total (direct)",
        "mask + sentence",
        "mask share",
        "noise scale",
        "weights mean [min, max]",
        "bias vs uniform (rel.)",
    ):
        # shown: "[min, max]" and an interval "[inf, 3.1]" are text (rich took them for tags and dropped them)
        table.add_column(shown(col), justify="left" if col == "scheme" else "right")
    for name, entry in report["schemes"].items():
        if not entry["available"]:
            table.add_row(shown(name), f"[dim]unavailable: {shown(entry['reason'])}[/]", "", "", "", "", "", "", "")
            continue
        w = entry["weights"]
        bias = entry.get("bias_vs_uniform")
        table.add_row(
            *cells(
                name + (" (per position)" if w.get("per_position") else ""),
                _cell(entry["mask_variance"]),
                _cell(entry["sentence_variance"]),
                _cell(entry["total_variance"]),
                _fmt(entry["sum_of_terms"]["estimate"]),
                f"{entry['mask_share']:.1%}" if entry["mask_share"] is not None else "-",
                _scale_cell(entry["noise_scale"]),
                f"{w['mean']:.3f} [{w['min']:.3f}, {w['max']:.3f}]",
                _cell(bias["relative_unbiased"]) if bias else "-",
            )
        )
    console.print(table)
    console.print(
        "[dim]noise scale = total / ||E g||^2 of the scheme's own mean gradient (B_simple; a constant weight "
        "cancels); inf: the mean gradient is not distinguishable from 0.[/]",
        highlight=False,
    )
    mb = Table(title="Mini-batch mean: B sequences x 1 mask (total / B, and measured by drawing disjoint batches)")
    for col in ("scheme", "B", "predicted total / B", "mask part", "sentence part", "direct ± MC s.e."):
        mb.add_column(shown(col), justify="left" if col == "scheme" else "right")
    for name, rows in report["minibatch"].items():
        for row in rows:
            direct = row["direct"]
            mb.add_row(
                *cells(
                    name,
                    str(row["batch_size"]),
                    _cell(row["predicted"]),
                    _fmt(row["mask_part"]),
                    _fmt(row["sentence_part"]),
                ),
                shown(f"{_fmt(direct['estimate'])} ± {_fmt(direct['mc_stderr'])}")
                if direct
                else f"[dim]{shown(row['direct_unavailable'])}[/]",
            )
    console.print(mb)
