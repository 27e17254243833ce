"""Training to a wall-clock budget (train/budget.py): the schedule by time, the stopping rule, resume, refusals.

The loop's clock is injected: a fake one that advances a fixed tick per reading makes every step last exactly
one tick, so the steps a budget buys and each step's learning rate are known in advance, with no sleeping
and no timed assertion. One run uses the real clock, for what only it can show (it stops, and says so).
"""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest
import torch
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.settings import resolve
from mapnet_cli.settings.duration import parse_duration
from mapnet_cli.train import pretrain
from mapnet_cli.train.budget import Budget, TimeLR, lr_factor_at
from mapnet_cli.train.optim import lr_factor
from mapnet_cli.train.run_loader import load_run

TINY = [
    "train.recipe=paper",
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.eval_every=5",
    "train.eval_sequences=16",
    "train.checkpoint_every=5",
    "optim.warmup.steps=0",
    "optim.lr=3e-3",
    "logging.log_every=1",
    "logging.progress=false",
]
TICK = 0.125  # a power of two: sums of ticks are exact, so the step that spends the budget is known


class FakeClock:
    """Reads `tick` seconds later at every call: the loop reads it at a step's start and end, so each step
    lasts exactly one tick (and nothing between steps counts)."""

    def __init__(self, tick: float = TICK):
        self.now, self.tick = 1000.0, tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


def budget_settings(*extra: str):
    # The paper recipe's warm-up under a budget is 1% of it, which a 1-second budget's first tick spends (refused:
    # test_a_budget_too_small_for_its_warm_up_is_refused...). Runs whose warm-up is not the point train without
    # one; a test that gives optim.warmup.fraction overrides this.
    return resolve(None, {"model": {"preset": "tiny"}}, [*TINY, "optim.warmup.fraction=0", *extra])


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


def metrics(run: Path, kind: str = "train") -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


def weights(ckpt: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(ckpt / "model.safetensors"))


# ---------------------------------------------------------------- durations and the schedule, exactly
def test_durations_read_strictly():
    assert [parse_duration(t) for t in ("90s", "20m", "2h", "1h30m", "1.5h", "0.5s")] == [
        90,
        1200,
        7200,
        5400,
        5400,
        0.5,
    ]
    for bad, says in (
        ("0s", "longer than zero"),
        ("-5m", "longer than zero"),
        ("abc", "with units"),
        ("nan", "with units"),
        ("inf", "with units"),
        ("90", "with units"),
        ("1e3s", "with units"),
        ("30m1h", "with units"),
        ("", "with units"),
    ):
        with pytest.raises(MapnetError, match=says):
            parse_duration(bad, "train.time_budget")


def test_the_time_schedule_is_the_step_schedule_with_time_for_steps():
    # Past the warm-up, position k / S in a step run is position T / B in a budget run: the same factor.
    S, W = 1000, 100
    for k in (100, 250, 999, 1000):
        assert lr_factor_at(k / S, W / S) == pytest.approx(lr_factor(k, W, S), rel=1e-12, abs=1e-15)
    # The warm-up, by hand: f = p / w, then (1 - p) / (1 - w), 0 at the end and after it; constant stays 1.
    assert [lr_factor_at(p, 0.2) for p in (0.0, 0.1, 0.2, 0.6, 1.0, 1.5)] == pytest.approx([0, 0.5, 1, 0.5, 0, 0])
    assert [lr_factor_at(p, 0.0) for p in (0.0, 0.25)] == [1.0, 0.75]
    assert [lr_factor_at(p, 0.2, "constant") for p in (0.1, 0.5, 1.0)] == [0.5, 1.0, 1.0]


def test_the_schedule_sets_every_groups_rate_from_the_time_spent():
    groups = [
        {"params": [torch.nn.Parameter(torch.zeros(2))], "lr": 1e-3},
        {"params": [torch.nn.Parameter(torch.zeros(2))], "lr": 4e-3},
    ]  # MAP-Net's own rate is a second group
    opt = torch.optim.AdamW(groups, lr=1e-3)
    sched = TimeLR(
        opt, Budget(seconds=10.0, text="10s", warmup_fraction=0.2, schedule="linear", short_seq_fraction=0.0)
    )
    for spent, factor in ((0.0, 0.0), (1.0, 0.5), (2.0, 1.0), (6.0, 0.5), (9.0, 0.125), (10.0, 0.0), (12.0, 0.0)):
        sched.at(spent)
        assert [g["lr"] for g in opt.param_groups] == pytest.approx([1e-3 * factor, 4e-3 * factor], abs=1e-18)
    sched.step()  # train_step's call after the update: the rate stays what the clock set
    assert opt.param_groups[1]["lr"] == 0.0


