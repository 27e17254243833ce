"""Building blocks for the experiments' READMEs: Markdown tables made from a kept `mapnet compare` results.json
(schema mapnet.compare/1), so a README's table is what the raw file gives and a changed raw number fails the
manual's check (experiments/common/doc_tables.py).

A table is rows (a strategy of the comparison, under the label the README gives it) by columns (a `Column`: a
heading and how a cell is read from that strategy's aggregate). The columns most tables need:

    final("eval_loss@books")           final held-out loss on a set, mean ± half its 95% interval over seeds
    final("eval_accuracy", ".1%")      a share, printed as a percent
    paired("eval_loss")                strategy − uniform, paired by seed (the aggregate's paired_vs_uniform)
    at_step("eval_loss", 400)          the mean curve at one evaluation step
    steps_to_target()                  the step at which the mean curve reaches uniform's final loss
    seconds_per_step()                 the training step's wall time

    table(RESULTS, [("uniform", "uniform"), ("MAP-Net", "mapnet")], [Column("mixed", final("eval_loss")), ...])
    curve(RESULTS, "eval_loss", rows)  # strategy × evaluation step, the mean curve

Each experiment's tables are declared in its own module `experiments/common/tables_<experiment>.py` (a dict
`TABLES` of name → function of no argument), which doc_tables.py gathers.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from arms_table import pm

REPO = Path(__file__).resolve().parents[2]
SCHEMA = "mapnet.compare/1"

Cell = Callable[[dict, str], str]  # (the comparison's document, a strategy's name) -> the cell's text


def module_at(path: Path):
    """The Python file at `path` as a module: an experiment's own table script, whose folder's name (`recipe-cpu`)
    is no package name to import it by."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Column:
    heading: str
    cell: Cell


def signed(x: float, decimals: int = 3) -> str:
    """`+0.047`, `−0.073`: a signed difference as the pages print it (a Unicode minus); an exact zero unsigned."""
    if x == 0:
        return f"{0:.{decimals}f}"
    return f"{x:+.{decimals}f}".replace("-", "−")


def load(path: str | Path) -> dict:
    """A kept `compare` results file, refused when it is not one (a table must not be made from the wrong file)."""
    path = REPO / path
    doc = json.loads(path.read_text(encoding="utf-8"))
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {doc.get('schema')!r}, not {SCHEMA}")
    return doc


def strategy(doc: dict, name: str) -> dict:
    try:
        return doc["aggregate"]["strategies"][name]
    except KeyError:
        raise KeyError(f"strategy {name!r} is not in this comparison ({', '.join(doc['strategies'])})") from None


def final(key: str, fmt: str = ".3f") -> Cell:
    return lambda doc, name: pm(strategy(doc, name)["final"].get(key), fmt)


def paired(key: str, fmt: str = "+.3f") -> Cell:
    """strategy − uniform on `key`, paired by seed; uniform's own row reads `–`."""
    return lambda doc, name: pm(strategy(doc, name).get("paired_vs_uniform", {}).get(key), fmt)


def at_step(key: str, step: int, fmt: str = ".3f") -> Cell:
    def cell(doc: dict, name: str) -> str:
        a = strategy(doc, name)
        return pm(a["curve"][key][a["steps"].index(step)], fmt)

    return cell


def steps_to_target(unreached: str = "not reached") -> Cell:
    """The first evaluation step at which the strategy's mean curve reaches uniform's final mean loss."""

    def cell(doc: dict, name: str) -> str:
        reached = (strategy(doc, name).get("steps_to_target") or {}).get("mean_curve")
        return unreached if reached is None else f"{reached:,.0f}"

    return cell


def seconds_per_step(fmt: str = ".3f") -> Cell:
    return lambda doc, name: pm(strategy(doc, name).get("seconds_per_step"), fmt)


def rows_of(doc: dict, rows: Sequence[tuple[str, str]] | None) -> list[tuple[str, str]]:
    return [(name, name) for name in doc["strategies"]] if rows is None else list(rows)


def markdown(headings: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headings) + " |", "|" + "---|" * len(headings)]
    return "\n".join([*lines, *("| " + " | ".join(cells) + " |" for cells in body)])


def table(
    path: str | Path,
    rows: Sequence[tuple[str, str]] | None,
    columns: Sequence[Column],
    first: str = "strategy",
) -> str:
    """One row per (label, strategy), one column per `Column`; rows=None takes every strategy under its own name."""
    doc = load(path)
    body = [[label, *(c.cell(doc, name) for c in columns)] for label, name in rows_of(doc, rows)]
    return markdown([first, *(c.heading for c in columns)], body)


def curve(
    path: str | Path,
    key: str,
    rows: Sequence[tuple[str, str]] | None = None,
    steps: Sequence[int] | None = None,
    fmt: str = ".3f",
    first: str = "strategy",
) -> str:
    """The mean curve of `key` per strategy at each evaluation step (each step the comparison evaluated, or `steps`)."""
    doc = load(path)
    pairs = rows_of(doc, rows)
    steps = list(steps if steps is not None else strategy(doc, pairs[0][1])["steps"])
    body = []
    for label, name in pairs:
        a = strategy(doc, name)
        body.append([label, *(format(a["curve"][key][a["steps"].index(s)]["mean"], fmt) for s in steps)])
    return markdown([first, *(f"{s:,}" for s in steps)], body)
