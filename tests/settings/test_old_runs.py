"""Run folders an earlier mapnet wrote still resume, export and evaluate (mapnet_cli/settings/moved.py).

tests/fixtures/runs-mapnet-0.1 holds a MAP-Net (HT, gradnorm, a half-size proposal, its own learning rate) and an
adaptive run (HT weights, soft scores) written by mapnet 0.1, whose settings.toml has the flat masking keys
(`masking.map_hidden`, `masking.mix_uniform`, ...): their values must reach the tables they moved to, so a resumed
run trains exactly what it trained, and a user's config file with an old key is told the new one.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import from_dict, resolve

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs-mapnet-0.1"


@pytest.fixture
def old(tmp_path) -> Path:
    return Path(shutil.copytree(FIXTURES, tmp_path / "old"))


def test_an_old_runs_settings_read_into_the_new_tables():
    mapnet = checkpoint.load_settings(FIXTURES / "mapnet")
    assert mapnet.optim.warmup.steps == 1 and mapnet.train.short_seq.len == 0  # 0.1's optim.warmup_steps = 1
    m = mapnet.masking.mapnet
    assert (m.importance, m.mix_uniform, m.target, m.lr, m.hidden, m.heads, m.explore_steps) == (
        "ht",
        0.5,
        "gradnorm",
        1e-3,
        8,
        2,
        2,
    )
    adaptive = checkpoint.load_settings(FIXTURES / "adaptive").masking
    assert (
        adaptive.adaptive.weights,
        adaptive.adaptive.mix_uniform,
        adaptive.adaptive.score,
        adaptive.adaptive.every,
    ) == ("ht", 0.5, "soft", 1)
    assert adaptive.mapnet == type(adaptive.mapnet)()  # the shared mixture went to the adaptive table only
    raw = tomllib.loads((FIXTURES / "mapnet" / "settings.toml").read_text())
    assert "map_hidden" in raw["masking"]  # the fixture is what mapnet 0.1 wrote
    assert from_dict(raw, "x") == mapnet


@pytest.mark.parametrize("name", ["mapnet", "adaptive"])
def test_an_old_run_resumes_exports_and_evaluates(old, name, tmp_path):
    run, runner = old / name, CliRunner()
    resumed = runner.invoke(
        app,
        [
            "pretrain",
            str(old / "shards"),
            "--out",
            str(run),
            "--resume",
            "--steps",
            "4",
            "--set",
            "logging.progress=false",
        ],
    )
    assert resumed.exit_code == 0, (resumed.output, resumed.exception)
    ckpt = checkpoint.latest_checkpoint(run)
    assert ckpt.name == "step-00000004"
    before, after = checkpoint.load_settings(FIXTURES / name), checkpoint.load_settings(ckpt)
    assert [getattr(after, f) for f in ("model", "masking", "optim")] == [  # the same run, continued
        getattr(before, f) for f in ("model", "masking", "optim")
    ]
    assert "[masking." + name + "]" in (ckpt / "settings.toml").read_text()  # written in today's layout
    exported = runner.invoke(app, ["export", str(run), "--out", str(tmp_path / "hf")])
    assert exported.exit_code == 0, (exported.output, exported.exception)
    assert (tmp_path / "hf" / "mapnet_export.json").is_file()
    shown = runner.invoke(app, ["inspect-masks", str(run), "--text", "w5 w6 w7 w8 w9 w10"])
    assert shown.exit_code == 0, (shown.output, shown.exception)


def test_an_old_key_in_a_users_config_is_told_the_new_one(tmp_path):
    config = tmp_path / "old.toml"
    config.write_text(
        '[masking]\nstrategy = "mapnet"\nmap_hidden = 8\nspan_p = 0.3\nmix_uniform = 0.1\n'
        "[optim]\nwarmup_steps = 3\n[train]\nshort_seq_len = 16\nbatch_ramp_fraction = 0.2\n"
    )
    with pytest.raises(MapnetError) as err:
        resolve(config)
    text = str(err.value)
    assert "'masking.map_hidden' in " in text and "is now 'masking.mapnet.hidden'" in text
    assert "is now 'masking.span.p'" in text
    for old, new in (
        ("optim.warmup_steps", "optim.warmup.steps"),
        ("train.short_seq_len", "train.short_seq.len"),
        ("train.batch_ramp_fraction", "train.batch_ramp.fraction"),
    ):
        assert f"'{old}' in {config} is now '{new}'" in text
    assert "'masking.mapnet.mix_uniform' or 'masking.frequency.mix_uniform' or 'masking.adaptive.mix_uniform'" in text
    with pytest.raises(MapnetError, match="'masking.map_lr' in command-line flags is now 'masking.mapnet.lr'"):
        resolve(None, None, ["masking.map_lr=1e-3"])