# ---------------------------------------------------------------- runs on the fake clock
def test_a_budget_run_stops_when_its_training_time_is_spent(shards, tmp_path):
    s = budget_settings(
        "train.time_budget=1s", "optim.warmup.fraction=0.25", "train.short_seq.len=8", "train.short_seq.fraction=0.25"
    )
    last = pretrain(s, shards, tmp_path / "run", clock=FakeClock())
    steps = round(1.0 / TICK)  # each step lasts one tick: the budget buys exactly 8
    assert last.name == f"step-{steps:08d}" and checkpoint.latest_checkpoint(tmp_path / "run") == last
    train = metrics(tmp_path / "run")
    assert [r["step"] for r in train] == list(range(1, steps + 1))
    assert [r["elapsed"] for r in train] == [k * TICK for k in range(1, steps + 1)]
    # Update k + 1's rate from the position p = k * TICK / B spent before it: warm-up to 0.25, decay to 1.
    expected = [3e-3 * (p / 0.25 if p < 0.25 else (1 - p) / 0.75) for p in (k * TICK for k in range(steps))]
    assert [r["lr"] for r in train] == pytest.approx(expected, abs=1e-15)
    # The sequence-length warm-up: 8-token pieces (1 masked token each, 4 a sequence) while p < 0.25, i.e. the
    # first two steps; whole 32-token sequences (5 masked) from the step that starts at p = 0.25.
    assert [r["masked_tokens"] for r in train] == [8 * 4] * 2 + [8 * 5] * (steps - 2)
    assert load_run(last, weights=False).state("cpu")["short_seq_end"] == 2
    assert metrics(tmp_path / "run", "eval")[-1]["step"] == steps  # the final state is evaluated
    info = json.loads((tmp_path / "run" / "run.json").read_text())["budget"]
    assert info["steps"] == steps and info["spent_seconds"] == 1.0 and info["finished"] and info["time_budget"] == "1s"


def test_resume_inside_a_budget_counts_the_time_already_spent(shards, tmp_path):
    s = budget_settings(
        "train.time_budget=1s", "optim.warmup.fraction=0.25", "train.short_seq.len=8", "train.short_seq.fraction=0.25"
    )
    straight = pretrain(s, shards, tmp_path / "a", clock=FakeClock())
    stopped = pretrain(s, shards, tmp_path / "b", stop_at=3, clock=FakeClock())
    assert stopped.name == "step-00000003"
    assert json.loads((tmp_path / "b" / "run.json").read_text())["budget"]["finished"] is False
    assert load_run(stopped, weights=False).state("cpu")["elapsed"] == 3 * TICK
    resumed = pretrain(s, shards, tmp_path / "b", resume=True, clock=FakeClock())
    # It stops when the total over both starts reaches the budget, at the step an uninterrupted run stops at;
    # on a clock this regular the schedules agree too, so the weights do, bit for bit.
    assert resumed.name == straight.name == "step-00000008"
    assert json.loads((tmp_path / "b" / "run.json").read_text())["budget"]["spent_seconds"] == 1.0
    assert [r["lr"] for r in metrics(tmp_path / "b")] == [r["lr"] for r in metrics(tmp_path / "a")]
    wa, wb = weights(straight), weights(resumed)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    # A finished budget is finished: resuming it trains nothing more.
    assert pretrain(s, shards, tmp_path / "b", resume=True, clock=FakeClock()) == resumed
    assert metrics(tmp_path / "b")[-1]["step"] == 8


