"""The main job: `mapnet quickstart` runs the whole chain and its held-out loss falls."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from mapnet_cli import quickstart as qs
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError

SMALL = [
    "--set",
    "synthetic.documents=400",
    "--set",
    "train.eval_every=20",
    "--set",
    "train.eval_sequences=32",
    "--set",
    "shard.valid_fraction=0.1",
    "--set",
    "optim.warmup.steps=5",
]


@pytest.mark.slow
def test_quickstart_runs_the_chain_and_reuses_finished_stages(tmp_path):
    out = tmp_path / "qs"
    runner = CliRunner()
    warmup = ["--set", "train.short_seq.steps=30"]  # the sequence-length warm-up ends halfway, as in the recipe
    res = runner.invoke(app, ["quickstart", "--out", str(out), "--steps", "60", *SMALL, *warmup])
    assert res.exit_code == 0, res.output
    # Each phase named where it starts and ends; an evaluation during the warm-up says why it reads high.
    err = res.stderr.splitlines()
    assert "phase: learning-rate warm-up to 0.004, until step 5" in err
    assert "phase: sequence-length warm-up: 16-token pieces (8 a sequence), until step 30; then whole sequences" in err
    assert "phase: learning-rate warm-up over at step 5 (peak 0.004)" in err
    over = "phase: sequence-length warm-up over at step 31: whole sequences from here"
    assert any(line.startswith(over) for line in err)
    evals_shown = {line.split(":")[0]: line for line in err if line.startswith("eval @ ")}
    assert "[sequence-length warm-up: trained on 16-token pieces only" in evals_shown["eval @ 20"]
    assert "[sequence-length" not in evals_shown["eval @ 40"] and "[sequence-length" not in evals_shown["eval @ 0"]
    table = {line.split("│")[1].strip(): line for line in res.stdout.splitlines() if line.count("│") >= 5}
    assert "warm-up: 16-token pieces" in table["20"] and "whole sequences" in table["40"]
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
    res = runner.invoke(app, ["quickstart", "--out", str(out), "--steps", "60", *SMALL, *warmup])
    assert res.exit_code == 0, res.output
    assert "reusing" in res.stderr and (out / "shards" / "manifest.json").stat().st_mtime_ns == mtime
    lines = (out / "run" / "metrics.jsonl").read_text().splitlines()
    assert sum(json.loads(line)["kind"] == "eval" for line in lines) == 4  # nothing trained twice


def test_quickstart_print_settings_layers_the_recipe_under_flags():
    res = CliRunner().invoke(app, ["quickstart", "--print-settings", "--steps", "7", "--masking", "mapnet"])
    assert res.exit_code == 0, res.output
    assert "steps = 7" in res.stdout and 'strategy = "mapnet"' in res.stdout and "vocab_size = 4096" in res.stdout


# ---------------------------------------------------------------- reuse only what answers the question asked
def _fake_stage(folder, settings) -> None:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")
    (folder / "settings.toml").write_text(settings.to_toml())


def test_a_stage_made_with_other_settings_is_refused_not_reused(tmp_path):
    stages = qs.Stages.under(tmp_path)
    made = qs.resolve_settings({}, ["synthetic.documents=400"])
    _fake_stage(stages.corpus, made)
    _fake_stage(stages.shards, made)
    with pytest.raises(
        MapnetError, match=r"corpus was made with other settings \(synthetic.documents = 400, asked 500\)"
    ):
        qs.prepare_data(stages, qs.resolve_settings({}, ["synthetic.documents=500"]), print)
    with pytest.raises(MapnetError, match=r"shards was made with other settings \(shard.max_seq_len = 128, asked 64"):
        qs.prepare_data(
            stages,
            qs.resolve_settings({}, ["synthetic.documents=400", "shard.max_seq_len=64", "model.max_position=64"]),
            print,
        )
    logged = []
    # Worker counts, verification and the masking strategy do not change a corpus or its shards.
    qs.prepare_data(
        stages,
        qs.resolve_settings(
            {"masking": {"strategy": "mapnet"}},
            ["synthetic.documents=400", "preprocess.workers=3", "shard.workers=2", "shard.verify=size"],
        ),
        logged.append,
    )
    assert logged == [f"reusing {stages.corpus}", f"reusing {stages.shards}"]


def test_each_strategy_trains_in_its_own_run_folder_and_a_changed_run_is_refused(tmp_path):
    from mapnet_cli.model import checkpoint
    from mapnet_cli.model.bert import BertConfig, BertForMLM

    assert qs.Stages.under(tmp_path).run == tmp_path / "run"
    assert qs.Stages.under(tmp_path, "mapnet").run == tmp_path / "run-mapnet"
    stages = qs.Stages.under(tmp_path)
    assert qs.run_stage(stages, qs.resolve_settings({}, [])) == "fresh"
    made = qs.resolve_settings({}, ["train.steps=20"])
    (tmp_path / "tok.json").write_text("{}")
    cfg = BertConfig(vocab_size=40, layers=1, hidden=16, heads=2, intermediate=32, max_position=16)
    checkpoint.save_checkpoint(
        stages.run, 20, {"": BertForMLM(cfg)}, {}, cfg, made.to_toml(), tmp_path / "tok.json", "x"
    )
    assert qs.run_stage(stages, made) == "done"
    assert qs.run_stage(stages, qs.resolve_settings({}, ["train.steps=40"])) == "resume"  # train longer
    with pytest.raises(MapnetError, match=r"run was made with other settings \(train.seed = 0, asked 1\)"):
        qs.run_stage(stages, qs.resolve_settings({"train": {"seed": 1}}, ["train.steps=20"]))


@pytest.mark.slow
def test_quickstart_mapnet_after_uniform_trains_mapnet(tmp_path):
    out, runner = tmp_path / "qs", CliRunner()
    small = [
        *SMALL,
        "--set",
        "synthetic.documents=200",
        "--set",
        "preprocess.workers=1",
        "--set",
        "shard.workers=1",
        "--set",
        "train.eval_sequences=8",
    ]
    assert runner.invoke(app, ["quickstart", "--out", str(out), "--steps", "2", *small]).exit_code == 0
    res = runner.invoke(app, ["quickstart", "--out", str(out), "--steps", "2", "--masking", "mapnet", *small])
    assert res.exit_code == 0, res.output
    assert "mapnet masking" in res.stdout and "reusing the finished run" not in res.stderr
    assert 'strategy = "mapnet"' in (out / "run-mapnet" / "settings.toml").read_text()
    assert 'strategy = "uniform"' in (out / "run" / "settings.toml").read_text()
    refused = runner.invoke(app, ["quickstart", "--out", str(out), "--steps", "2", "--seed", "1", *small])
    assert isinstance(refused.exception, MapnetError) and "train.seed = 0, asked 1" in str(refused.exception)
