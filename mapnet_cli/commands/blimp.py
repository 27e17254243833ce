"""`mapnet blimp`: zero-shot grammar (BLiMP minimal pairs) by pseudo-log-likelihood, at every checkpoint.

    mapnet blimp runs/tiny --data ../shared/data/blimp --out out/blimp-tiny.json          # every checkpoint: a curve
    mapnet blimp runs/tiny/checkpoints/step-00003000 --data blimp --out out/b.json --method word-l2r
    mapnet blimp hf/tiny --data blimp --out out/b.json --shards shards/                  # an exported folder
    mapnet blimp runs/tiny --data blimp --out out/b.json --pairs 200 --paradigms anaphor_gender_agreement
    mapnet blimp runs/tiny --data blimp --out out/b.json --resume                        # go on where it stopped

Each model scores both sentences of every minimal pair (each token masked in turn, log-probabilities
summed; `--method word-l2r` also masks the later pieces of the same word); a pair is right when the
grammatical one scores strictly higher. Beside each model: the same architecture with random weights
and the frequencies-only model of its training shards, and the published 5-gram, LSTM and GPT-2
figures of the same paradigms. See `mapnet_cli/evaluation/blimp/`.
"""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from .. import artefacts
from ..comma_list import comma_list
from ..errors import MapnetError
from ..evaluation.device import evaluation_device
from ..output_paths import check_output
from ..run_lock import output_lock
from .options import DeviceOpt, OverwriteOpt
from .shown import cells

HELP = (
    "Zero-shot grammar: BLiMP minimal pairs scored by pseudo-log-likelihood at every checkpoint, with "
    "random-weight and unigram controls."
)

FIELDS = ("morphology", "syntax", "syntax_semantics", "semantics")


