"""`mapnet preprocess`: raw text -> cleaned sentence files + BPE tokenizer.

mapnet preprocess data/enwiki/text data/books --recipe data_recipes/paper.toml --out corpus
mapnet preprocess --recipe data_recipes/wikitext103.toml --out wt103
mapnet preprocess books/ --out corpus --tokenizer old/tokenizer.json --workers 4
mapnet preprocess synthetic: --out synth --vocab-size 4096
mapnet preprocess c4/en/ --out c4-prep --engine dask --engine-address tcp://head:8786   # tasks on a cluster
mapnet preprocess texts/ --out corpus --tokenizer hf/bert-base-uncased/tokenizer.json --bert-text
"""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from .. import artefacts
from .. import settings as settings_mod
from ..data import preprocess as pp
from ..data.inputs import SYNTHETIC
from ..data.recipes import load_recipe, recipe_inputs
from ..errors import MapnetError, warn
from ..output_paths import check_output
from ..run_lock import output_lock
from .options import ConfigOpt, EngineAddressOpt, EngineOpt, PrintSettingsOpt, SetOpt, TasksOpt, check_engine_address
from .shown import cells, shown


class _TextRate(ProgressColumn):
    """Throughput in MB/s of text handed to the sentence splitter (not compressed bytes on disk)."""

    def render(self, task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.fields.get("text_bytes", 0) / elapsed / 1e6 if elapsed > 0 else 0.0
        return Text(f"{rate:.2f} MB/s", style="progress.data.speed")


def preprocess(
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="Files or folders (recursive) of text, .gz/.bz2/.xz, JSONL, Parquet, Arrow, WikiExtractor or "
            "WikiText; "
            "'synthetic:' is the embedded synthetic corpus. Default: the recipe's inputs.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Output folder (must not exist unless --overwrite).", show_default=False),
    ] = None,
    recipe: Annotated[
        Path | None,
        typer.Option(
            "--recipe", help="Data recipe TOML (data_recipes/*.toml): default inputs and settings.", show_default=False
        ),
    ] = None,
    vocab_size: Annotated[
        int | None, typer.Option("--vocab-size", help="BPE vocabulary size, specials included.", show_default=False)
    ] = None,
    tokenizer: Annotated[
        Path | None,
        typer.Option("--tokenizer", help="Reuse this tokenizer.json instead of training one.", show_default=False),
    ] = None,
    no_lowercase: Annotated[bool, typer.Option("--no-lowercase", help="Keep the original case.")] = False,
    bert_text: Annotated[
        bool,
        typer.Option(
            "--bert-text",
            help="Text as a Hugging Face BERT's WordPiece tokenizer expects: sentences split, but no Moses "
            "normalisation or tokenisation and no lower-casing here (its own normalizer lower-cases an uncased "
            "model, its pre-tokenizer splits punctuation). Use with --tokenizer BERT/tokenizer.json.",
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option("--workers", "-j", help="Worker processes (0: all cores; 1: in-process).", show_default=False),
    ] = None,
    engine: EngineOpt = None,
    tasks: TasksOpt = None,
    engine_address: EngineAddressOpt = None,
    config: ConfigOpt = None,
    set_: SetOpt = None,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Delete and replace --out if it exists: only an output of this command's kind that mapnet wrote and "
            "that holds nothing else (else refused, naming what is there).",
        ),
    ] = False,
    print_settings: PrintSettingsOpt = False,
) -> None:
    """Split sentences (spaCy), normalise and tokenise (Moses), lower-case, and train a BPE tokenizer."""
    flags = {
        "vocab_size": vocab_size,
        "tokenizer": str(tokenizer) if tokenizer else None,
        "lowercase": False if no_lowercase or bert_text else None,
        "workers": workers,
    }
    if bert_text:  # one flag for the whole recipe: Moses would re-split and normalise what BERT never saw that way
        flags |= {"normalize_punctuation": False, "moses_tokenize": False}
    files = [p for p in (recipe, config) if p is not None]
    engine_flags = {"name": engine.value if engine else None, "tasks": tasks}
    resolved = settings_mod.resolve(
        config=files,
        overrides={"preprocess": flags, "engine": engine_flags},
        assignments=set_ or (),
        extra_sections=("recipe",),
    )
    if print_settings:
        typer.echo(resolved.to_toml(), nl=False)
        return
    if out is None:
        raise MapnetError("missing --out DIR (the output folder)")
    check_engine_address(engine_address, resolved.engine.name)
    # Before a recipe's download; run_preprocess checks the inputs a recipe names again once they are known.
    check_output(
        out,
        [*(i for i in inputs or () if i != SYNTHETIC), tokenizer, *files],
        kind=artefacts.CORPUS,
        overwrite=overwrite,
    )
    console = Console(stderr=True)
    pre = resolved.preprocess
    if pre.tokenizer and pre.moses_tokenize:
        from ..data.bpe import is_wordpiece, load_tokenizer

        if is_wordpiece(load_tokenizer(pre.tokenizer)):
            warn(
                f"{pre.tokenizer} is a WordPiece (BERT) tokenizer but the text is Moses-tokenised"
                f"{' and lower-cased' if pre.lowercase else ''}, not as BERT was pretrained; --bert-text gives it "
                "plain sentences"
            )
    recipe_info = None
    if recipe is not None:
        rec = load_recipe(recipe)
        recipe_info = {"name": rec.name, "path": rec.path}
        if not inputs:
            inputs, recipe_info = recipe_inputs(rec, log=lambda msg: console.print(msg, highlight=False, markup=False))
    if not inputs:
        raise MapnetError("no inputs: give INPUT files or folders, or a --recipe that lists inputs")

    show = resolved.logging.progress and console.is_terminal
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        _TextRate(),
        TextColumn("{task.fields[sentences]:,} sentences"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=not show,
        transient=True,
        auto_refresh=False,
    ) as bar:  # no refresh thread: preprocess forks its workers
        task = bar.add_task("sentences", total=None, text_bytes=0, sentences=0)

        def on_progress(p: pp.Progress) -> None:
            bar.update(
                task,
                description=p.stage,
                completed=p.input_bytes,
                total=p.input_bytes_total or None,
                text_bytes=p.text_bytes,
                sentences=p.sentences,
            )
            bar.refresh()

        with output_lock(out):
            result = pp.run_preprocess(
                inputs,
                out,
                resolved,
                overwrite=overwrite,
                on_progress=on_progress,
                recipe=recipe_info,
                engine_address=engine_address,
            )
    Console().print(_summary(result))
    if result.skipped_binary:
        console.print(
            f"[yellow]skipped {len(result.skipped_binary)} binary file(s):[/] "
            + ", ".join(map(shown, result.skipped_binary)),
            highlight=False,
        )


