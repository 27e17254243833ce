"""The CLI shell: every command is listed and real, and the light commands start without torch."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

from mapnet_cli.cli import app

COMMANDS = ("quickstart", "preprocess", "shard", "pretrain", "export", "inspect-masks", "finetune-glue", "variance",
            "compare", "config")


def test_help_lists_every_command():
    res = CliRunner().invoke(app, ["--help"])
    assert res.exit_code == 0
    for name in COMMANDS:
        assert name in res.stdout, name


def test_help_and_data_commands_do_not_import_torch():
    # Startup time matters for a CLI: torch costs seconds, and preprocess/shard never need it.
    code = ("import sys; from mapnet_cli import cli; "
            "from mapnet_cli.data import preprocess, shard_writer; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_command_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "mapnet_cli.cli", "pretrian"], capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