def test_a_modelled_clock_counts_each_step_its_cost_whatever_the_wall_clock_reads(shards, tmp_path):
    # Full steps count 1/8 s, warm-up steps (8-token pieces) 1/16 s: powers of two, so every sum is exact.
    full, short, budget, s_frac, w_frac = 0.125, 0.0625, 1.0, 0.25, 0.25
    s = budget_settings(
        "train.time_budget=1s",
        f"optim.warmup.fraction={w_frac}",
        "train.short_seq.len=8",
        f"train.short_seq.fraction={s_frac}",
        f"train.step_seconds={full}",
        f"train.short_step_seconds={short}",
    )
    slow = pretrain(s, shards, tmp_path / "slow", clock=FakeClock(tick=0.3))
    fast = pretrain(s, shards, tmp_path / "fast", clock=FakeClock(tick=0.01))
    # budget.py's count: the warm-up is the steps that start before s * B, the rest fill B with full steps.
    n_short = math.ceil(s_frac * budget / short)
    n_full = math.ceil((budget - n_short * short) / full)
    assert (n_short, n_full) == (4, 6)
    counted = [short] * n_short + [full] * n_full
    starts = [sum(counted[:k]) for k in range(len(counted))]
    assert slow.name == fast.name == f"step-{n_short + n_full:08d}"
    train = metrics(tmp_path / "slow")
    assert [r["elapsed"] for r in train] == [start + cost for start, cost in zip(starts, counted)]
    assert [r["lr"] for r in train] == pytest.approx(
        [3e-3 * (p / w_frac if p < w_frac else (1 - p) / (1 - w_frac)) for p in starts], abs=1e-15
    )
    assert [r["masked_tokens"] for r in train] == [8 * 4] * n_short + [8 * 5] * n_full
    assert load_run(slow, weights=False).state("cpu")["short_seq_end"] == n_short
    info = json.loads((tmp_path / "slow" / "run.json").read_text())["budget"]
    assert info["clock"] == "modelled" and info["step_seconds"] == full and info["short_step_seconds"] == short
    assert info["spent_seconds"] == budget and info["steps"] == n_short + n_full
    assert info["wall_seconds"] == pytest.approx(0.3 * (n_short + n_full))  # what the steps took, beside it
    # The machine's speed changed nothing: the same steps, rates and weights, bit for bit.
    assert [r["lr"] for r in metrics(tmp_path / "fast")] == [r["lr"] for r in train]
    ws, wf = weights(slow), weights(fast)
    assert all(torch.equal(ws[k], wf[k]) for k in ws)
    # The wall clock's run of the same budget records which clock it was.
    pretrain(budget_settings("train.time_budget=1s"), shards, tmp_path / "wall", clock=FakeClock())
    assert json.loads((tmp_path / "wall" / "run.json").read_text())["budget"]["clock"] == "wall"


def test_a_modelled_budget_resumes_exactly_and_its_costs_cannot_change_on_resume(shards, tmp_path):
    costs = ["train.step_seconds=0.125", "train.short_step_seconds=0.0625"]
    s = budget_settings(
        "train.time_budget=1s",
        "optim.warmup.fraction=0.25",
        "train.short_seq.len=8",
        "train.short_seq.fraction=0.25",
        *costs,
    )
    straight = pretrain(s, shards, tmp_path / "a", clock=FakeClock(tick=0.3))
    pretrain(s, shards, tmp_path / "b", stop_at=3, clock=FakeClock(tick=0.01))
    resumed = pretrain(s, shards, tmp_path / "b", resume=True, clock=FakeClock(tick=0.7))
    # Whatever the clocks read, the counted seconds decide: the resumed run is the uninterrupted one, bit for bit.
    assert resumed.name == straight.name == "step-00000010"
    wa, wb = weights(straight), weights(resumed)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    info = json.loads((tmp_path / "b" / "run.json").read_text())["budget"]
    assert info["wall_seconds"] == pytest.approx(3 * 0.01 + 7 * 0.7)  # the wall time of both starts, summed
    flags = [
        a
        for kv in [
            *TINY,
            "optim.warmup.fraction=0.25",
            "train.short_seq.len=8",
            "train.short_seq.fraction=0.25",
            "train.step_seconds=0.25",
            "train.short_step_seconds=0.0625",
        ]
        for a in ("--set", kv)
    ]
    res = CliRunner().invoke(
        app,
        [
            "pretrain",
            str(shards),
            "--out",
            str(tmp_path / "b"),
            "--preset",
            "tiny",
            "--resume",
            "--time-budget",
            "1s",
            *flags,
        ],
    )
    assert isinstance(res.exception, MapnetError) and "train.step_seconds" in str(res.exception), res.output


