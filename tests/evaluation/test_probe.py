"""The linear probe: reproducible for a fixed seed, a real fit, and its rank correlation with fine-tuning."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.glue import metrics as M
from mapnet_cli.evaluation.glue.pretrained import find_checkpoints
from mapnet_cli.evaluation.probe import ProbeConfig, fit_logistic, probe_run, rank_correlation


@pytest.fixture
def real_sst2(shared_data, tmp_path) -> Path:
    """The first 300 training and 120 dev rows of the real SST-2 files, in the official layout."""
    root = tmp_path / "glue"
    (root / "SST-2").mkdir(parents=True)
    for name, rows in (("train.tsv", 300), ("dev.tsv", 120)):
        lines = (shared_data / "glue" / "SST-2" / name).read_text(encoding="utf-8").splitlines()
        (root / "SST-2" / name).write_text("\n".join(lines[: rows + 1]) + "\n", encoding="utf-8")
    return root


def _without_time(doc: dict) -> dict:
    return {**doc, "checkpoints": [{k: v for k, v in ck.items() if k != "seconds"} for ck in doc["checkpoints"]]}


def test_probe_is_reproducible_for_a_fixed_seed(fake_run, real_sst2, tmp_path):
    refs = find_checkpoints(every=[fake_run])
    cfg = ProbeConfig(train_examples=200, seed=3, max_seq_len=64)
    a = probe_run(refs, real_sst2, cfg, tmp_path / "a" / "probe.json")
    b = probe_run(refs, real_sst2, cfg)
    assert _without_time(a) == _without_time(b)  # every number, bit for bit
    assert (
        json.loads((tmp_path / "a" / "probe.json").read_text())["checkpoints"][0]["mean"] == a["checkpoints"][0]["mean"]
    )
    # Two checkpoints and their one random-init control, each with both poolings scored on the real dev rows.
    assert [(ck["run"], ck["step"], ck["init"]) for ck in a["checkpoints"]] == [
        ("fake-bert", 100, "pretrained"),
        ("fake-bert", 200, "pretrained"),
        ("random-init", 0, "random"),
    ]
    assert a["data"] == {
        "train_rows": 200,
        "train_subset_sha256": a["data"]["train_subset_sha256"],
        "dev_rows": {"SST-2": 120},
    }
    for ck in a["checkpoints"]:
        for pooling in ("cls", "mean"):
            p = ck[pooling]
            assert 0.0 <= p["entries"]["SST-2"]["metrics"]["acc"] <= 1.0 and p["iterations"] >= 1
            assert math.isfinite(p["train_loss"]) and p["train_accuracy"] > 0.5  # fitted, not left at zero
        assert ck["score"] == ck["mean"]["score"]
    # The checkpoints and the control have different features, so different probes.
    assert len({json.dumps(ck["mean"]) for ck in a["checkpoints"]}) == 3
    # Another seed draws other training rows.
    c = probe_run(refs[:1], real_sst2, ProbeConfig(train_examples=200, seed=4, max_seq_len=64), control=False)
    assert c["data"]["train_subset_sha256"] != a["data"]["train_subset_sha256"]
    assert [ck["init"] for ck in c["checkpoints"]] == ["pretrained"]


def test_logistic_fit_by_hand():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 5))
    y = (x[:, 0] - 2 * x[:, 3] > 0).astype(np.int64)  # linearly separable
    probe = fit_logistic(x, y, 2, l2=1e-4, max_iter=200)
    assert M.accuracy(probe.predict(x), y) > 0.98
    again = fit_logistic(x, y, 2, l2=1e-4, max_iter=200)
    assert np.array_equal(probe.weight, again.weight) and np.array_equal(probe.bias, again.bias)
    # The weights point along the rule (standardised features): x0 positive, x3 negative, the rest small.
    w = probe.weight[:, 1] - probe.weight[:, 0]
    assert w[0] > 0 > w[3] and np.all(np.abs(w[[1, 2, 4]]) < 0.25 * abs(w[3]))
    # A larger penalty shrinks the weights; a constant feature is harmless.
    assert np.abs(fit_logistic(x, y, 2, l2=1.0).weight).sum() < np.abs(probe.weight).sum()
    fit_logistic(np.c_[x, np.ones(400)], y, 2)


def test_rank_correlation_matches_checkpoints_by_hash():
    probe = {
        "task": "SST-2",
        "config": {"pooling": "mean"},
        "checkpoints": [
            {
                "run": "r",
                "step": s,
                "sha256": f"h{s}",
                "init": "pretrained",
                "mean": {"score": p},
                "cls": {"score": 1 - p},
            }
            for s, p in ((1, 0.5), (2, 0.6), (3, 0.7), (4, 0.8))
        ]
        + [
            {
                "run": "random-init",
                "step": 0,
                "sha256": "ctl",
                "init": "random",
                "mean": {"score": 0.1},
                "cls": {"score": 0.1},
            }
        ],
    }
    glue = {
        "summary": {
            "checkpoints": [
                {"sha256": f"h{s}", "init": "pretrained", "entries": {"SST-2": f}}
                for s, f in ((1, 0.1), (2, 0.3), (3, 0.2))
            ]
            + [{"sha256": "ctl", "init": "random", "entries": {"SST-2": 0.9}}]
        }
    }
    c = rank_correlation(probe, glue)
    # Matched: steps 1-3 (step 4 was not fine-tuned; the control is never a pair). Ranks (1,2,3) vs (1,3,2): rho 0.5.
    assert c["n"] == 3 and [p["step"] for p in c["pairs"]] == [1, 2, 3]
    assert c["spearman"] == pytest.approx(0.5) and c["per_run"] == {"r": {"n": 3, "spearman": pytest.approx(0.5)}}
    assert rank_correlation(probe, glue, pooling="cls")["spearman"] == pytest.approx(-0.5)
    glue["summary"]["checkpoints"] = glue["summary"]["checkpoints"][:2]
    assert rank_correlation(probe, glue)["spearman"] is None  # two checkpoints rank nothing


def test_probe_command_writes_json_and_correlation(fake_run, real_sst2, tmp_path):
    results = tmp_path / "results.json"
    refs = find_checkpoints(every=[fake_run])
    results.write_text(
        json.dumps(
            {
                "summary": {
                    "checkpoints": [{"sha256": r.sha, "entries": {"SST-2": 0.5 + 0.1 * i}} for i, r in enumerate(refs)]
                }
            }
        )
    )
    out = tmp_path / "probe.json"
    res = CliRunner().invoke(
        app,
        [
            "probe",
            str(fake_run),
            "--data",
            str(real_sst2),
            "--out",
            str(out),
            "--examples",
            "100",
            "--max-seq-len",
            "48",
            "--no-control",
            "--against",
            str(results),
        ],
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert [ck["step"] for ck in doc["checkpoints"]] == [100, 200] and doc["config"]["train_examples"] == 100
    assert doc["correlation"]["n"] == 2 and doc["correlation"]["spearman"] is None
    text = " ".join(res.output.split())
    for ck in doc["checkpoints"]:
        assert f"fake-bert@{ck['step']} │ pretrained │ {100 * ck['mean']['score']:.2f}" in text
    assert "over 2 checkpoints: not computed" in text
    for extra, msg in ((["--task", "stsb"], "regression"), (["--pooling", "max"], "pooling must be one of")):
        res = CliRunner().invoke(
            app, ["probe", str(fake_run), "--data", str(real_sst2), "--out", str(out), "--overwrite", *extra]
        )
        assert isinstance(res.exception, MapnetError) and msg in str(res.exception), res.output
        assert json.loads(out.read_text()) == doc  # refused before the first checkpoint: the old result stands


def test_a_probe_stopped_part_way_leaves_json_that_says_it_is_partial(fake_run, real_sst2, tmp_path, monkeypatch):
    """Killed after its first checkpoint, a probe left valid JSON with 1 of 3 entries and nothing saying so; it now
    carries "complete": false and "planned", as `mapnet blimp`'s does, until the last entry is in."""
    from mapnet_cli.evaluation import probe as probe_mod

    real, calls = probe_mod.probe_checkpoint, []

    def killed_after_the_first(*args, **kwargs):
        if calls:
            raise KeyboardInterrupt  # what a kill between two checkpoints leaves: the file as written after the first
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(probe_mod, "probe_checkpoint", killed_after_the_first)
    out = tmp_path / "probe.json"
    cfg = ProbeConfig(train_examples=60, max_seq_len=48)
    with pytest.raises(KeyboardInterrupt):
        probe_run(find_checkpoints(every=[fake_run]), real_sst2, cfg, out)
    partial = json.loads(out.read_text())
    assert partial["complete"] is False and partial["planned"] == 3 and len(partial["checkpoints"]) == 1
    monkeypatch.setattr(probe_mod, "probe_checkpoint", real)
    done = probe_run(find_checkpoints(every=[fake_run]), real_sst2, cfg, out)
    assert json.loads(out.read_text()) == json.loads(json.dumps(done))
    assert done["complete"] is True and len(done["checkpoints"]) == done["planned"] == 3


