"""`mapnet compare --time-budget`: every arm the same training time, each run the steps its time bought."""

from __future__ import annotations

import json

import pytest
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli import compare as cmp
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import resolve

BUDGET = ["train.time_budget=20m", "optim.warmup.fraction=0.05", "train.short_seq.fraction=0.1"]


def test_every_arm_and_seed_gets_the_same_budget_and_keeps_every_checkpoint(tmp_path):
    base = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [*BUDGET, "train.eval_every=4", "masking.mapnet.explore_steps=100"],
        check_ignored=False,
    )
    plan = cmp.plan_runs(base, cmp.parse_strategies("uniform,uniform@0.3,mapnet,mapnet-ht-lite"), 2, tmp_path)
    assert {(p.settings.train.time_budget, p.settings.optim.warmup.fraction) for p in plan} == {("20m", 0.05)}
    assert {p.settings.train.seed for p in plan} == {0, 1}
    # Its evaluation steps are found by each run: every checkpoint (one per evaluation) is kept.
    assert cmp.eval_steps(base.train) is None
    assert all(p.settings.train.keep_steps == () and p.settings.train.keep_last >= 10**6 for p in plan)
    # The arms whose schedule is counted in train.steps cannot be laid out in time.
    with pytest.raises(MapnetError, match="mapnet-uncompressed stretches MAP-Net's exploration to 10x train.steps"):
        cmp.plan_runs(base, ["mapnet-uncompressed"], 1, tmp_path)
    steps_explore = resolve(None, {"model": {"preset": "tiny"}}, BUDGET, check_ignored=False)
    with pytest.raises(MapnetError, match="invalid settings for strategy mapnet: masking.mapnet.explore_steps = 0"):
        cmp.plan_runs(steps_explore, ["uniform", "mapnet"], 1, tmp_path)


def _run(strategy, k, points, steps):
    return {
        "strategy": strategy,
        "seed_index": k,
        "seed": k,
        "seconds_per_step": 60.0 / steps,
        "budget": {"steps": steps},
        "eval": [{"step": s, "eval_loss": loss, "eval_accuracy": 0.1, "elapsed": s} for s, loss in points],
    }


def test_seeds_that_bought_different_steps_are_compared_at_the_budgets_end():
    # Evaluated every 10 steps; seed 0's budget bought 25 steps, seed 1's 32: their curves share 0, 10, 20.
    runs = [
        _run("uniform", 0, [(0, 6.0), (10, 5.0), (20, 4.0), (25, 3.8)], 25),
        _run("uniform", 1, [(0, 6.0), (10, 5.2), (20, 4.2), (30, 3.6), (32, 3.4)], 32),
    ]
    u = cmp.aggregate(runs, ["uniform"])["strategies"]["uniform"]
    assert u["steps"] == [0, 10, 20] and [p["mean"] for p in u["curve"]["eval_loss"]] == pytest.approx([6.0, 5.1, 4.1])
    assert u["final"]["eval_loss"]["mean"] == pytest.approx(3.6)  # each seed's own last evaluation: (3.8 + 3.4) / 2
    assert u["steps_bought"]["mean"] == 28.5
    # Each seed's steps to the target on its own curve: seed 0 ends at 3.8 (never), seed 1 reaches 3.6 at step 30.
    assert u["steps_to_target"]["per_seed"] == [None, pytest.approx(30.0)]


def two_second_compare(shards, out, *sets: str, budget: str = "2s") -> list[str]:
    """`compare` of uniform and uniform@0.3, 2 seeds, a 2-second budget (or `budget`) of tiny steps on tiny shards."""
    args = [
        "compare",
        str(shards),
        "--out",
        str(out),
        "--strategies",
        "uniform,uniform@0.3",
        "--seeds",
        "2",
        "--preset",
        "tiny",
        "--time-budget",
        budget,
    ]
    # No learning-rate warm-up: on a loaded machine a first step can spend a 2-second budget's warm-up share (refused).
    for s in (
        "optim.warmup.fraction=0",
        "model.max_position=32",
        "shard.max_seq_len=32",
        "train.batch_size=8",
        "train.eval_sequences=8",
        "train.eval_every=0",
        "optim.lr=3e-3",
        "logging.progress=false",
        "train.device=cpu",
        *sets,
    ):
        args += ["--set", s]
    return args


@pytest.mark.slow
def test_compare_trains_every_arm_for_the_same_time_and_reuses_finished_runs(tmp_path):
    shards = write_tiny_shards(tmp_path / "shards", train=96, valid=24, seq_len=32)
    out = tmp_path / "cmp"
    # 1 s of wall-clock training per run (4 runs): hundreds of tiny steps each, timed as a real budget times them.
    args = two_second_compare(shards, out, "train.short_seq.fraction=0.2", budget="1s")
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads((out / cmp.RESULTS).read_text())
    assert doc["time_budget"] == "1s" and doc["eval_steps"] is None
    for rec in doc["runs"]:
        budget = rec["budget"]
        assert budget["finished"] and budget["seconds"] == 1.0 and budget["spent_seconds"] >= 1.0
        assert rec["eval"][-1]["step"] == budget["steps"]  # the state at the budget's end is what is compared
        assert checkpoint.latest_checkpoint(rec["path"]).name == f"step-{budget['steps']:08d}"
    assert set(doc["aggregate"]["strategies"]) == {"uniform", "uniform@0.3"}
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and again.output.count("reusing") == 4, again.output