def test_a_run_cannot_switch_between_steps_and_a_budget_on_resume(shards, tmp_path):
    pretrain(budget_settings("train.steps=2"), shards, tmp_path / "steps")
    with pytest.raises(MapnetError, match="trained by steps"):
        pretrain(budget_settings("train.time_budget=1s"), shards, tmp_path / "steps", resume=True, clock=FakeClock())
    pretrain(budget_settings("train.time_budget=1s"), shards, tmp_path / "budget", stop_at=2, clock=FakeClock())
    with pytest.raises(MapnetError, match="trained to a train.time_budget"):
        pretrain(budget_settings("train.steps=4"), shards, tmp_path / "budget", resume=True)


# ---------------------------------------------------------------- refusals, one line each
def test_a_budget_its_first_step_spends_is_refused_without_a_checkpoint(shards, tmp_path):
    with pytest.raises(MapnetError, match="train.time_budget 1s was spent by the first step alone .1 s of training."):
        pretrain(budget_settings("train.time_budget=1s"), shards, tmp_path / "run", clock=FakeClock(tick=1.0))
    assert checkpoint.latest_checkpoint(tmp_path / "run") is None
    # Two steps are a run: the first 0.5 s, the second spends the budget.
    assert (
        pretrain(budget_settings("train.time_budget=1s"), shards, tmp_path / "two", clock=FakeClock(tick=0.5)).name
        == "step-00000002"
    )


def test_a_budget_too_small_for_its_warm_up_is_refused_without_a_checkpoint(shards, tmp_path):
    # The first update is at rate 0; a first step (0.125 s) that spends the warm-up's share (0.1 s, or exactly
    # 0.125 s: the next update would start at the peak) leaves no warm-up.
    for fraction, share in (("0.1", "0.1"), ("0.125", "0.125")):
        with pytest.raises(
            MapnetError,
            match=rf"train.time_budget 1s is too short for its warm-up: the first step alone "
            rf"\(0.125 s of training\) spent the warm-up's share \(optim.warmup.fraction "
            rf"{fraction}: {share} s\)",
        ):
            pretrain(
                budget_settings("train.time_budget=1s", f"optim.warmup.fraction={fraction}"),
                shards,
                tmp_path / f"w{fraction}",
                clock=FakeClock(),
            )
        assert checkpoint.latest_checkpoint(tmp_path / f"w{fraction}") is None
    # A warm-up of two steps runs (the second at rate 0.125 / 0.25 of the peak), and so does none at all.
    assert (
        pretrain(
            budget_settings("train.time_budget=1s", "optim.warmup.fraction=0.25"),
            shards,
            tmp_path / "two",
            clock=FakeClock(),
        ).name
        == "step-00000008"
    )
    assert (
        pretrain(
            budget_settings("train.time_budget=1s", "optim.warmup.fraction=0"),
            shards,
            tmp_path / "none",
            clock=FakeClock(tick=0.5),
        ).name
        == "step-00000002"
    )
    # On the modelled clock the first step counts its cost, whatever the wall clock read.
    with pytest.raises(MapnetError, match="too short for its warm-up"):
        pretrain(
            budget_settings(
                "train.time_budget=1s",
                "optim.warmup.fraction=0.25",
                "train.step_seconds=0.3",
                "train.short_seq.fraction=0",
                "train.short_seq.len=0",
            ),
            shards,
            tmp_path / "modelled",
            clock=FakeClock(tick=0.01),
        )