def blimp(
    models: Annotated[
        list[Path],
        typer.Argument(
            help="Run folders (every complete checkpoint), checkpoint folders or exported Hugging Face folders.",
            show_default=False,
        ),
    ],
    data: Annotated[
        Path,
        typer.Option(
            "--data",
            "-d",
            help="BLiMP folder: one <paradigm>.jsonl per paradigm (+ models_summary.jsonl).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help='JSON file to write (rewritten after every model; "complete" is true at the end).',
            show_default=False,
        ),
    ],
    method: Annotated[
        str,
        typer.Option(
            "--method", help="pll (each token masked in turn) or word-l2r (the later pieces of the word masked too)."
        ),
    ] = "pll",
    pairs: Annotated[int, typer.Option("--pairs", help="The first N pairs of each paradigm (0: all).")] = 0,
    paradigms: Annotated[
        str | None,
        typer.Option(
            "--paradigms", help="Comma-separated paradigm names (file stems); default: every file.", show_default=False
        ),
    ] = None,
    shards: Annotated[
        Path | None,
        typer.Option(
            "--shards",
            help="Training shards for the unigram control (default: what each run.json records).",
            show_default=False,
        ),
    ] = None,
    random_control: Annotated[
        bool, typer.Option("--random/--no-random", help="Also score each architecture with random weights.")
    ] = True,
    unigram_control: Annotated[
        bool, typer.Option("--unigram/--no-unigram", help="Also score the training shards' unigram model.")
    ] = True,
    per_paradigm: Annotated[bool, typer.Option("--per-paradigm", help="Also print a table per paradigm.")] = False,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Tokens per forward pass.")] = 16384,
    device: DeviceOpt = "cpu",
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="A progress bar with ETA on stderr.")
    ] = True,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue --out: the models it already holds (the same weights, pairs, method and settings) are "
            "kept, the others scored; without the file, start it.",
        ),
    ] = False,
    overwrite: OverwriteOpt = False,
) -> None:
    """Score BLiMP at every checkpoint."""
    from ..evaluation.blimp.data import load_suite
    from ..evaluation.blimp.evaluate import BlimpConfig, blimp_run

    if resume and overwrite:
        raise MapnetError("--resume keeps what --out holds and --overwrite replaces it: give one")
    check_output(out, [*models, data, shards], kind=artefacts.BLIMP, overwrite=overwrite, reuse=resume)
    kept = read_kept(out) if resume and out.exists() else None
    dev = evaluation_device(device)
    cfg = BlimpConfig(
        method=method, max_tokens=max_tokens, random_control=random_control, unigram_control=unigram_control
    )
    problems = cfg.problems()
    if problems:
        raise MapnetError("; ".join(problems))
    only = comma_list(paradigms, "--paradigms") if paradigms is not None else None
    suite = load_suite(data, pairs, only)
    err = Console(stderr=True)
    bar = Progress(
        TextColumn("BLiMP"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("masked rows"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=err,
        disable=not progress or not err.is_terminal,
    )
    with output_lock(out), bar:
        task = bar.add_task("blimp", total=None)
        doc = blimp_run(
            models,
            suite,
            cfg,
            out,
            shards,
            dev,
            note=lambda text: bar.console.print(text, highlight=False, markup=False),
            progress=lambda done, total: bar.update(task, completed=done, total=total),
            kept=kept,
        )
    print_tables(doc, per_paradigm)
    err.print(f"blimp: {out}", highlight=False, markup=False)


def read_kept(out: Path) -> dict:
    """The file --resume continues, read as JSON (its contents are checked against the asked scoring later)."""
    import json

    try:
        return json.loads(out.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MapnetError(f"--resume: {out} is not readable JSON ({exc}); pass --overwrite to replace it") from None


def print_tables(doc: dict, per_paradigm: bool = False) -> None:
    console = Console()
    if not console.is_terminal:  # a log file or a pipe: room for every column rather than elided names
        console = Console(width=max(console.width, 160))
    fields = [f for f in FIELDS if any(f in m["fields"] for m in doc["models"])]
    fields += sorted({f for m in doc["models"] for f in m["fields"]} - set(fields))
    d = doc["data"]
    subset = f"first {d['pairs_per_paradigm']} pairs each" if d["pairs_per_paradigm"] else "all pairs"
    # cells: labels are paths, fields and paradigms the data files' own names (text, not rich markup)
    table = Table(
        "model",
        "init",
        "mean",
        *cells(*fields),
        "Δ random",
        "Δ unigram",
        title=f"BLiMP, {doc['method']}: {d['paradigms']} paradigms, {d['pairs']:,} pairs ({subset}); accuracy %, mean "
        "over paradigms",
    )
    by_label = {m["label"]: m for m in doc["models"]}

    def delta(m: dict, kind: str) -> str:
        ctl = by_label.get(m.get("controls", {}).get(kind, ""))
        return "" if ctl is None else f"{100 * (m['accuracy'] - ctl['accuracy']):+.1f}"

    for m in doc["models"]:
        table.add_row(
            *cells(
                m["label"],
                m["init"],
                f"{100 * m['accuracy']:.1f}",
                *(f"{100 * m['fields'][f]:.1f}" if f in m["fields"] else "" for f in fields),
                delta(m, "random"),
                delta(m, "unigram"),
            )
        )
    for name, ref in doc["references"].items():
        table.add_row(
            *cells(
                name,
                "published",
                f"{100 * ref['accuracy']:.1f}",
                *(f"{100 * ref['fields'][f]:.1f}" if f in ref["fields"] else "" for f in fields),
                "",
                "",
            )
        )
    console.print(table)
    if per_paradigm:
        cols = [m["label"] for m in doc["models"]] + list(doc["references"])
        pt = Table("paradigm", "field", *cells(*cols), title="BLiMP accuracy % per paradigm")
        for uid, first in doc["models"][0]["paradigms"].items():
            pt.add_row(
                *cells(
                    uid,
                    first["field"],
                    *(f"{100 * m['paradigms'][uid]['accuracy']:.1f}" for m in doc["models"]),
                    *(f"{100 * r['paradigms'][uid]:.1f}" for r in doc["references"].values()),
                )
            )
        console.print(pt)
