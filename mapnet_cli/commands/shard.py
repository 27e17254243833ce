"""`mapnet shard`: pack a preprocessed corpus into fixed-length Arrow shards.

    mapnet shard prep/ --out shards/
    mapnet shard prep/ --out shards/ --max-seq-len 128 --valid-fraction 0.05 --set shard.packing=whole_sentences
    mapnet shard prep/ --out shards/ --init-from hf/bert-base-uncased   # refuse another tokenizer than the encoder's
    mapnet shard prep/ --out shards/ --engine dask --engine-address tcp://head:8786   # encoding as tasks on a cluster

Settings: defaults < preset < the preprocessed folder's settings.toml (so a
recipe's [shard] table carries over from `mapnet preprocess`) < --config <
flags.
"""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table

from .. import artefacts
from .. import settings as settings_mod
from ..data.preprocessed import open_preprocessed
from ..data.shard_writer import run_shard
from ..output_paths import check_output
from ..run_lock import output_lock
from .options import ConfigOpt, EngineAddressOpt, EngineOpt, PrintSettingsOpt, SetOpt, TasksOpt, check_engine_address
from .shown import shown

HELP = "Pack a preprocessed corpus into fixed-length, train/valid-split Arrow shards."


def shard(
    preprocessed: Annotated[Path, typer.Argument(help="Folder written by `mapnet preprocess`.", show_default=False)],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Shard folder to create (published atomically).", show_default=False)
    ],
    max_seq_len: Annotated[
        int | None,
        typer.Option(
            "--max-seq-len", help="Tokens per sequence ([CLS] included); sets shard.max_seq_len.", show_default=False
        ),
    ] = None,
    valid_fraction: Annotated[
        float | None,
        typer.Option("--valid-fraction", help="Held-out fraction; sets shard.valid_fraction.", show_default=False),
    ] = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    init_from: Annotated[
        Path | None,
        typer.Option(
            "--init-from",
            help="The encoder these shards are for (as pretrain --init-from): refuse, before packing, a corpus not "
            "encoded with its tokenizer.",
            show_default=False,
        ),
    ] = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Delete and replace --out if it exists: only an output of this command's kind that mapnet wrote and "
            "that holds nothing else (else refused, naming what is there).",
        ),
    ] = False,
    engine: EngineOpt = None,
    tasks: TasksOpt = None,
    engine_address: EngineAddressOpt = None,
    print_settings: PrintSettingsOpt = False,
) -> None:
    """Pack a preprocessed corpus into fixed-length, train/valid-split Arrow shards."""
    layers: list[Path] = []
    if (preprocessed / "settings.toml").is_file():
        layers.append(preprocessed / "settings.toml")
    if config is not None:
        layers.append(config)
    settings = settings_mod.resolve(
        layers,
        {
            "shard": {"max_seq_len": max_seq_len, "valid_fraction": valid_fraction},
            "engine": {"name": engine.value if engine else None, "tasks": tasks},
        },
        set_ or (),
        extra_sections=("recipe",),
    )
    if print_settings:
        typer.echo(settings.to_toml(), nl=False)
        return
    check_output(out, [preprocessed, init_from, config], kind=artefacts.SHARDS, overwrite=overwrite)
    check_engine_address(engine_address, settings.engine.name)
    with output_lock(out):
        corpus = open_preprocessed(preprocessed)
        if init_from is not None:  # hours of packing for shards pretrain would refuse: check first
            from ..train import init_from as init_mod

            init_mod.check_tokenizer(
                init_mod.open_source(init_from), corpus.tokenizer_path, f"the corpus in {preprocessed}"
            )
        console = Console(stderr=True)
        columns = (TextColumn("shard"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=console, disable=not settings.logging.progress) as bar:
            task = bar.add_task("shard", total=corpus.total_bytes)
            summary = run_shard(
                corpus,
                out,
                settings,
                overwrite=overwrite,
                progress=lambda n: bar.advance(task, n),
                engine_address=engine_address,
            )
    _print_summary(Console(), summary)


def _print_summary(console: Console, summary: dict) -> None:
    m = summary["manifest"]
    table = Table(
        "split",
        "sequences",
        "tokens",
        "documents",
        "padding",
        "files",
        title=f"{shown(summary['out'])}: {m['max_seq_len']} tokens/sequence, {m['dtype']}, packing={m['packing']}",
    )
    for split, s in m["splits"].items():
        files = sum(f["split"] == split for f in m["files"])
        table.add_row(
            split,
            f"{s['sequences']:,}",
            f"{s['tokens']:,}",
            f"{s['documents']:,}",
            f"{100 * s['padding_fraction']:.2f}%",
            str(files),
        )
    console.print(table)
    secs = max(summary["seconds"], 1e-9)
    console.print(
        f"{summary['sentences']:,} sentences, {summary['bytes'] / 1e6:.1f} MB in {secs:.1f} s "
        f"({summary['bytes'] / 1e6 / secs:.1f} MB/s, {summary['workers']} worker(s)"
        + (
            f", dask: {summary['tasks']:,} task(s), {summary['tasks_resumed']:,} found finished"
            if summary["engine"] == "dask"
            else ""
        )
        + ")",
        highlight=False,
    )
    kinds = summary["token_kinds"]
    if kinds is not None:
        note = (
            f"token_kinds.json: {kinds['words'] - kinds['multi_token_words']:,} of {kinds['words']:,} words are "
            "single tokens"
        )
        if kinds["multi_token_words"]:
            note += f"; not single tokens (their ids carry no kind): {', '.join(kinds['examples'])}"
        console.print(note, highlight=False, markup=False)  # the corpus's own words
