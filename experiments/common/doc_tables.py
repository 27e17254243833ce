"""Every table of figures in the manual, made from the raw results kept under experiments/.

    uv run python experiments/common/doc_tables.py --write     # rewrite the tables in place
    uv run python experiments/common/doc_tables.py --write experiments/x/README.md   # only this page's
    uv run python experiments/common/doc_tables.py --check     # exit 1, naming each table that differs

A page holds a generated table between two marker comments; everything outside them is hand-written:

    <!-- table: headline-tiny -->
    | arm | ... |
    <!-- /table -->

NAME is a key of TABLES below, a function that reads raw files under experiments/ and returns the Markdown.
To add a table: write its function (beside the experiment's other table code in experiments/common/), add it
to TABLES (or to the `TABLES` of the experiment's own `tables_<experiment>.py`, most built from compare_tables.py),
put the two markers where it goes and run --write. A table that cannot be traced to kept raw data is not generated:
it carries `<!-- not generated: why -->` on the line above it instead (tests/test_tables.py holds every table of
README.md, docs/results.md and docs/performance.md to one of the two). A block may hold
prose instead of a table: the README's answer and quickstart figures are sentences generated the same way, so a
changed raw figure changes them (and fails the check until written).
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from functools import partial
from itertools import zip_longest
from pathlib import Path

import headline_figure
import headline_tables
import hour_table
import levers_costs
import levers_table
import masking_tables
import performance_tables
import pooling_table
import quickstart_table
import shape_choice
import syntax_tables
import wall_tables

REPO = Path(__file__).resolve().parents[2]

TABLES: dict[str, Callable[[], str]] = {
    "headline-tiny": headline_tables.tiny,
    "headline-mini": headline_tables.mini,
    "headline-answer": headline_figure.answer,
    "headline-figure": headline_figure.caption,
    "quickstart-figures": quickstart_table.figures,
    "gpu-throughput": performance_tables.gpu_throughput,
    "step-profile": performance_tables.step_profile,
    "prefetch": performance_tables.prefetch,
    "cpu-ceiling": performance_tables.cpu_ceiling,
    "arm-step-costs": performance_tables.arm_costs_all,
    "lite-step-costs": performance_tables.arm_costs_lite,
    "hour-levers": levers_table.kept,
    "hour-levers-per-seed": partial(levers_table.kept_per_seed, "series-3"),
    "hour-levers-series-4-per-seed": partial(levers_table.kept_per_seed, "series-4"),
    "hour-levers-costs": levers_costs.table,
    "hour-levers-cpu-transfer": levers_costs.transfer,
    "pooling-default": pooling_table.table,
    "hour-shape-choice": shape_choice.kept,
    "hour-recipe": hour_table.kept,
    "hour-recipe-amd": partial(hour_table.kept, hour_table.RAW_AMD),
    "hour-masking-costs": masking_tables.costs,
    "hour-masking-precision": partial(masking_tables.costs, masking_tables.RAW / "precision-costs.json"),
    "hour-masking-runs": masking_tables.runs,
    "hour-masking-scored": masking_tables.scored,
    "hour-syntax-costs": syntax_tables.costs,
    "hour-syntax-runs": syntax_tables.runs,
    "hour-syntax-decision": syntax_tables.decision,
    "hour-syntax-report": syntax_tables.report,
    "hour-wall-kernel": wall_tables.kernel,
    "hour-wall-runs": wall_tables.runs,
    "hour-wall-blimp": wall_tables.blimp,
    "hour-wall-answer": wall_tables.answer,
    "hour-modelled": wall_tables.modelled,
}


def experiments_tables() -> dict[str, Callable[[], str]]:
    """The tables each experiment declares in its own module, `tables_<experiment>.py` beside this file (a dict
    `TABLES`), so an experiment's README tables live with one another and not in this list."""
    found: dict[str, Callable[[], str]] = {}
    for path in sorted(Path(__file__).parent.glob("tables_*.py")):
        module = importlib.import_module(path.stem)
        clash = (set(found) | set(TABLES)) & set(module.TABLES)
        if clash:
            raise SystemExit(f"{path.name}: table names already taken: {', '.join(sorted(clash))}")
        found.update(module.TABLES)
    return found


TABLES.update(experiments_tables())

BLOCK = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>(?:(?!<!-- /table -->).)*)(<!-- /table -->)", re.S)


def pages() -> list[Path]:
    """Every page a table may live in: the README, the manual and the experiments' READMEs."""
    docs = (p for p in (REPO / "docs").rglob("*.md") if "_hooks" not in p.parts)
    return sorted({REPO / "README.md", *docs, *(REPO / "experiments").glob("*/README.md")})


def render(text: str, where: str, made: dict[str, str]) -> str:
    """`text` with each marked table replaced by its function's output (computed once per name, into `made`)."""

    def one(m: re.Match) -> str:
        name = m["name"]
        if name not in TABLES:
            raise SystemExit(f"{where}: <!-- table: {name} --> names no table of experiments/common/doc_tables.py")
        if name not in made:
            made[name] = TABLES[name]().strip()
        return m.group(1) + made[name] + "\n" + m.group(4)

    return BLOCK.sub(one, text)


def generate() -> dict[Path, tuple[str, str]]:
    """{page: (its text now, its text with every table regenerated)} for every page that holds a table."""
    made: dict[str, str] = {}
    out = {}
    for page in pages():
        now = page.read_text(encoding="utf-8")
        if "<!-- table: " in now:
            out[page] = (now, render(now, page.relative_to(REPO).as_posix(), made))
    unused = set(TABLES) - set(made)
    if unused:
        raise SystemExit(
            f"tables no page marks: {', '.join(sorted(unused))} (add the markers, or drop them from TABLES)"
        )
    return out


def stale() -> list[str]:
    """The pages whose tables differ from what the raw data gives, each with its first differing line."""
    found = []
    for page, (now, want) in generate().items():
        if now != want:
            pairs = zip_longest(now.splitlines(), want.splitlines(), fillvalue="(the end of the page)")
            first = next(((a, b) for a, b in pairs if a != b), ("(its line endings)", "(other line endings)"))
            found.append(f"{page.relative_to(REPO)}: committed {first[0]!r}\n    generated {first[1]!r}")
    return found


def write(only: list[str] | None = None) -> list[Path]:
    """Rewrite the pages whose tables differ (or only the pages named, relative to the repository)."""
    from mapnet_cli.atomic import write_text  # a page is replaced whole or not at all

    made = generate()
    unknown = sorted(set(only or ()) - {page.relative_to(REPO).as_posix() for page in made})
    if unknown:
        raise SystemExit(f"no generated table on {', '.join(unknown)} (a page relative to the repository root)")
    changed = []
    for page, (now, want) in made.items():
        if only is not None and page.relative_to(REPO).as_posix() not in only:
            continue
        if now != want:
            write_text(page, want)
            changed.append(page)
    return changed


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        for page in write(sys.argv[2:] or None):
            print(f"wrote {page.relative_to(REPO)}")
    elif sys.argv[1:] == ["--check"]:
        problems = stale()
        print("\n".join(problems) or "every table is what the raw data gives")
        sys.exit(1 if problems else 0)
    else:
        sys.exit(__doc__)
