"""The CLI shell: every command is listed and real, and the light commands start without torch."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint

COMMANDS = (
    "quickstart",
    "preprocess",
    "shard",
    "pretrain",
    "export",
    "inspect-masks",
    "finetune-glue",
    "probe",
    "variance",
    "compare",
    "config",
)


def test_help_lists_every_command():
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0
    for name in COMMANDS:
        assert name in res.stdout, name


def test_help_and_data_commands_do_not_import_torch():
    # Startup time matters for a CLI: torch costs seconds, and preprocess/shard (even with --init-from) never need it.
    code = (
        "import sys; from mapnet_cli import cli; "
        "from mapnet_cli.data import preprocess, shard_writer; "
        "from mapnet_cli.train import init_from, tracking; "  # shard --init-from, --print-settings
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_command_options_are_annotated_at_import_not_as_strings():
    """Typer reads every option's annotation each time it builds the CLI (each `mapnet` start, each CliRunner call):
    a string annotation (`from __future__ import annotations` in a command module) costs an eval per option per build,
    which made building the CLI several times slower (mapnet_cli/commands/__init__.py)."""
    import inspect

    import typer

    def callbacks(typer_app: typer.Typer):
        for command in typer_app.registered_commands:
            yield command.callback
        for group in typer_app.registered_groups:
            yield from callbacks(group.typer_instance)

    found = list(callbacks(app))
    assert len(found) >= len(COMMANDS)
    for callback in found:
        strings = [name for name, hint in inspect.get_annotations(callback).items() if isinstance(hint, str)]
        assert not strings, f"{callback.__module__}.{callback.__name__}: {strings} are strings"


def test_the_build_benchmark_times_both_annotation_forms_of_the_real_commands():
    """benchmarks/bench_cli_build.py's string variant is every command recompiled from its own source, and both
    variants build a CLI with the same commands."""
    import re

    import typer.main
    from scripts import run_script

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        import bench_cli_build
    finally:
        sys.path.pop(0)
    strings = bench_cli_build.string_annotated(app)
    assert sorted(typer.main.get_command(strings).commands) == sorted(typer.main.get_command(app).commands)
    out = run_script(Path(bench_cli_build.__file__), "--rounds", "1", "--builds", "1")
    assert re.search(r"annotations as objects: [\d.]+ ms per build", out)
    assert re.search(r"annotations as strings: [\d.]+ ms per build", out)
    assert re.search(r"strings / objects: [\d.]+x", out)


def test_unknown_command_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "mapnet_cli.cli", "pretrian"], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr


# ---------------------------------------------------------------- bad inputs: one line, never a traceback
SMALL_RUN = [
    "--preset",
    "tiny",
    "--steps",
    "2",
    "--set",
    "model.max_position=32",
    "--set",
    "shard.max_seq_len=32",
    "--set",
    "train.batch_size=8",
    "--set",
    "train.eval_sequences=8",
    "--set",
    "optim.warmup.steps=1",
    "--set",
    "logging.progress=false",
]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, Path]:
    """(shards, a 2-step tiny run, an SST-2 folder in the official layout)."""
    root = tmp_path_factory.mktemp("reliability")
    shards = write_tiny_shards(root / "shards")
    res = CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(root / "run"), *SMALL_RUN])
    assert res.exit_code == 0, res.output
    rows = "".join(f"w{5 + i % 9} w{6 + i % 7} w{7 + i % 5}\t{i % 2}\n" for i in range(16))
    for split in ("train", "dev"):
        (root / "glue" / "SST-2").mkdir(parents=True, exist_ok=True)
        (root / "glue" / "SST-2" / f"{split}.tsv").write_text("sentence\tlabel\n" + rows)
    return shards, root / "run", root / "glue"


def one_line_error(res, *parts: str) -> str:
    """The command failed with a MapnetError (which `main` prints as one red line), naming `parts`."""
    assert isinstance(res.exception, MapnetError), (res.exception, res.output)
    text = str(res.exception)
    assert "\n" not in text and all(p in text for p in parts), text
    return text


def damage(weights: Path, how: str) -> None:
    data = weights.read_bytes()
    if how == "flipped":  # one bit in the last tensor's data: safetensors alone would load it
        weights.write_bytes(data[:-3] + bytes([data[-3] ^ 1]) + data[-2:])
    else:  # and a manifest that matches it: past the hashes, the loaders must refuse it themselves
        weights.write_bytes(data[: len(data) // 2] if how == "truncated" else b"\x00garbage" * 64)
        checkpoint.write_manifest(weights.parent)


COMMANDS_ON_A_CHECKPOINT = {
    "export": lambda run, shards, glue, tmp: ["export", str(run), "--out", str(tmp / "hf")],
    "resume": lambda run, shards, glue, tmp: ["pretrain", str(shards), "--out", str(run), "--resume", "--steps", "3"],
    "finetune-glue": lambda run, shards, glue, tmp: [
        "finetune-glue",
        "--task",
        "sst2",
        "--checkpoint",
        str(run),
        "--data",
        str(glue),
        "--out",
        str(tmp / "glue-out"),
        "--quick",
        "--seeds",
        "1",
        "--epochs",
        "1",
        "--set",
        "logging.progress=false",
    ],
    "inspect-masks": lambda run, shards, glue, tmp: ["inspect-masks", str(run), "--text", "w5 w6 w7"],
    "variance": lambda run, shards, glue, tmp: ["variance", str(run), "--sentences", "2", "--masks", "2"],
}


@pytest.mark.parametrize("how", ["flipped", "truncated", "garbage"])
@pytest.mark.parametrize("command", list(COMMANDS_ON_A_CHECKPOINT))
def test_a_damaged_checkpoint_is_a_one_line_error_in_every_command(trained, tmp_path, command, how):
    shards, run, glue = trained
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    damage(checkpoint.latest_checkpoint(copy) / "model.safetensors", how)
    res = CliRunner().invoke(app, COMMANDS_ON_A_CHECKPOINT[command](copy, shards, glue, tmp_path))
    one_line_error(res, "model.safetensors", "sha256" if how == "flipped" else "")
    assert not (tmp_path / "hf").exists() and not (tmp_path / "glue-out" / "results.json").exists()


def test_output_paths_that_cannot_be_folders_are_one_line_errors(trained, tmp_path):
    shards, run, glue = trained
    runner = CliRunner()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    for out in (a_file, a_file / "sub"):  # the output is a file; its parent is a file
        one_line_error(
            runner.invoke(app, ["export", str(run), "--out", str(out), "--overwrite"]), "notes.txt", "is a file"
        )
        one_line_error(
            runner.invoke(app, ["pretrain", str(shards), "--out", str(out), *SMALL_RUN]), "notes.txt", "is a file"
        )
        one_line_error(
            runner.invoke(
                app,
                [
                    "finetune-glue",
                    "--task",
                    "sst2",
                    "--checkpoint",
                    str(run),
                    "--data",
                    str(glue),
                    "--out",
                    str(out),
                    "--quick",
                    "--seeds",
                    "1",
                    "--epochs",
                    "1",
                ],
            ),
            "notes.txt",
            "is a file",
        )
    assert a_file.read_text() == "keep me"  # --overwrite replaces output folders, never a file
