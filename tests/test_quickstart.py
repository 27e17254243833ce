"""The main job: `mapnet quickstart` runs the whole chain and its held-out loss falls."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mapnet_cli import quickstart as qs
from mapnet_cli.cli import app

SMALL = ["--set", "synthetic.documents=400", "--set", "train.eval_every=20", "--set", "train.eval_sequences=32",
         "--set", "shard.valid_fraction=0.1", "--set", "optim.warmup_steps=5"]


@pytest.mark.slow
def test_quickstart_runs_the_chain_and_reuses_finished_stages(tmp_path):
    out = tmp_path / "qs"
    runner = CliRunner()
    res = runner.invoke(app, ["quickstart", "--out", str(out), "--steps", "60", *SMALL])
    assert res.exit_code == 0, res.output
    for stage in ("corpus", "shards"):
        assert (out / stage / "manifest.json").is_file()
    assert (out / "run" / "checkpoints" / "step-00000060" / "COMPLETE").is_file()
    evals = qs.eval_history(out / "run")
    assert [e["step"] for e in evals] == [0, 20, 40, 60]
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"] - 1.0  # it learns the synthetic language
    # The summary table shows the very numbers of the metrics file.
    assert f"{evals[0]['eval_loss']:.4f}" in res.stdout and f"{evals[-1]['eval_loss']:.4f}" in res.stdout
    # The tiny recipe is what it ran with.
    settings = (out / "run" / "settings.toml").read_text()
    assert 'preset = "tiny"' in settings and "max_seq_len = 128" in settings

    # A rerun reuses every finished stage and only summarises.
    mtime = (out / "shards" / "manifest.json").stat().st_mtime_ns
    res = runner.invoke(app, ["quickstart", "--out", str(out), "--steps", "60", *SMALL])
    assert res.exit_code == 0, res.output
    assert "reusing" in res.stderr and (out / "shards" / "manifest.json").stat().st_mtime_ns == mtime
    lines = (out / "run" / "metrics.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["kind"] == "eval" for line in lines) == 4  # nothing trained twice


def test_quickstart_print_settings_layers_the_recipe_under_flags():
    res = CliRunner().invoke(app, ["quickstart", "--print-settings", "--steps", "7", "--masking", "mapnet"])
    assert res.exit_code == 0, res.output
    assert "steps = 7" in res.stdout and 'strategy = "mapnet"' in res.stdout and "vocab_size = 4096" in res.stdout