def test_step_costs_put_every_arm_on_the_modelled_clock_at_its_own_cost(tmp_path):
    costs = tmp_path / "costs.json"
    costs.write_text(
        json.dumps(
            {
                "arms": {
                    "uniform": {"step_seconds": 0.6, "short_step_seconds": 0.5},
                    "uniform@0.3": {"step_seconds": 0.75, "short_step_seconds": 0.62},
                }
            }
        )
    )
    base = resolve(None, {"model": {"preset": "tiny"}}, [*BUDGET, "train.eval_every=4"], check_ignored=False)
    table = cmp.costs.read_step_costs(costs, ["uniform", "uniform@0.3"])
    plan = cmp.plan_runs(base, ["uniform", "uniform@0.3"], 2, tmp_path, table)
    assert {(p.strategy, p.settings.train.step_seconds, p.settings.train.short_step_seconds) for p in plan} == {
        ("uniform", 0.6, 0.5),
        ("uniform@0.3", 0.75, 0.62),
    }  # both seeds of an arm at its costs
    # Without a sequence-length warm-up the short cost is left out (it would be ignored, which is refused).
    whole = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [*BUDGET[:2], "train.short_seq.len=0", "train.short_seq.fraction=0"],
        check_ignored=False,
    )
    assert {p.settings.train.short_step_seconds for p in cmp.plan_runs(whole, ["uniform"], 1, tmp_path, table)} == {0.0}
    # One line each: no budget, two modelled clocks, an arm the file lacks, a cost that is not a positive number.
    steps = resolve(None, {"model": {"preset": "tiny"}}, ["train.steps=10"], check_ignored=False)
    with pytest.raises(MapnetError, match="it needs --time-budget"):
        cmp.plan_runs(steps, ["uniform"], 1, tmp_path, table)
    both = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [*BUDGET, "train.step_seconds=1", "train.short_step_seconds=1"],
        check_ignored=False,
    )
    with pytest.raises(MapnetError, match="two modelled clocks"):
        cmp.plan_runs(both, ["uniform"], 1, tmp_path, table)
    with pytest.raises(MapnetError, match=r"has no costs for mapnet-ht-lite: time them with benchmarks/step_costs.py"):
        cmp.costs.read_step_costs(costs, ["uniform", "mapnet-ht-lite"])
    for bad in ({"arms": {"uniform": {"step_seconds": -1, "short_step_seconds": 0.5}}}, {"arms": []}, "not json"):
        costs.write_text(bad if isinstance(bad, str) else json.dumps(bad))
        with pytest.raises(
            MapnetError, match=r"--step-costs .*(positive numbers|no \"arms\" table|not a readable JSON)"
        ):
            cmp.costs.read_step_costs(costs, ["uniform"])


@pytest.mark.slow
def test_compare_with_step_costs_buys_each_arm_the_steps_its_cost_allows(tmp_path):
    shards = write_tiny_shards(tmp_path / "shards", train=96, valid=24, seq_len=32)
    costs = tmp_path / "costs.json"
    # Powers of two: 2 s with the first 25% in short steps; uniform 4 short (1/8 s) + 12 whole (1/8 s) = 16 steps,
    # uniform@0.3 2 short (1/4 s) + 6 whole (1/4 s) = 8.
    costs.write_text(
        json.dumps(
            {
                "arms": {
                    "uniform": {"step_seconds": 0.125, "short_step_seconds": 0.125},
                    "uniform@0.3": {"step_seconds": 0.25, "short_step_seconds": 0.25},
                }
            }
        )
    )
    out = tmp_path / "cmp"
    res = CliRunner().invoke(
        app, [*two_second_compare(shards, out, "train.short_seq.fraction=0.25"), "--step-costs", str(costs)]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((out / cmp.RESULTS).read_text())
    bought = {(r["strategy"], r["seed_index"]): r["budget"]["steps"] for r in doc["runs"]}
    assert bought == {("uniform", 0): 16, ("uniform", 1): 16, ("uniform@0.3", 0): 8, ("uniform@0.3", 1): 8}
    assert all(r["budget"]["clock"] == "modelled" for r in doc["runs"])
    assert doc["step_costs"]["arms"]["uniform@0.3"] == {"step_seconds": 0.25, "short_step_seconds": 0.25}
    assert "the modelled clock's seconds" in res.output
