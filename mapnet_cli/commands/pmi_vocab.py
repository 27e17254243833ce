"""`mapnet pmi-vocab`: the PMI n-gram vocabulary of PMI-Masking, from a preprocessed corpus.

    mapnet pmi-vocab corpus/ --out corpus/pmi.tsv
    mapnet pmi-vocab corpus/ --out shards/pmi.tsv --size 200000 --min-count 5 --max-entries 2000000
    mapnet pretrain shards/ --out runs/pmi --masking pmi      # finds pmi.tsv in shards/ or in their corpus

Streams the corpus once in bounded memory (at most --max-entries n-gram counts; see
`mapnet_cli/masking/pmi_vocab.py` for the measure and the approximation) and writes the file atomically.
"""

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from .. import artefacts
from ..data.preprocessed import open_preprocessed
from ..errors import warn
from ..masking import pmi_vocab as vocabulary  # the command below is named pmi_vocab
from ..output_paths import check_output
from .options import OverwriteOpt

HELP = "Build the PMI n-gram vocabulary (PMI-Masking) of a preprocessed corpus, in bounded memory."


def pmi_vocab(
    corpus: Annotated[Path, typer.Argument(help="Folder written by `mapnet preprocess`.", show_default=False)],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Vocabulary file to write (atomically), e.g. SHARDS/pmi.tsv.", show_default=False
        ),
    ],
    size: Annotated[
        int, typer.Option("--size", help="Entries (paper: 800K): 50% bigrams, 25% trigrams, 12.5% 4- and 5-grams.")
    ] = 800_000,
    min_count: Annotated[
        int, typer.Option("--min-count", help="Least occurrences of a candidate n-gram (paper: over 10).")
    ] = 10,
    max_entries: Annotated[
        int, typer.Option("--max-entries", help="Most n-gram counts held in memory (Lossy Counting prunes beyond).")
    ] = 4_000_000,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")] = True,
    overwrite: OverwriteOpt = False,
) -> None:
    """Build the PMI n-gram vocabulary (PMI-Masking) of a preprocessed corpus, in bounded memory."""
    source = open_preprocessed(corpus)
    # The inputs are the files it reads, not the folder: CORPUS/pmi.tsv, beside them, is where pretrain looks.
    read = [source.path / "manifest.json", source.tokenizer_path, *map(source.part_path, source.manifest["parts"])]
    check_output(out, read, kind=artefacts.PMI_VOCAB, overwrite=overwrite)
    console = Console(stderr=True)
    columns = (TextColumn("pmi-vocab"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not progress) as bar:
        task = bar.add_task("pmi-vocab", total=source.total_bytes)
        vocab = vocabulary.build_vocabulary(
            source, size=size, min_count=min_count, max_entries=max_entries, progress=lambda n: bar.advance(task, n)
        )
    sha = vocabulary.write_vocabulary(vocab, out)
    h = vocab.header
    if not h["exact_counts"]:
        warn(
            f"--max-entries {max_entries} pruned n-gram counts by up to {h['prune_floor']}: n-grams seen fewer than "
            f"{min_count + h['prune_floor']} times may be missing or under-counted; raise --max-entries for exact "
            "counts"
        )
    by_len = ", ".join(f"{n}-grams {c:,}" for n, c in h["entries_by_length"].items())
    Console().print(
        f"{out}: {h['entries']:,} entries ({by_len}) from {h['words']:,} words in {h['sentences']:,} "
        f"sentences, {h['seconds']:.1f} s; prune floor {h['prune_floor']}; sha256 {sha[:12]}",
        highlight=False,
        markup=False,
    )  # the path as given, brackets included
