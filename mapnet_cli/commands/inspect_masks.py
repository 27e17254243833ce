"""`mapnet inspect-masks`: see which tokens a trained MAP-Net, or an adaptive table, wants masked.

    mapnet inspect-masks runs/mapnet --text "The computer computes a computation."
    mapnet inspect-masks runs/mapnet/checkpoints/step-00600000 --file essay.txt --sentences 8
    cat essay.txt | mapnet inspect-masks runs/mapnet --json > masks.json
    mapnet inspect-masks runs/mapnet                      # the run's validation shards
    mapnet inspect-masks runs/amlm                        # --masking adaptive: also the table's top and bottom tokens

Each token is coloured by its proposal probability relative to uniform (p x n:
1 = what uniform masking gives every eligible token); one sampled mask is shown
in bold reverse video (the paper's case-study figure, in a terminal). A table
lists the word types MAP-Net masks most and least often relative to uniform,
over many samples. For an adaptive run (`--masking adaptive`) p is the table's inclusion
probability over K, and two more tables list the vocabulary entries the table now masks most and
least, as its weight over the base rate.
"""

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import MapnetError
from .shown import cells, shown

if TYPE_CHECKING:  # the library loads torch: imported in the command, so `mapnet --help` stays light
    from ..evaluation.inspect_masks import Inspection, SequenceView

HELP = (
    "Show a MAP-Net or adaptive-masking checkpoint's mask proposals: per-token probabilities, sampled masks, "
    "preferred words (and the adaptive table's most and least masked tokens)."
)

# (upper bound of p x n, style, legend label): blue = avoided, red = preferred.
BANDS = (
    (0.5, "bright_blue", "< 0.5x"),
    (0.9, "cyan", "0.5-0.9x"),
    (1.1, "white", "~1x (uniform)"),
    (2.0, "yellow", "1.1-2x"),
    (4.0, "red", "2-4x"),
    (float("inf"), "bold magenta", "> 4x"),
)


def _style(ratio: float | None) -> str:
    if ratio is None:
        return "dim"
    return next(style for bound, style, _ in BANDS if ratio < bound)


def render_sequence(view: "SequenceView") -> Text:
    """Tokens joined into words (▁ starts a word), coloured by p x n; masked tokens in reverse video."""
    out = Text()
    n = max(view.eligible, 1)
    masked = set(view.masked)
    for j, (tok, p) in enumerate(zip(view.tokens, view.probabilities)):
        piece = tok.replace("\u2581", " ") if j else tok.lstrip("\u2581")
        if j and tok.startswith("[") and tok.endswith("]") and not out.plain.endswith(" "):
            piece = " " + tok  # special tokens stand apart from the words around them
        style = _style(None if p is None else p * n)
        if j in masked:
            style += " bold reverse"
        out.append(piece, style=style)
    return out


def legend() -> Text:
    out = Text("proposal p x n: ")
    for _, style, label in BANDS:
        out.append(f" {label} ", style=style)
    out.append("  ")
    out.append(" masked ", style="bold reverse")
    out.append(" ")
    out.append(" special ", style="dim")
    return out


def show(result: "Inspection", console: Console) -> None:
    adaptive = result.strategy == "adaptive"
    who = "the adaptive table" if adaptive else "MAP-Net"
    console.print(
        f"[bold]{shown(result.checkpoint)}[/] (step {result.step}), input: {result.source}, "
        f"seed {result.seed}" + (f"; adaptive table after {result.updates} updates" if adaptive else "")
    )
    console.print(legend())
    for i, view in enumerate(result.sequences):
        console.print(f"\n[bold]#{i + 1}[/]  K={view.k} of n={view.eligible}, entropy/log n={view.entropy:.3f}")
        console.print(render_sequence(view))
    if result.left_out:
        console.print(
            f"\n{result.left_out} word types seen fewer than {result.min_count} times are left out of the "
            "tables below (--min-count; more rows with --sentences)"
        )
    if not (result.most or result.least):
        console.print(
            f"\nno word type is seen {result.min_count} times or more in these rows: no word table "
            "(lower --min-count or raise --sentences)"
        )
    for title, rows in ((f"{who} masks most", result.most), (f"{who} masks least", result.least)):
        if not rows:
            continue
        table = Table(title=f"word types {title}, vs uniform ({result.samples} samples)", title_justify="left")
        table.add_column("word")
        table.add_column("tokens seen", justify="right")
        table.add_column("mask rate", justify="right")
        table.add_column("vs uniform", justify="right")
        for w in rows:
            table.add_row(*cells(w.word, w.occurrences, f"{w.mask_rate:.3f}", f"{w.relative:.2f}x"))  # the text's words
        console.print()
        console.print(table)
    for title, tokens in (("most", result.tokens_most), ("least", result.tokens_least)):
        if not tokens:
            continue
        table = Table(
            title=f"tokens the adaptive table masks {title}: weight vs the base rate {result.mask_prob:g}",
            title_justify="left",
        )
        table.add_column("token")
        table.add_column("id", justify="right")
        table.add_column("masked in training", justify="right")
        table.add_column("vs base rate", justify="right")
        for t in tokens:
            table.add_row(*cells(t.token, t.id, t.observed, f"{t.relative:.2f}x"))
        console.print()
        console.print(table)
    if adaptive and not (result.tokens_most or result.tokens_least):
        console.print(
            f"\nno token was masked {result.min_count} times or more in training: no token table (lower --min-count)"
        )


def inspect_masks(
    run: Annotated[
        Path,
        typer.Argument(
            help="A run folder (its newest complete checkpoint) or a step-XXXXXXXX folder.", show_default=False
        ),
    ],
    text: Annotated[str | None, typer.Option("--text", "-t", help="Inspect this text.", show_default=False)] = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Inspect the text of this file.", show_default=False)
    ] = None,
    shards: Annotated[
        Path | None,
        typer.Option(
            "--shards", help="Validation shards to read when no text is given (default: the run's).", show_default=False
        ),
    ] = None,
    sentences: Annotated[
        int, typer.Option("--sentences", "-n", help="Rows to show: sentences of the text, or validation sequences.")
    ] = 4,
    samples: Annotated[int, typer.Option("--samples", help="Masks drawn per row for the word table.")] = 200,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sampled masks.")] = 0,
    min_count: Annotated[
        int,
        typer.Option(
            "--min-count",
            help="Rank only word types seen at least this many times in the rows (adaptive tokens: masked at least "
            "this many times in training).",
        ),
    ] = 5,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (schema mapnet.inspect-masks/1) instead of the coloured view.")
    ] = False,
) -> None:
    """Show a MAP-Net or adaptive-masking checkpoint's mask proposals: per-token probabilities, sampled masks,
    preferred words (and the adaptive table's most and least masked tokens)."""
    from ..evaluation.inspect_masks import inspect_masks as run_inspect

    if text is not None and file is not None:
        raise MapnetError("give --text or --file, not both")
    source = "text"
    if file is None and text is None and not sys.stdin.isatty():
        piped = sys.stdin.read()
        if piped.strip():  # an empty pipe (e.g. cron, CI) falls back to the validation shards
            text, source = piped, "stdin"
    result = run_inspect(
        run,
        text=text,
        file=file,
        source=source,
        sentences=sentences,
        seed=seed,
        samples=samples,
        shards=shards,
        min_count=min_count,
    )
    if as_json:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        show(result, Console(highlight=False))
