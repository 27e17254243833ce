"""`mapnet variance` on saved tiny checkpoints, and the pretraining snapshot."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner
from variance_fixtures import tiny_settings

from mapnet_cli.cli import app
from mapnet_cli.data.shards import ShardReader
from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.variance.measure import NO_PROPOSAL
from mapnet_cli.evaluation.variance.snapshot import variance_snapshot
from mapnet_cli.evaluation.variance.target import load_target
from mapnet_cli.model import checkpoint

ARGS = [
    "--sentences",
    "8",
    "--masks",
    "3",
    "--bootstrap",
    "60",
    "--batch-sizes",
    "1,2,5",
    "--set",
    "variance.batch_draws=200",
]


def run_json(path, *extra):
    result = CliRunner().invoke(app, ["variance", str(path), *ARGS, "--json", *extra])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def check_terms(entry):
    for key in ("mask_variance", "sentence_variance", "total_variance", "sum_of_terms"):
        lo, hi = entry[key]["ci95"]
        assert lo <= hi
    assert entry["sum_of_terms"]["estimate"] == pytest.approx(entry["total_variance"]["estimate"], rel=1e-9)
    assert entry["mask_variance"]["estimate"] > 0 and entry["total_variance"]["estimate"] > 0


def test_uniform_checkpoint_reports_mapnet_schemes_unavailable(tiny_runs):
    doc = run_json(tiny_runs["uniform"])
    assert doc["schema"] == "mapnet.variance/1"
    s = doc["schemes"]
    assert s["uniform"]["available"]
    check_terms(s["uniform"])
    for name in ("mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted"):
        assert s[name] == {"available": False, "reason": NO_PROPOSAL}
    assert list(doc["minibatch"]) == ["uniform"]
    rows = {r["batch_size"]: r for r in doc["minibatch"]["uniform"]}
    assert rows[2]["predicted"]["estimate"] == pytest.approx(s["uniform"]["total_variance"]["estimate"] / 2)
    assert rows[2]["direct"] is not None and rows[5]["direct"] is None and "2B <= S" in rows[5]["direct_unavailable"]
    assert doc["gradient"]["mode"] == "exact" and len(doc["data"]["sentences"]) == 8
    assert doc["settings"]["variance"]["masks"] == 3


def test_mapnet_checkpoint_reports_all_four_schemes(tiny_runs):
    doc = run_json(tiny_runs["mapnet"], "--project-dim", "256")
    s = doc["schemes"]
    assert all(s[n]["available"] for n in ("uniform", "mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted"))
    for name in s:
        check_terms(s[name])
    eps = doc["settings"]["masking"]["mapnet"]["clip_epsilon"]
    w = s["mapnet_clipped"]["weights"]
    assert 1 - eps - 1e-6 <= w["min"] <= w["max"] <= 1 + eps + 1e-6
    assert s["mapnet_unweighted"]["weights"] == {
        "mean": 1.0,
        "min": 1.0,
        "max": 1.0,
        "mean_unclipped_ratio": s["mapnet_unclipped"]["weights"]["mean_unclipped_ratio"],
    }
    assert s["mapnet_unclipped"]["weights"]["max"] > 1 + eps  # a non-uniform proposal: some ratios beyond the clip
    references = []
    for name in ("mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted"):
        bias = s[name]["bias_vs_uniform"]
        assert (
            bias["distance"] >= 0 and 0 <= bias["distance_unbiased"]["ci95"][0] <= bias["distance_unbiased"]["ci95"][1]
        )
        # The uniform mean gradient here is distinguishable from 0 (its unbiased squared norm is > 0), so
        # the relative distance is a number: the unbiased distance over one reference shared by all schemes.
        rel = bias["relative_unbiased"]
        assert bias["distance_unbiased"]["estimate"] > 0 and 0 < rel["estimate"] < 10
        references.append(bias["distance_unbiased"]["estimate"] / rel["estimate"])
        # With S = 8 sentences some bootstrap resamples have a uniform mean gradient indistinguishable from
        # 0: no interval, null rather than huge (a case with one: test_exact, test_schemes).
        assert rel["ci95"] == [None, None]
    assert references == pytest.approx([references[0]] * 3, rel=1e-9)
    assert doc["gradient"] == {**doc["gradient"], "mode": "sketch", "dimension": 256}


def test_table_output_and_parameter_subsets(tiny_runs):
    result = CliRunner(env={"COLUMNS": "220"}).invoke(
        app, ["variance", str(tiny_runs["uniform"]), *ARGS, "--params", "encoder.blocks.*"]
    )
    assert result.exit_code == 0, result.output
    assert "mask variance" in result.stdout and "unavailable" in result.stdout and "Mini-batch" in result.stdout
    assert "[min, max]" in result.stdout  # the header's brackets are text: rich took them for a tag and dropped them
    bad = CliRunner().invoke(app, ["variance", str(tiny_runs["uniform"]), *ARGS, "--params", "nope.*"])
    assert isinstance(bad.exception, MapnetError) and "match no parameter" in str(bad.exception)
    bad = CliRunner().invoke(app, ["variance", str(tiny_runs["uniform"]), "--masks", "1"])
    assert isinstance(bad.exception, MapnetError) and "variance.masks" in str(bad.exception)
    bad = CliRunner().invoke(app, ["variance", str(tiny_runs["uniform"]), "--batch-sizes", "1,two"])
    assert isinstance(bad.exception, MapnetError)
    assert str(bad.exception) == "--batch-sizes must be a comma-separated list of ints: 'two' is not one (got '1,two')"


def test_subset_gradients_have_smaller_variance_than_all(tiny_runs):
    full = run_json(tiny_runs["uniform"])["schemes"]["uniform"]["mask_variance"]["estimate"]
    part = run_json(tiny_runs["uniform"], "--params", "encoder.blocks.*")["schemes"]["uniform"]["mask_variance"][
        "estimate"
    ]
    assert 0 < part < full  # a trace over a subset of coordinates, same masks


def test_variance_snapshot_is_cheap_repeatable_and_side_effect_free(tiny_runs):
    target = load_target(checkpoint.resolve_checkpoint(tiny_runs["mapnet"]))
    settings = tiny_settings("mapnet")
    model, proposal = target.model, target.proposal
    model.train()
    proposal.train()
    rng = torch.get_rng_state()
    reader = ShardReader(tiny_runs["shards"], "valid")
    a = variance_snapshot(model, proposal, reader, settings, step=100)
    b = variance_snapshot(model, proposal, reader, settings, step=200)
    assert model.training and proposal.training and torch.equal(torch.get_rng_state(), rng)
    assert a["step"] == 100 and (a["sentences"], a["masks"], a["project_dim"]) == (8, 4, 4096)
    assert set(a["schemes"]) == {"uniform", "mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted"}
    assert a["schemes"] == b["schemes"]  # same sentences, same masks, same model: same numbers
    u = a["schemes"]["uniform"]
    assert u["total_variance"] == pytest.approx(u["mask_variance"] + u["sentence_variance"])
    json.dumps(a)  # goes into metrics.jsonl as is
    only_uniform = variance_snapshot(model, None, reader, settings, step=100)
    assert set(only_uniform["schemes"]) == {"uniform"}
    assert only_uniform["schemes"]["uniform"] == pytest.approx(a["schemes"]["uniform"], rel=1e-9)


def test_missing_shards_and_foreign_tokenizer_are_refused(tiny_runs, tmp_path):
    (tmp_path / "run.json").write_text("{}")
    import shutil

    shutil.copytree(tiny_runs["uniform"] / "checkpoints", tmp_path / "checkpoints")
    with pytest.raises(MapnetError, match="--data"):
        load_target(tmp_path)
    from variance_fixtures import write_tiny_shards

    other = write_tiny_shards(tmp_path / "other", train=4, valid=4, vocab_size=80)
    with pytest.raises(MapnetError, match="another tokenizer"):
        load_target(tmp_path, other)
