"""mapnet recognises what it wrote (mapnet_cli/artefacts.py): every kind by its marker, with nothing foreign in it.

The outputs here are made by the real commands, so a writer that starts writing a new file fails here first:
its output would count as holding something mapnet did not write, and `--overwrite` would refuse it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mapnet_cli import artefacts
from mapnet_cli.artefacts import foreign_entries, kind_of
from mapnet_cli.cli import app


@pytest.fixture(scope="module")
def made(tmp_path_factory, trained_runs, synthetic_shards) -> dict[str, Path]:
    """One output of every kind, each written by its command."""
    root = tmp_path_factory.mktemp("made")
    run, corpus = trained_runs["uniform"], synthetic_shards.parent / "prep"
    runner = CliRunner()
    for argv in (
        ["export", str(run), "--out", str(root / "hf")],
        ["pmi-vocab", str(corpus), "--out", str(root / "pmi.tsv"), "--no-progress", "--size", "20"],
        *(["plot", str(run), "--out", str(root / f"curves.{fmt}")] for fmt in ("png", "pdf", "svg", "jpg")),
    ):
        res = runner.invoke(app, argv)
        assert res.exit_code == 0, (argv, res.output, res.exception)
    quickstart = root / "quickstart"  # the layout quickstart leaves: its stages and nothing else
    for name, src in (
        ("corpus", corpus),
        ("shards", synthetic_shards),
        ("run", run),
        ("run-mapnet", trained_runs["mapnet"]),
    ):
        shutil.copytree(src, quickstart / name)
    return {
        "corpus": corpus,
        "shards": synthetic_shards,
        "run": run,
        "hf": root / "hf",
        "pmi": root / "pmi.tsv",
        "quickstart": quickstart,
        **{fmt: root / f"curves.{fmt}" for fmt in ("png", "pdf", "svg", "jpg")},
    }


@pytest.mark.parametrize(
    "name,kind",
    [
        ("corpus", artefacts.CORPUS),
        ("shards", artefacts.SHARDS),
        ("run", artefacts.RUN),
        ("hf", artefacts.EXPORT),
        ("quickstart", artefacts.QUICKSTART),
        ("pmi", artefacts.PMI_VOCAB),
        ("png", artefacts.PLOT),
        ("pdf", artefacts.PLOT),
        ("svg", artefacts.PLOT),
        ("jpg", artefacts.PLOT),
    ],
)
def test_every_output_is_recognised_and_holds_only_its_own_entries(made, name, kind):
    assert kind_of(made[name]) is kind
    if kind.folder:
        assert foreign_entries(made[name], kind) == []


def test_a_runs_checkpoints_are_recognised_as_what_mapnet_prunes(made):
    checkpoints = made["run"] / "checkpoints"
    assert kind_of(checkpoints) is artefacts.CHECKPOINTS
    step = sorted(checkpoints.iterdir())[-1]
    assert kind_of(step) is artefacts.CHECKPOINT
    assert artefacts.enclosing(step / "ft") == (step, artefacts.CHECKPOINT, "ft")


def test_what_a_user_added_is_named_and_the_users_own_folders_are_nobodys(made, tmp_path):
    hf = shutil.copytree(made["hf"], tmp_path / "hf")
    (hf / "README.md").write_text("my model card")
    assert foreign_entries(hf, artefacts.EXPORT) == ["README.md"]
    corpus = shutil.copytree(made["corpus"], tmp_path / "corpus")
    (corpus / "sentences" / "extra.txt").write_text("mine")
    assert foreign_entries(corpus, artefacts.CORPUS) == ["sentences/extra.txt"]
    q = shutil.copytree(made["quickstart"], tmp_path / "q")
    (q / "run" / "notes.txt").write_text("mine")
    assert foreign_entries(q, artefacts.QUICKSTART) == ["run/notes.txt"]
    (q / "thesis.tex").write_text("mine")
    assert kind_of(q) is None  # a quickstart folder holds nothing but its stages
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "corpus").mkdir()
    assert kind_of(tmp_path / "user") is None and kind_of(tmp_path / "user" / "corpus") is None
    (tmp_path / "image.png").write_bytes(made["png"].read_bytes().replace(artefacts.PLOT_MARK.encode(), b"x" * 13))
    assert kind_of(tmp_path / "image.png") is None  # the same image without mapnet's mark


@pytest.mark.parametrize("out", ["pmi", "png"])
def test_overwrite_replaces_a_file_mapnet_wrote(made, tmp_path, trained_runs, synthetic_shards, out):
    target = shutil.copy2(made[out], tmp_path / made[out].name)
    argv = (
        ["pmi-vocab", str(synthetic_shards.parent / "prep"), "--out", str(target), "--no-progress", "--size", "10"]
        if out == "pmi"
        else ["plot", str(trained_runs["uniform"]), "--out", str(target)]
    )
    before = Path(target).read_bytes()
    res = CliRunner().invoke(app, [*argv, "--overwrite"])
    assert res.exit_code == 0, (res.output, res.exception)
    assert kind_of(Path(target)) is (artefacts.PLOT if out == "png" else artefacts.PMI_VOCAB)
    assert out == "png" or Path(target).read_bytes() != before  # a smaller vocabulary: really rewritten
