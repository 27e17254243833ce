"""The words around the code stay true of it: every `mapnet …` command line in the README, the manual (docs/) and
the experiments' READMEs names a command and options the CLI has; the README's headline is the one of
docs/_snippets/headline.md (its tables generated from the raw results: tests/test_tables.py); the README's test
command is the one .ci/run runs; every experiment folder is a page of the site and of the results index. (The CLI
and settings reference pages are generated from the code at build time, docs/_hooks/mapnet_docs.py, and
`mkdocs build --strict` in .ci/run checks every link.)"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import pytest
import typer
import typer._click as click  # typer's vendored click, which its commands belong to

from mapnet_cli.cli import app

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted(
    [
        REPO / "README.md",
        *(p for p in (REPO / "docs").rglob("*.md") if "_hooks" not in p.parts),
        *(REPO / "experiments").glob("*/README.md"),
    ]
)
EXPERIMENTS = sorted(p for p in (REPO / "experiments").iterdir() if p.is_dir() and p.name != "common")
SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")", ">", ">>", "<", "2>", "$("}


@functools.cache
def root_command():
    return typer.main.get_command(app)


# ---------------------------------------------------------------- finding the command lines
def code_lines(text: str) -> list[str]:
    """Shell lines of fenced code blocks (continuations joined) and inline code spans that start a command."""
    lines, block, fenced = [], [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            if fenced:
                joined = "\n".join(block).replace("\\\n", " ")
                lines += joined.split("\n")
            fenced, block = not fenced, []
            continue
        if fenced:
            block.append(line)
        else:
            lines += [span for span in re.findall(r"`([^`]+)`", line) if span.startswith(("mapnet ", "uv run mapnet "))]
    return lines


def mapnet_invocations(line: str) -> list[list[str]]:
    """The argument lists after each `mapnet` (or `-m mapnet_cli.cli`) that starts a command on the line."""
    try:
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;()<>")
        lexer.whitespace_split, lexer.commenters = True, "#"
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote in prose-like code: nothing to check
        return []
    found, command = [], []
    for tok in [*tokens, ";"]:
        if tok in SEPARATORS or set(tok) <= set("|&;()<>"):
            if command:
                found.append(command)
            command = []
            continue
        command.append(tok)
    out = []
    for cmd in found:
        for i, tok in enumerate(cmd):
            starts = tok == "mapnet" and (
                i == 0
                or cmd[i - 1] in ("run", "exec")
                or "=" in cmd[i - 1]
                or cmd[0] in ("srun", "nohup", "timeout", "time")
            )
            if starts or (tok == "mapnet_cli.cli" and i > 0 and cmd[i - 1] == "-m"):
                out.append(cmd[i + 1 :])
                break
    return out


def check(args: list[str]) -> str | None:
    """None when `mapnet ARGS` names a real command and only its options, else what is wrong."""
    cmd, path = root_command(), ["mapnet"]
    rest = list(args)
    while hasattr(cmd, "list_commands") and rest and not rest[0].startswith("-"):
        ctx = click.Context(cmd, info_name=path[-1])
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return f"`{' '.join(path)}` has no command {rest[0]!r}"
        cmd, path, rest = sub, [*path, rest.pop(0)], rest
    if hasattr(cmd, "list_commands"):  # a group named alone (`mapnet config`): nothing more to check
        return None
    known = {"--help"} | {o for p in cmd.params for o in [*p.opts, *p.secondary_opts] if o.startswith("-")}
    for tok in rest:
        if tok.startswith("-") and len(tok) > 1 and not re.fullmatch(r"-[0-9.e]+", tok):
            name = tok.split("=", 1)[0]
            if name not in known:
                return f"`{' '.join(path)}` has no option {name!r}"
    return None


def all_invocations():
    for page in PAGES:
        for line in code_lines(page.read_text(encoding="utf-8")):
            for args in mapnet_invocations(line):
                yield page.relative_to(REPO).as_posix(), line.strip(), args


# ---------------------------------------------------------------- the tests
def test_every_documented_command_line_names_real_commands_and_options():
    invocations = list(all_invocations())
    assert len(invocations) > 150  # the pages hold a few hundred; a parser that finds none would pass vacuously
    problems = [f"{page}: {problem}\n    {line}" for page, line, args in invocations if (problem := check(args))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "line, problem",
    [
        ("mapnet pretrain shards/ --out runs/x --no-such-flag 3", "no option '--no-such-flag'"),
        ("uv run mapnet pretrian shards/", "no command 'pretrian'"),
        ("mapnet config show --docs --bogus", "no option '--bogus'"),
        (
            "OMP_NUM_THREADS=1 mapnet blimp runs/x --data d --out o \\\n    --method nope --paradigm x",
            "no option '--paradigm'",
        ),
        ("cat essay.txt | mapnet inspect-masks runs/mapnet --json --jsn", "no option '--jsn'"),
        ("torchrun --nproc-per-node 8 -m mapnet_cli.cli pretrain shards/ --out r --gpu 8", "no option '--gpu'"),
    ],
)
def test_the_checker_finds_a_wrong_command_or_option(line, problem):
    """The check above can fail: each line here is wrong in one place, which it names."""
    page = f"```bash\n{line}\n```\n"
    found = [check(args) for code in code_lines(page) for args in mapnet_invocations(code)]
    assert found and problem in (found[0] or "")


def test_the_checker_accepts_options_per_subcommand_and_ignores_arguments_named_mapnet():
    page = (
        "```bash\nmapnet pretrain shards/ --out runs/m --masking mapnet --set optim.lr=1e-3  # --masking's value\n"
        "mapnet compare shards/ --out c --strategies uniform,mapnet --seeds 3 \\\n    --set "
        "masking.adaptive.every=50\n```\n"
        "Prose: `mapnet shard corpus --out shards --max-seq-len 512`.\n"
    )
    found = [check(args) for code in code_lines(page) for args in mapnet_invocations(code)]
    assert found == [None, None, None]
    # --seeds is compare's, not pretrain's: options resolve per subcommand
    assert "no option '--seeds'" in check(["pretrain", "shards/", "--out", "r", "--seeds", "3"])


def test_the_headline_tables_live_in_the_results_page_and_the_readme_has_the_answer_and_its_figure():
    """docs/_snippets/headline.md (its tables generated, tests/test_tables.py) is included by docs/results.md; the
    README carries the generated answer and the one figure instead, and links to the tables."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert '--8<-- "docs/_snippets/headline.md"' in (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    assert "<!-- table: headline-tiny -->" not in readme and "<!-- table: headline-mini -->" not in readme
    for block in ("headline-answer", "headline-figure", "quickstart-figures"):
        assert f"<!-- table: {block} -->" in readme
    assert "](docs/img/headline.png)" in readme and (REPO / "docs" / "img" / "headline.png").is_file()
    assert "](docs/results.md)" in readme


def test_readme_is_one_page_and_ci_runs_its_test_command():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 120
    first_screen = "\n".join(readme.splitlines()[:40])
    test_command = re.search(r"^(uv run pytest[^#\n]*?)\s+# the tests", first_screen, re.M)
    assert test_command and "uv run mapnet quickstart" in first_screen
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command.group(1).strip() in [line.strip() for line in ci]
    assert "uv run mkdocs build --strict" in [line.strip() for line in ci]


@pytest.mark.parametrize("folder", EXPERIMENTS, ids=lambda p: p.name)
def test_every_experiment_is_a_self_describing_page(folder):
    """experiments/<name>/README.md opens with its question, command, machine, time and outcome, and is in the
    site's navigation and the results index (docs/adding-an-experiment.md says how)."""
    readme = folder / "README.md"
    assert readme.is_file()
    head = readme.read_text(encoding="utf-8")[:4000]
    for row in ("Question", "Command", "Machine", "Time", "Outcome"):
        assert f"| **{row}** |" in head, f"{readme}: no {row} row"
    page = f"experiments/{folder.name}/README.md"
    assert page in (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert f"../{page}" in (REPO / "docs" / "results.md").read_text(encoding="utf-8")