def test_bad_budgets_and_step_counted_schedules_are_refused_in_one_line(shards, tmp_path):
    runner = CliRunner()
    base = ["pretrain", str(shards), "--out", str(tmp_path / "run"), "--preset", "tiny", "--print-settings"]
    for budget, says in (
        ("0s", "longer than zero"),
        ("-5m", "longer than zero"),
        ("abc", "with units"),
        ("nan", "with units"),
    ):
        res = runner.invoke(
            app,
            [
                *base,
                f"--time-budget={budget}",
                "--set",
                "optim.warmup.fraction=0.1",
                "--set",
                "train.short_seq.fraction=0.1",
            ],
        )
        assert isinstance(res.exception, MapnetError) and says in str(res.exception), (budget, res.output)
        assert "\n" not in str(res.exception) and "warm-up" not in str(res.exception)  # only what is wrong
    # Under a budget the recipe gives its warm-ups as fractions of it (recipes.FAST_BUDGET_FRACTIONS), so a plain
    # `--time-budget` runs; a warm-up counted in steps beside them would be silently ignored, so it is refused.
    res = runner.invoke(app, [*base, "--time-budget", "20m"])
    assert res.exit_code == 0, res.output
    shown = tomllib.loads(res.output)
    assert shown["optim"]["warmup"] == {"steps": 0, "fraction": 0.14}
    assert shown["train"]["short_seq"] == {"len": 16, "steps": 0, "fraction": 0.23}
    for given, says in (
        (["--set", "optim.warmup.steps=300"], "optim.warmup.steps (300) counts steps"),
        (["--set", "train.short_seq.steps=500"], "train.short_seq.steps (500) counts steps"),
    ):
        res = runner.invoke(app, [*base, "--time-budget", "20m", *given])
        assert isinstance(res.exception, MapnetError) and says in str(res.exception), (given, res.output)
    # A recipe that is not the preset's own, and a config file's budget, are laid out in time the same way.
    paper = runner.invoke(app, [*base, "--time-budget", "20m", "--recipe", "paper", "--set", "model.norm=post"])
    assert paper.exit_code == 0 and tomllib.loads(paper.output)["optim"]["warmup"]["fraction"] == 0.01, paper.output
    (tmp_path / "budget.toml").write_text('[train]\ntime_budget = "20m"\n')
    filed = runner.invoke(app, [*base, "--config", str(tmp_path / "budget.toml")])
    assert filed.exit_code == 0 and tomllib.loads(filed.output)["optim"]["warmup"]["fraction"] == 0.14, filed.output
    # Without the recipe's fractions a step-counted warm-up is still named with the settings that fix it.
    res = runner.invoke(
        app, [*base, "--time-budget", "20m", "--set", "optim.warmup.fraction=0", "--set", "optim.warmup.steps=300"]
    )
    assert isinstance(res.exception, MapnetError) and "optim.warmup.fraction" in str(res.exception), res.output
    for extra, says in (
        (["--set", "optim.warmup.fraction=1.0"], "optim.warmup.fraction must be in [0, 1)"),
        (["--set", "optim.warmup.fraction=1.5"], "optim.warmup.fraction must be in [0, 1)"),
        (["--set", "train.short_seq.fraction=1.0"], "train.short_seq.fraction must be in [0, 1)"),
        (["--steps", "500"], "two stopping rules"),
        (["--masking", "mapnet"], "masking.mapnet.explore_steps"),
    ):
        fractions = {"optim.warmup.fraction": "0.1", "train.short_seq.fraction": "0.1"}
        given = [a for a in extra if "=" in a]
        sets = [
            x for k, v in fractions.items() if not any(g.startswith(k) for g in given) for x in ("--set", f"{k}={v}")
        ]
        res = runner.invoke(app, [*base, "--time-budget", "20m", *sets, *extra])
        assert isinstance(res.exception, MapnetError) and says in str(res.exception), (extra, res.output)
    # The modelled clock's costs: positive, both where both kinds of step are taken, never silently ignored.
    for extra, says in (
        (["--set", "train.step_seconds=-1"], "train.step_seconds must be >= 0"),
        (["--set", "train.step_seconds=0.5"], "give train.short_step_seconds"),
        (["--set", "train.short_step_seconds=0.1"], "needs train.step_seconds"),
        (
            [
                "--set",
                "train.step_seconds=0.5",
                "--set",
                "train.short_step_seconds=0.1",
                "--set",
                "train.short_seq.fraction=0",
                "--set",
                "train.short_seq.len=0",
            ],
            "would be ignored",
        ),
    ):
        res = runner.invoke(app, [*base, "--time-budget", "20m", *extra])
        assert isinstance(res.exception, MapnetError) and says in str(res.exception), (extra, res.output)
    modelled = runner.invoke(
        app, [*base, "--time-budget", "20m", "--set", "train.step_seconds=0.5", "--set", "train.short_step_seconds=0.2"]
    )
    assert modelled.exit_code == 0 and "step_seconds = 0.5" in modelled.output, modelled.output
    # The fractions and costs belong to a budget: without one they would silently do nothing.
    for key in ("optim.warmup.fraction", "train.short_seq.fraction", "train.step_seconds", "train.short_step_seconds"):
        res = runner.invoke(app, [*base, "--set", f"{key}=0.1"])
        assert isinstance(res.exception, MapnetError) and f"{key} applies to a train.time_budget" in str(res.exception)
    # A good one is shown, as every setting is.
    ok = runner.invoke(
        app,
        [
            *base,
            "--time-budget",
            "1h30m",
            "--set",
            "optim.warmup.fraction=0.05",
            "--set",
            "train.short_seq.fraction=0.1",
        ],
    )
    assert ok.exit_code == 0 and 'time_budget = "1h30m"' in ok.output
    assert tomllib.loads(ok.output)["optim"]["warmup"]["fraction"] == 0.05


