"""`mapnet variance --oracle / --schemes` on saved tiny checkpoints, and snapshots that follow the run's strategy."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner
from variance_fixtures import tiny_settings, write_tiny_shards

from mapnet_cli import settings as settings_mod
from mapnet_cli.cli import app
from mapnet_cli.data.shards import ShardReader
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
    "1,2",
    "--set",
    "variance.batch_draws=100",
]
SNAPSHOT_KEYS = {
    "mask_variance",
    "sentence_variance",
    "total_variance",
    "mask_share",
    "noise_scale",
    "mask_noise_scale",
}


def run_json(path, *extra):
    result = CliRunner().invoke(app, ["variance", str(path), *ARGS, "--json", *extra])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def check_scale_free(entry):
    """noise_scale = total / ||E g||^2 and mask_noise_scale = mask / ||E g||^2, with intervals (null = unbounded)."""
    signal = entry["mean_gradient_sq"]["estimate"]
    for name, term in (("noise_scale", "total_variance"), ("mask_noise_scale", "mask_variance")):
        got = entry[name]
        assert set(got) == {"estimate", "ci95"} and len(got["ci95"]) == 2
        if signal > 0:
            assert got["estimate"] == pytest.approx(entry[term]["estimate"] / signal, rel=1e-9)
        else:
            assert got["estimate"] is None
        lo, hi = (math.inf if x is None else x for x in got["ci95"])
        assert 0 < lo <= hi


def test_oracle_json_on_a_uniform_checkpoint(tiny_runs):
    doc = run_json(tiny_runs["uniform"], "--oracle")
    s = doc["schemes"]
    assert [n for n, e in s.items() if e["available"]] == ["uniform", "oracle"]
    for name in ("mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted", "ht"):
        assert s[name] == {"available": False, "reason": NO_PROPOSAL}
    for name in ("uniform", "oracle"):
        check_scale_free(s[name])
        assert s[name]["total_variance"]["estimate"] > 0
    assert s["oracle"]["weights"]["per_position"] is True and "bias_vs_uniform" in s["oracle"]
    assert doc["gradient"]["oracle"] == {
        "basis": "proxy",
        "rounds": 4,
        "forward_rows": doc["gradient"]["oracle"]["forward_rows"],
    }
    assert doc["gradient"]["oracle"]["forward_rows"] >= 8 * 4  # ~n/K rows per sentence and round
    assert list(doc["minibatch"]) == ["uniform", "oracle"]
    # without --oracle the scheme is not measured (and costs nothing)
    assert "oracle" not in run_json(tiny_runs["uniform"])["schemes"]


def test_every_scheme_on_a_mapnet_checkpoint(tiny_runs):
    doc = run_json(
        tiny_runs["mapnet"],
        "--project-dim",
        "256",
        "--oracle",
        "--schemes",
        "uniform,mapnet_clipped,ht,stratified,frequency",
    )
    s = doc["schemes"]
    assert list(s) == ["uniform", "mapnet_clipped", "ht", "stratified", "frequency", "oracle"]
    for name, entry in s.items():
        assert entry["available"], (name, entry)
        check_scale_free(entry)
        assert entry["sum_of_terms"]["estimate"] == pytest.approx(entry["total_variance"]["estimate"], rel=1e-9)
    for name in ("ht", "stratified", "frequency", "oracle"):
        assert s[name]["weights"]["per_position"] is True
    assert s["ht"]["weights"]["max"] > 1.5  # a non-uniform proposal: some positions weighted up
    # the default on this checkpoint: the paper's three and ht, not stratified / frequency / oracle
    assert list(run_json(tiny_runs["mapnet"], "--project-dim", "64")["schemes"]) == [
        "uniform",
        "mapnet_clipped",
        "mapnet_unclipped",
        "mapnet_unweighted",
        "ht",
    ]


def test_table_shows_the_noise_scale(tiny_runs):
    result = CliRunner(env={"COLUMNS": "240"}).invoke(
        app, ["variance", str(tiny_runs["uniform"]), *ARGS, "--schemes", "uniform,stratified"]
    )
    assert result.exit_code == 0, result.output
    assert "noise scale" in result.stdout and "stratified (per position)" in result.stdout


def test_frequency_without_a_training_split_is_unavailable(tiny_runs, tmp_path):
    shards = write_tiny_shards(tmp_path / "no-train", train=0, valid=12)
    doc = run_json(tiny_runs["uniform"], "--data", str(shards), "--schemes", "uniform,frequency")
    assert doc["schemes"]["uniform"]["available"]
    reason = doc["schemes"]["frequency"]["reason"]
    assert not doc["schemes"]["frequency"]["available"] and "training split" in reason and "\n" not in reason


@pytest.mark.parametrize(
    "strategy, masking, expected",
    [
        ("uniform", {}, {"uniform"}),
        ("mapnet", {"mapnet": {"importance": "ht", "mix_uniform": 0.2}}, {"uniform", "ht"}),
        ("stratified", {}, {"uniform", "stratified"}),
        ("frequency", {"frequency": {"mix_uniform": 0.5}}, {"uniform", "frequency"}),
    ],
)
def test_snapshot_measures_the_runs_own_scheme(tiny_runs, strategy, masking, expected):
    """compare.SCHEME looks up the run's own scheme in every snapshot; its scale-free figures come along."""
    target = load_target(checkpoint.resolve_checkpoint(tiny_runs["mapnet" if strategy == "mapnet" else "uniform"]))
    settings = settings_mod.apply(tiny_settings(strategy), {"masking": masking}, "test")
    reader = ShardReader(tiny_runs["shards"], "valid")
    snap = variance_snapshot(target.model, target.proposal, reader, settings, step=3)
    assert set(snap["schemes"]) == expected
    for name, terms in snap["schemes"].items():
        assert SNAPSHOT_KEYS <= set(terms), name
        if terms["noise_scale"] is not None:
            assert terms["noise_scale"] * terms["mask_share"] == pytest.approx(terms["mask_noise_scale"], rel=1e-9)
        assert ("relative_bias" in terms) == (name != "uniform")
    json.dumps(snap)
