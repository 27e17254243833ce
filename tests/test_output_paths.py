"""No command writes over what it reads, or over what exists without --overwrite (mapnet_cli/output_paths.py).

Every command that writes is run, through `main` as the `mapnet` script runs it, with an output that is its
input, lies inside it, contains it, or is it through a link (with --overwrite where the command has it, the
case that used to destroy data), and with an output that already exists: exit code 2, one `error:` line naming
both paths, and not a byte changed — the input, and everything around it (no output, no staging folder:
the refusal comes before any work).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from trained_runs import SETTINGS

from mapnet_cli.artefacts import CORPUS, PLOT, PMI_VOCAB, QUICKSTART, RUN
from mapnet_cli.cli import main
from mapnet_cli.errors import MapnetError
from mapnet_cli.output_paths import check_output, overlap

TINY = [arg for s in SETTINGS for arg in ("--set", s)]


# ---------------------------------------------------------------- the check itself
def test_overlap_is_equality_inside_or_containing_after_links(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(data)
    assert overlap(data, [None, tmp_path / "other", data]) == (data, "is")
    assert overlap(data / "sub" / "x.json", [data]) == (data, "lies inside")
    assert overlap(tmp_path, [data / "sub"]) == (data / "sub", "contains")
    assert overlap(tmp_path / "link" / "sub", [data]) == (data, "lies inside")
    assert overlap(tmp_path / "data-2", [data]) is None  # a shared prefix of the name is not a shared folder
    assert overlap(tmp_path / "new" / "out", [data, None]) is None


def test_check_output_refuses_overlap_kind_and_an_existing_output_unless_asked(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (tmp_path / "link").symlink_to(data)
    with pytest.raises(MapnetError, match=rf"--out {tmp_path / 'link'} is the input {data} \(after following links"):
        check_output(tmp_path / "link", [data], kind=CORPUS, overwrite=True)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    with pytest.raises(MapnetError, match="is a file, not an output folder"):
        check_output(a_file, [data], kind=CORPUS, overwrite=True)
    with pytest.raises(MapnetError, match="is a folder, not a file"):
        check_output(data, [], kind=PLOT, overwrite=True)
    with pytest.raises(MapnetError, match=r"already exists \(pass --overwrite to replace it\)"):
        check_output(a_file, [], kind=PLOT)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(MapnetError, match="is a link \\(to .*gone\\): mapnet replaces no link"):
        check_output(tmp_path / "dangling", [], kind=CORPUS)
    with pytest.raises(
        MapnetError, match="notes.txt is not a plot made by mapnet \\(it is a file mapnet did not write"
    ):
        check_output(a_file, [data], kind=PLOT, overwrite=True)
    check_output(data, [tmp_path / "elsewhere"], kind=RUN, reuse=True)  # a run continued in place
    check_output(data / "pmi.tsv", [data / "manifest.json"], kind=PMI_VOCAB)  # beside the files read is fine
    check_output(tmp_path / "link", [], kind=RUN, reuse=True)  # a folder continued through a link: followed
    with pytest.raises(MapnetError, match="is a link"):
        check_output(tmp_path / "link", [], kind=QUICKSTART, reuse=True, overwrite=True)  # never replaced
    (data / "empty").mkdir()
    check_output(data / "empty", [], kind=CORPUS, overwrite=True)  # an empty folder: nothing to lose
    assert a_file.read_text() == "keep me"


# ---------------------------------------------------------------- every command that writes
@dataclass(frozen=True)
class Command:
    main_input: str  # key into the world: the input the cases move around
    argv: Callable[[Path, Path, dict], list]  # (that input, --out, world) -> the command line
    suffix: str = ""  # of a file output ("" for a folder)
    replaces: bool = True  # an existing --out is replaced (with --overwrite) rather than continued
    overwrite_flag: bool = True  # the command has --overwrite


COMMANDS = {
    "preprocess": Command(
        "text", lambda x, out, w: ["preprocess", x, "--out", out, "--vocab-size", "256", "--workers", "1"]
    ),
    "shard": Command("prep", lambda x, out, w: ["shard", x, "--out", out]),
    "pmi-vocab": Command("prep", lambda x, out, w: ["pmi-vocab", x, "--out", out, "--no-progress"], suffix=".tsv"),
    "pretrain": Command(
        "shards",
        lambda x, out, w: ["pretrain", x, "--out", out, "--preset", "tiny", *TINY],
        replaces=False,
        overwrite_flag=False,
    ),
    "export": Command("run", lambda x, out, w: ["export", x, "--out", out]),
    "finetune-glue": Command(
        "run",
        lambda x, out, w: [
            "finetune-glue",
            "--task",
            "sst2",
            "--checkpoint",
            x,
            "--data",
            w["glue"],
            "--out",
            out,
            "--quick",
            "--seeds",
            "1",
            "--epochs",
            "1",
            "--set",
            "logging.progress=false",
        ],
        replaces=False,
        overwrite_flag=False,
    ),
    "probe": Command(
        "run", lambda x, out, w: ["probe", x, "--data", w["glue"], "--out", out, "--no-control"], suffix=".json"
    ),
    "blimp": Command(
        "run",
        lambda x, out, w: [
            "blimp",
            x,
            "--data",
            w["blimp"],
            "--out",
            out,
            "--no-progress",
            "--no-random",
            "--no-unigram",
        ],
        suffix=".json",
    ),
    "compare": Command(
        "shards",
        lambda x, out, w: [
            "compare",
            x,
            "--out",
            out,
            "--strategies",
            "uniform",
            "--seeds",
            "1",
            "--preset",
            "tiny",
            *TINY,
        ],
        replaces=False,
        overwrite_flag=False,
    ),
    "plot": Command("run", lambda x, out, w: ["plot", x, "--out", out], suffix=".png"),
    # quickstart's only input is its --config; --overwrite deletes --out before it starts
    "quickstart": Command(
        "config", lambda x, out, w: ["quickstart", "--config", x, "--out", out, "--steps", "2"], replaces=False
    ),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory, trained_runs, synthetic_shards, shared_data) -> dict[str, Path]:
    """Real inputs of every kind; the tests copy the one they aim an output at, and read the rest."""
    root = tmp_path_factory.mktemp("outputs-world")
    (root / "text").mkdir()
    (root / "text" / "a.txt").write_text("The cat sat on the mat. It was warm.\nA dog barked.\n")
    rows = "".join(f"w{5 + i % 9} w{6 + i % 7}\t{i % 2}\n" for i in range(16))
    (root / "glue" / "SST-2").mkdir(parents=True)
    for split in ("train", "dev"):
        (root / "glue" / "SST-2" / f"{split}.tsv").write_text("sentence\tlabel\n" + rows)
    (root / "blimp").mkdir()
    lines = (shared_data / "blimp" / "adjunct_island.jsonl").read_text(encoding="utf-8").splitlines()[:4]
    (root / "blimp" / "adjunct_island.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "config.toml").write_text("[synthetic]\ndocuments = 40\n")
    return {
        "text": root / "text",
        "glue": root / "glue",
        "blimp": root / "blimp",
        "config": root / "config.toml",
        "prep": synthetic_shards.parent / "prep",
        "shards": trained_runs["shards"],
        "run": trained_runs["uniform"],
    }


def snapshot(*roots: Path) -> dict[str, str]:
    """Every file, folder and link under `roots` (links not followed): sha256 of files, targets of links."""
    seen = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                path = Path(folder) / name
                if path.is_symlink():
                    seen[str(path)] = f"link to {os.readlink(path)}"
                elif path.is_file():
                    seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
                else:
                    seen[str(path)] = "folder"
    return seen


def mapnet(argv: list, capsys, monkeypatch) -> tuple[int, list[str]]:
    """Run `mapnet ARGV` as the console script does (cli.main); its exit code and stderr lines."""
    monkeypatch.setattr(sys, "argv", ["mapnet", *map(str, argv)])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as done:
        main()
    return done.value.code, capsys.readouterr().err.strip().splitlines()


def refused(argv: list, capsys, monkeypatch, roots: list[Path], *named: str) -> str:
    """`mapnet ARGV` exits 2 with one error line naming `named`, and nothing under `roots` changed."""
    before = snapshot(*roots)
    code, lines = mapnet(argv, capsys, monkeypatch)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, lines)
    assert all(part in lines[0] for part in named), lines[0]
    assert snapshot(*roots) == before
    return lines[0]


def aimed_at(case: str, x: Path, suffix: str, tmp_path: Path) -> tuple[Path, str]:
    """The --out of `case` against the input copy x (in tmp/outer/), and the input the error must name."""
    if case == "is":
        return x, str(x)
    if case == "inside":
        return x / f"out{suffix}", str(x)
    if case == "contains":
        return x.parent, str(x)
    link = tmp_path / "link"
    link.symlink_to(x.parent)  # the same input, reached through a link
    return link / x.name, "after following links"


@pytest.mark.parametrize("case", ["is", "inside", "contains", "link"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_output_that_overlaps_an_input_is_refused_before_any_work(
    world, tmp_path, capsys, monkeypatch, command, case
):
    spec = COMMANDS[command]
    src = world[spec.main_input]
    x = tmp_path / "outer" / src.name
    x.parent.mkdir()
    (shutil.copytree if src.is_dir() else shutil.copy2)(src, x)
    out, named = aimed_at(case, x, spec.suffix, tmp_path)
    if command == "pmi-vocab" and case == "inside":  # CORPUS/pmi.tsv is where it belongs; a part file it reads is not
        out = next((x / "sentences").iterdir())
    argv = spec.argv(x, out, world) + (["--overwrite"] if spec.overwrite_flag else [])
    monkeypatch.chdir(tmp_path)  # quickstart's lock and anything stray would land here, inside the snapshot
    refused(
        argv,
        capsys,
        monkeypatch,
        [tmp_path, *{world[k] for k in ("glue", "blimp", "config")}],
        str(out),
        named,
        " the input ",
        "choose an output outside its inputs",
    )


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_existing_output_is_not_replaced_without_overwrite(world, tmp_path, capsys, monkeypatch, command):
    """A command that replaces its output needs --overwrite; one that continues its output (a run, a sweep)
    still never replaces a file where its folder goes (quickstart not even with --overwrite)."""
    spec = COMMANDS[command]
    if spec.replaces:
        out = tmp_path / f"existing{spec.suffix}"
        if spec.suffix:
            out.write_text("keep me")
        else:
            out.mkdir()
            (out / "keep").write_text("keep me")
        argv, why = spec.argv(world[spec.main_input], out, world), "already exists (pass --overwrite to replace it)"
    else:
        out = tmp_path / "notes.txt"
        out.write_text("keep me")
        argv = spec.argv(world[spec.main_input], out, world) + (["--overwrite"] if spec.overwrite_flag else [])
        why = "is a file, not an output folder"
    monkeypatch.chdir(tmp_path)
    refused(argv, capsys, monkeypatch, [tmp_path, world[spec.main_input]], str(out), why)


def test_probe_refuses_a_token_cache_that_would_hold_its_input(world, tmp_path, capsys, monkeypatch):
    """probe also writes PARENT/cache beside its --out: that path is checked as well."""
    run = tmp_path / "cache" / "run"
    shutil.copytree(world["run"], run)
    refused(
        ["probe", run, "--data", world["glue"], "--out", tmp_path / "probe.json", "--no-control"],
        capsys,
        monkeypatch,
        [tmp_path],
        f"the token cache beside --out {tmp_path / 'cache'} contains the input {run}",
    )