def test_a_damaged_checkpoint_of_a_curve_is_refused_before_the_first_is_probed(fake_run, real_sst2, tmp_path):
    """probe, blimp and finetune-glue --checkpoints evaluate every checkpoint of a run: the newest one damaged was
    found after the older ones had been evaluated. Now every one is verified when the run is read."""
    import shutil

    from mapnet_cli.evaluation.blimp.models import find_targets

    run = tmp_path / "run"
    shutil.copytree(fake_run, run)
    weights = run / "checkpoints" / "step-00000200" / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:-3] + bytes([data[-3] ^ 1]) + data[-2:])
    for read in (lambda: find_checkpoints(every=[run]), lambda: find_targets([run])):
        with pytest.raises(MapnetError, match="step-00000200/model.safetensors does not match its sha256"):
            read()
    out = tmp_path / "probe.json"
    res = CliRunner().invoke(app, ["probe", str(run), "--data", str(real_sst2), "--out", str(out), "--examples", "60"])
    assert isinstance(res.exception, MapnetError) and "does not match its sha256" in str(res.exception)
    assert "probing" not in res.output and not out.exists()


def test_a_tokenizer_past_its_models_embedding_table_is_refused_before_the_first_is_probed(
    fake_run, real_sst2, tmp_path
):
    """A checkpoint (listed second) whose tokenizer gives ids its embedding table has no row for reached torch as
    IndexError when its turn came, after the checkpoints before it were probed."""
    import torch

    from mapnet_cli import settings as settings_mod
    from mapnet_cli.atomic import sha256_file
    from mapnet_cli.model.bert import BertConfig, BertForMLM
    from mapnet_cli.model.checkpoint import save_checkpoint

    tokenizer = fake_run / "tokenizer.json"  # 143 tokens
    cfg = BertConfig(vocab_size=100, layers=1, hidden=32, heads=2, intermediate=64, max_position=64)
    settings = settings_mod.resolve(
        assignments=[
            "model.hidden=32",
            "model.layers=1",
            "model.heads=2",
            "model.max_position=64",
            "shard.max_seq_len=64",
        ]
    )
    torch.manual_seed(0)
    save_checkpoint(
        tmp_path / "small", 100, {"": BertForMLM(cfg)}, {}, cfg, settings.to_toml(), tokenizer, sha256_file(tokenizer)
    )
    out = tmp_path / "probe.json"
    res = CliRunner().invoke(
        app,
        [
            "probe",
            str(fake_run),
            str(tmp_path / "small"),
            "--data",
            str(real_sst2),
            "--out",
            str(out),
            "--examples",
            "60",
        ],
    )
    assert isinstance(res.exception, MapnetError), res.output
    assert "tokenizer.json gives token ids up to 142 (143 tokens), but checkpoint " in str(res.exception)
    assert "has 100 embedding rows (ids 0-99)" in str(res.exception)
    assert "probing" not in res.output and not out.exists()