# ---------------------------------------------------------------- the real clock
@pytest.mark.slow
def test_a_real_five_second_budget_stops_checkpoints_and_records_its_steps(synthetic_shards, tmp_path):
    # 5 s, not less: on a loaded 2-core machine a first step has taken 4.8 s, and a budget its first step
    # spends is refused; no learning-rate warm-up, as one whose share that first step spends is refused too
    # (the schedule by time is tested exactly above, with a fake clock).
    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(
        app,
        [
            "pretrain",
            str(synthetic_shards),
            "--out",
            str(out),
            "--preset",
            "tiny",
            "--time-budget",
            "5s",
            "--set",
            "optim.warmup.fraction=0",
            "--set",
            "train.short_seq.fraction=0.2",
            "--set",
            "train.batch_size=8",
            "--set",
            "model.max_position=64",
            "--set",
            "shard.max_seq_len=64",
            "--set",
            "train.eval_sequences=16",
            "--set",
            "train.eval_every=0",
            "--set",
            "train.checkpoint_every=0",
            "--set",
            "logging.progress=false",
        ],
    )
    assert res.exit_code == 0, res.output
    info = json.loads((out / "run.json").read_text())["budget"]
    last = checkpoint.latest_checkpoint(out)
    train = metrics(out)
    assert info["finished"] and info["seconds"] == 5.0 and info["spent_seconds"] >= 5.0
    assert last.name == f"step-{info['steps']:08d}" and train[-1]["step"] == info["steps"]
    # The checkpoint holds the seconds run.json and the last metrics line report (what --resume counts from).
    assert (
        load_run(last, weights=False).state("cpu")["elapsed"]
        == train[-1]["elapsed"]
        == pytest.approx(info["spent_seconds"], abs=1e-3)
    )
    assert metrics(out, "eval")[-1]["step"] == info["steps"]


# Two processes sharing rank 0's clock: tests/test_distributed.py (its run rides in that module's torchrun job).


def test_a_modelled_budget_knows_its_last_step_from_the_first_one_resume_included(shards, tmp_path):
    # Costs whose sums are not exact in binary (0.1 s, 0.07 s), a warm-up and a batch ramp: the progress total a
    # modelled budget reports at every step is the step it ends at, as the loop's own additions reach it.
    s = budget_settings(
        "train.time_budget=2s",
        "optim.warmup.fraction=0.25",
        "train.short_seq.len=8",
        "train.short_seq.fraction=0.3",
        "train.step_seconds=0.1",
        "train.short_step_seconds=0.07",
        "train.batch_ramp.start=2",
        "train.batch_ramp.fraction=0.5",
    )
    totals: list[tuple[int, int]] = []

    def report(kind: str, data: dict) -> None:
        if kind == "step":
            totals.append((data["step"], data["total"]))

    last = pretrain(s, shards, tmp_path / "a", clock=FakeClock(tick=0.3), on_report=report)
    steps = int(last.name.split("-")[1])
    assert steps == json.loads((tmp_path / "a" / "run.json").read_text())["budget"]["steps"]
    assert len(totals) == steps and {total for _, total in totals} == {steps}
    totals.clear()
    pretrain(s, shards, tmp_path / "b", stop_at=7, clock=FakeClock(tick=0.01), on_report=report)
    assert {total for _, total in totals} == {7}  # --stop-at's step is where this start ends
    totals.clear()
    pretrain(s, shards, tmp_path / "b", resume=True, clock=FakeClock(tick=0.01), on_report=report)
    assert totals[0][0] == 8 and {total for _, total in totals} == {steps}