def _summary(r: pp.PreprocessResult) -> Table:
    rate = r.text_bytes / r.sentence_seconds / 1e6 if r.sentence_seconds > 0 else 0.0
    table = Table(title=f"preprocessed -> {shown(r.out)}", show_header=False)
    rows = [
        ("inputs", f"{r.inputs:,} file(s)"),
        ("documents", f"{r.documents:,}"),
        ("sentences", f"{r.sentences:,}"),
        ("words (Moses tokens)", f"{r.words:,}"),
        ("parts", f"{r.parts:,}"),
        ("text", f"{r.text_bytes / 1e6:,.1f} MB at {rate:.2f} MB/s with {r.workers} worker(s)"),
        *([("engine", f"dask: {r.tasks:,} task(s), {r.tasks_resumed:,} found finished")] if r.engine == "dask" else []),
        ("tokenizer", f"{'trained' if r.tokenizer_trained else 'reused'}, vocab {r.vocab_size:,}"),
        ("invalid UTF-8 bytes replaced", f"{r.invalid_utf8_replaced:,}"),
        ("binary files skipped", f"{len(r.skipped_binary):,}"),
        ("pieces cut / sentences cut", f"{r.chunks_cut:,} / {r.sentences_cut:,}"),
        ("time", f"{r.seconds:.1f} s"),
    ]
    for key, value in rows:
        table.add_row(*cells(key, value))
    return table