@pytest.mark.parametrize("l2", ["nan", "inf", "-inf", "-1"])
def test_a_non_finite_or_negative_l2_is_refused_before_any_checkpoint_is_probed(l2, fake_run, real_sst2, tmp_path):
    """--l2 is a float flag outside the settings tree: its own check refuses NaN and infinities too."""
    res = CliRunner().invoke(
        app, ["probe", str(fake_run), "--data", str(real_sst2), "--out", str(tmp_path / "p.json"), "--l2", l2]
    )
    assert isinstance(res.exception, MapnetError), res.output
    assert f"probe l2 must be a finite number >= 0 (got {float(l2)})" in str(res.exception)
    assert not (tmp_path / "p.json").exists()


def test_a_negative_seed_is_refused_before_any_checkpoint_is_probed(fake_run, real_sst2, tmp_path):
    """`probe --seed -1` was numpy's "expected non-negative integer" traceback when the training rows were drawn."""
    res = CliRunner().invoke(
        app,
        [
            "probe",
            str(fake_run),
            "--data",
            str(real_sst2),
            "--out",
            str(tmp_path / "p.json"),
            "--seed",
            "-1",
            "--examples",
            "60",
        ],
    )
    assert isinstance(res.exception, MapnetError), res.output
    assert str(res.exception) == "invalid probe settings: probe seed must be >= 0 (got -1)"
    assert not (tmp_path / "p.json").exists()
