"""benchmarks/step_costs.py and experiments/common/levers_costs.py: the modelled clock's costs, measured and kept.

What the costs are worth is a matter of timing and is not asserted here; what is: the benchmark times the steps
the loop takes (the right number of each kind, from real budget runs), its arithmetic (ratios per round, their
median, the pinned reference) is exact, and the kept file gives a search the flags it trains with, or refuses.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mapnet_cli import cpu_features

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments" / "common"))
sys.path.insert(0, str(REPO / "benchmarks"))

import levers_costs  # noqa: E402
import step_costs  # noqa: E402
from tiny_shards import write_tiny_shards  # noqa: E402

COMMON = [
    "preset=tiny",
    "recipe=fast",
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.eval_sequences=8",
    "logging.log_every=1",
    "masking.strategy=uniform",
]


def test_each_arm_is_divided_by_the_reference_beside_it_and_the_median_taken():
    R = lambda full, short: {"full": full, "short": short}  # noqa: E731
    # Three rounds; in the first the machine is slow while b runs, and the reference beside b is slow with it.
    pairs = [
        {"a": {"arm": R(2.0, 0.5), "reference": R(1.0, 0.5)}, "b": {"arm": R(3.0, 1.5), "reference": R(2.0, 1.0)}},
        {"a": {"arm": R(1.5, 0.5), "reference": R(1.0, 0.5)}, "b": {"arm": R(1.0, 0.5), "reference": R(1.0, 0.5)}},
        {"a": {"arm": R(1.25, 0.5), "reference": R(1.0, 0.25)}, "b": {"arm": R(1.0, 0.25), "reference": R(1.0, 0.25)}},
    ]
    out = step_costs.summarise(pairs, ["ref", "a", "b"], (0.6, 0.2))
    a, b = out["arms"]["a"], out["arms"]["b"]
    assert a["ratio"] == {"full": 1.5, "short": 1.0}  # medians of [2, 1.5, 1.25] and [1, 1, 2]
    assert a["ratio_range"] == {"full": [1.25, 2.0], "short": [1.0, 2.0]}
    assert (a["step_seconds"], a["short_step_seconds"]) == (0.9, 0.2)
    assert b["ratio"] == {"full": 1.0, "short": 1.0} and b["ratio_range"]["full"] == [1.0, 1.5]  # 3 / 2, 1, 1
    assert out["arms"]["ref"]["ratio"] == {"full": 1.0, "short": 1.0} and out["reference_pinned"]
    assert out["arms"]["ref"]["step_seconds"] == 0.6
    # Unpinned, the median of the reference's runs alone is the base (in lock-step a step reads slower).
    free = step_costs.summarise(pairs, ["ref", "a", "b"], None, [R(0.8, 0.4), R(0.9, 0.5), R(0.7, 0.3)])
    assert free["reference_seconds"] == {"full": 0.8, "short": 0.4} and free["arms"]["a"]["step_seconds"] == 1.2
    with pytest.raises(ValueError, match="pin them or time it alone"):
        step_costs.summarise(pairs, ["ref", "a", "b"], None)


def test_the_ratio_is_the_arms_step_over_the_references_beside_it_never_inverted(tmp_path, monkeypatch):
    """No timing: each thread reads its own fake clock, and a fake loop's step of b sequences 'takes' b x 1 ms on it,
    so twice the batch is exactly twice the time; the benchmark must report 2, not 1/2."""
    import threading
    import types

    local = threading.local()
    monkeypatch.setattr(
        step_costs,
        "time",
        types.SimpleNamespace(perf_counter=lambda: local.now, strftime=time.strftime, gmtime=time.gmtime),
    )

    def fake_pretrain(settings, shards, out, clock):
        local.now = 0.0
        for _ in range(round(settings.train.budget_seconds)):  # 1 modelled second a step: the budget is the steps
            clock()
            local.now += settings.train.batch_size * 1e-3
            clock()

    monkeypatch.setattr(step_costs, "pretrain", fake_pretrain)
    shards = write_tiny_shards(tmp_path / "shards")
    out = tmp_path / "costs.json"
    assert (
        step_costs.main(
            [
                "--out",
                str(out),
                "--common",
                *COMMON,
                "--steps",
                "5",
                "--skip",
                "1",
                "--rounds",
                "2",
                "--alone",
                "1",
                "--arm",
                "base",
                str(shards),
                "--arm",
                "wide",
                str(shards),
                "train.batch_size=16",
            ]
        )
        == 0
    )
    bench = json.loads(out.read_text())
    assert bench["arms"]["wide"]["ratio"] == {"full": 2.0, "short": 2.0}
    assert bench["reference_seconds"] == {"full": pytest.approx(8e-3), "short": pytest.approx(8e-3)}
    assert bench["arms"]["wide"]["step_seconds"] == pytest.approx(0.016)


def test_runs_in_turns_alternate_their_steps_and_one_that_leaves_lets_the_other_go_on():
    import threading

    turns, order = step_costs.Turns(2), []

    def run(me: int, steps: int) -> None:
        clock = turns.clock(me)
        for _ in range(steps):
            clock()
            order.append(me)
            clock()
        turns.leave(me)

    threads = [
        threading.Thread(target=run, args=(1, 5), daemon=True),
        threading.Thread(target=run, args=(0, 3), daemon=True),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert order == [0, 1, 0, 1, 0, 1, 1, 1]  # run 0 first, in turn; after it left, run 1 alone
    assert len(turns.step_times(1)) == 5 and all(t >= 0 for t in turns.step_times(0))


def test_the_benchmark_times_real_budget_steps_and_the_kept_file_gives_the_flags(tmp_path):
    shards = write_tiny_shards(tmp_path / "shards")
    out = tmp_path / "costs.json"
    rc = step_costs.main(
        [
            "--out",
            str(out),
            "--common",
            *COMMON,
            "--steps",
            "5",
            "--skip",
            "1",
            "--rounds",
            "2",
            "--alone",
            "1",
            "--arm",
            "base",
            str(shards),
            "--arm",
            "wide",
            str(shards),
            "train.batch_size=16",
        ]
    )
    assert rc == 0
    bench = json.loads(out.read_text())
    assert bench["reference"] == "base" and not bench["reference_pinned"]
    assert bench["cpu"] == cpu_features.cpu_description()  # this machine's model and bf16 instructions
    assert (
        len(bench["arms"]["base"]["alone"]) == 1
        and bench["reference_seconds"]["full"] == bench["arms"]["base"]["alone"][0]["full"]
    )
    # Two rounds, each the arm in lock-step with the reference: both costs of both, every round.
    assert len(bench["arms"]["base"]["rounds"]) == 2 and len(bench["arms"]["wide"]["rounds"]) == 2
    assert all(set(r) == {"arm", "reference"} for r in bench["arms"]["wide"]["rounds"])
    for arm in bench["arms"].values():
        assert arm["step_seconds"] > 0 and arm["short_step_seconds"] > 0
    assert bench["arms"]["base"]["ratio"] == {"full": 1.0, "short": 1.0}
    # The arm's time over the reference's beside it (not inverted), from the recorded rounds: a property of the
    # arithmetic, not of this machine's load (twice the batch read 0.78x in one round under a load of 8).
    wide = bench["arms"]["wide"]
    ratios = sorted(r["arm"]["full"] / r["reference"]["full"] for r in wide["rounds"])
    assert wide["ratio"]["full"] == pytest.approx(sum(ratios) / 2)  # the median of two

    kept_path = tmp_path / "kept" / "costs.json"
    kept = levers_costs.merge({}, bench)
    assert kept["reference_seconds"] == bench["reference_seconds"] and set(kept["arms"]) == {"base", "wide"}
    wide = kept["arms"]["wide"]
    assert levers_costs.flags(kept, "wide") == [
        "--set",
        f"train.step_seconds={wide['step_seconds']}",
        "--set",
        f"train.short_step_seconds={wide['short_step_seconds']}",
    ]
    with pytest.raises(SystemExit, match="no kept step cost for arm deep"):
        levers_costs.flags(kept, "deep")
    # A later benchmark must have run with the kept reference pinned; an arm measured again is replaced, the old kept.
    with pytest.raises(SystemExit, match="run it with --reference pinned"):
        levers_costs.merge(kept, {**bench, "reference_seconds": {"full": 9.0, "short": 9.0}})
    again = levers_costs.merge(kept, {**bench, "arms": {"wide": {**bench["arms"]["wide"], "step_seconds": 1.0}}})
    assert again["arms"]["wide"]["step_seconds"] == 1.0 and again["superseded"][0]["arm"] == "wide"
    # Through the command line, as levers_cpu.sh calls it.
    script = REPO / "experiments" / "common" / "levers_costs.py"
    done = subprocess.run(
        [sys.executable, str(script), "merge", str(kept_path), str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    flags = subprocess.run(
        [sys.executable, str(script), "flags", str(kept_path), "wide"], capture_output=True, text=True
    )
    assert flags.stdout.split() == levers_costs.flags(kept, "wide")
    ref = subprocess.run([sys.executable, str(script), "reference", str(kept_path)], capture_output=True, text=True)
    assert [float(x) for x in ref.stdout.split()] == [
        bench["reference_seconds"]["full"],
        bench["reference_seconds"]["short"],
    ]


def test_one_arm_is_timed_alone_and_its_costs_are_the_median_of_those_runs(tmp_path, capsys):
    # A recipe's own costs (experiments/hour-recipe): no lock-step partner, so nothing for --reference to pin.
    shards = write_tiny_shards(tmp_path / "shards")
    out = tmp_path / "costs.json"
    # A batch-size ramp is the run's business (each step counts its share): the benchmark times full steps.
    arm = ["--arm", "hour", str(shards), "train.batch_ramp.start=2", "train.batch_ramp.fraction=0.5"]
    for pairing, says in (
        (["--reference", "0.5", "0.4"], "nothing for --reference to pin"),
        (["--rounds", "2"], "--rounds needs a second arm"),
    ):
        with pytest.raises(SystemExit):
            step_costs.main(["--out", str(out), "--common", *COMMON, *arm, *pairing])
        assert says in capsys.readouterr().err
    assert (
        step_costs.main(["--out", str(out), "--common", *COMMON, "--steps", "5", "--skip", "1", "--alone", "3", *arm])
        == 0
    )
    bench = json.loads(out.read_text())
    hour = bench["arms"]["hour"]
    assert (
        set(bench["arms"]) == {"hour"} and len(hour["alone"]) == 3 and hour["rounds"] == [] and bench["rounds_run"] == 0
    )
    median = sorted(run["full"] for run in hour["alone"])[1]
    assert hour["step_seconds"] == step_costs.figures(median) == step_costs.figures(bench["reference_seconds"]["full"])


def test_a_ratio_measured_on_another_cpu_is_kept_only_when_asked_and_then_marked():
    arm = {
        "step_seconds": 0.4,
        "short_step_seconds": 0.3,
        "ratio": {"full": 0.6, "short": 0.6},
        "ratio_range": {"full": [0.6, 0.6], "short": [0.6, 0.6]},
    }
    bench = {
        "reference": "base",
        "reference_seconds": {"full": 0.66, "short": 0.64},
        "when": "t",
        "load_before": [0.1],
        "load_after": [0.1],
        "cores": 2,
        "omp_num_threads": "2",
        "steps": 5,
        "rounds_run": 1,
        "cpu": "AMD EPYC; bf16: avx512_bf16",
        "arms": {"base": {**arm, "step_seconds": 0.66}, "bf16": arm},
    }
    kept = levers_costs.merge({}, bench)
    assert levers_costs.reference_cpu(kept) == "AMD EPYC; bf16: avx512_bf16"
    xeon = {**bench, "cpu": "Intel Xeon; bf16: amx_bf16, avx512_bf16", "arms": {"combined": arm}}
    with pytest.raises(SystemExit, match="measured on AMD EPYC; bf16: avx512_bf16, this benchmark on Intel Xeon"):
        levers_costs.merge(kept, xeon)
    marked = levers_costs.merge(kept, xeon, across_cpus=True)["arms"]["combined"]["measured"]
    assert marked["cpu"].startswith("Intel Xeon") and marked["reference_cpu"].startswith("AMD EPYC")
    assert "reference_cpu" not in levers_costs.merge(kept, {**bench, "arms": {"bf16": arm}})["arms"]["bf16"]["measured"]
    # Costs kept before CPUs were recorded say so, and a benchmark that records one is another CPU to them.
    old = {**kept, "arms": {"base": {**kept["arms"]["base"], "measured": {"when": "t"}}}}
    with pytest.raises(SystemExit, match="measured on a CPU not recorded"):
        levers_costs.merge(old, bench)


def test_the_transfer_table_sets_each_arms_ratio_on_another_cpu_beside_the_kept_one(tmp_path):
    def costs(cpu, ratios):
        arm = lambda r: {
            "step_seconds": r,
            "short_step_seconds": r,
            "ratio": {"full": r, "short": r / 2},  # noqa: E731
            "ratio_range": {"full": [r, r], "short": [r, r]},
            "measured": {"when": "t", "cpu": cpu},
        }
        return {
            "reference": "baseline",
            "reference_seconds": {"full": 1.0, "short": 1.0},
            "arms": {"baseline": arm(1.0), **{name: arm(r) for name, r in ratios.items()}},
        }

    kept = tmp_path / "costs.json"
    kept.write_text(json.dumps(costs("EPYC", {"tiny": 0.2, "bf16": 0.65, "never-again": 1.2})))
    (tmp_path / "xeon").mkdir()
    (tmp_path / "xeon" / "costs.json").write_text(json.dumps(costs("Xeon", {"tiny": 0.25, "bf16": 0.65})))
    text = levers_costs.transfer(kept, tmp_path)
    assert (
        "| tiny | 0.200 (0.100) | 0.250 (0.125) | +25% |" in text
        and "| bf16 | 0.650 (0.325) | 0.650 (0.325) | +0% |" in text
    )
    assert "never-again" not in text and "(EPYC)" in text and "`step-costs/xeon/` (Xeon)" in text


def test_a_modelled_arm_pairs_only_with_a_baseline_on_the_same_modelled_clock():
    kept = {
        "reference": "baseline",
        "reference_seconds": {"full": 0.6, "short": 0.3},
        "arms": {"baseline": {"step_seconds": 0.6, "short_step_seconds": 0.3}},
    }
    modelled = {"clock": "modelled", "step_seconds": 0.6, "short_step_seconds": 0.3}
    assert levers_costs.series_problem(kept, {"runs": [{"seed": 0, "budget": modelled}] * 2}) is None
    wall = levers_costs.series_problem(kept, {"runs": [{"seed": 0, "budget": {"steps": 1885}}]})
    assert "ran on the wall clock" in wall
    other = levers_costs.series_problem(kept, {"runs": [{"seed": 1, "budget": {**modelled, "step_seconds": 0.5}}]})
    assert "not the same clock" in other


def test_the_steps_a_modelled_budget_buys_are_counted_as_the_loop_counts_them():
    # tests/train/test_budget.py's modelled run: 1 s, a quarter of it in 1/16-s pieces, then 1/8-s steps: 4 + 6.
    assert levers_costs.steps_bought(0.125, 0.0625, budget=1.0, short_fraction=0.25) == 10
    assert levers_costs.steps_bought(1.0, 1.0, budget=10.0, short_fraction=0.5) == 10


def test_bad_arguments_are_one_line_before_any_timing(tmp_path, capsys):
    shards = write_tiny_shards(tmp_path / "shards")
    arms = ["--arm", "base", str(shards), "--arm", "typo", str(shards), "train.batch_sise=16"]
    assert step_costs.main(["--out", str(tmp_path / "c.json"), "--common", *COMMON, *arms]) == 2
    assert "batch_sise" in capsys.readouterr().err and not (tmp_path / "c.json").exists()
    (tmp_path / "folder").mkdir()
    good = ["--arm", "base", str(shards), "--arm", "wide", str(shards), "train.batch_size=16"]
    assert step_costs.main(["--out", str(tmp_path / "folder"), "--common", *COMMON, *good]) == 2
    for bad in (
        ["--alone", "0"],
        ["--skip", "-1"],
        ["--reference", "0.5", "0"],
        ["--reference", "0.5", "0.4", "--alone", "2"],
    ):
        with pytest.raises(SystemExit):
            step_costs.main(["--out", str(tmp_path / "c.json"), "--common", *COMMON, *good, *bad])
    assert not (tmp_path / "c.json").exists()


def test_an_arm_may_be_a_compare_strategy_with_its_masking_settings():
    s = step_costs.arm_settings(COMMON, ["strategy=uniform@0.3"], steps=5)
    assert s.masking.strategy == "uniform" and s.masking.mask_prob == 0.3
    ht = step_costs.arm_settings(COMMON, ["strategy=mapnet-ht-lite"], steps=5)
    assert ht.masking.strategy == "mapnet" and ht.masking.mapnet.train_every == 4
    # Timed as a budget run of 5 short and 5 whole steps, each counted 1 s.
    assert (ht.train.time_budget, ht.train.step_seconds, ht.train.short_seq.fraction) == ("10s", 1.0, 0.5)


def test_the_kept_file_refuses_a_cost_that_would_mean_the_wall_clock_and_says_when_nothing_is_kept(tmp_path):
    kept = {
        "reference": "baseline",
        "reference_seconds": {"full": 0.6, "short": 0.3},
        "arms": {
            "baseline": {"step_seconds": 0.6, "short_step_seconds": 0.3},
            "zero": {"step_seconds": 0.0, "short_step_seconds": 0.3},
        },
    }
    with pytest.raises(SystemExit, match="arm zero: step costs must be positive numbers"):
        levers_costs.flags(kept, "zero")
    script = REPO / "experiments" / "common" / "levers_costs.py"
    none = subprocess.run(
        [sys.executable, str(script), "reference", str(tmp_path / "absent.json")], capture_output=True
    )
    assert none.returncode == levers_costs.NONE_YET == 3
    (tmp_path / "broken.json").write_text("{not json")
    broken = subprocess.run(
        [sys.executable, str(script), "reference", str(tmp_path / "broken.json")], capture_output=True, text=True
    )
    assert broken.returncode == 1 and "not a readable JSON file" in broken.stderr and "Traceback" not in broken.stderr


def test_the_table_and_the_search_agree_on_the_same_step_arms():
    script = (REPO / "experiments" / "hour-levers" / "levers_cpu.sh").read_text()
    line = next(line for line in script.splitlines() if line.startswith("SAME_STEP="))
    assert tuple(line.split('"')[1].split()) == levers_costs.SAME_STEP
