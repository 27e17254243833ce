"""Section K's tables (experiments/common/wall_tables.py): the kernel's rule, a half's BLiMP row computed by hand,
and the kept runs' tokens a second."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments" / "common"))

import wall_tables  # noqa: E402


def costs_doc(rounds: list[float], median: float) -> dict:
    arm = {
        "rounds": [{"arm": {"full": 0.3 * r}, "reference": {"full": 0.3}} for r in rounds],
        "ratio": {"full": median},
        "ratio_range": {"full": [min(rounds), max(rounds)]},
    }
    return {"arms": {"math": arm}, "rounds_run": len(rounds)}


@pytest.mark.parametrize(
    ("rounds", "median", "taken"),
    [
        ([0.90, 0.92, 0.89, 0.91, 0.90], 0.90, True),  # the kept measurement's shape
        ([0.90, 0.92, 1.01, 0.91, 0.90], 0.91, False),  # one round slower
        ([0.98, 0.97, 0.99, 0.98, 0.96], 0.98, False),  # faster every round, by too little
        ([0.97, 0.97, 0.97], 0.97, True),  # exactly the threshold
    ],
)
def test_the_kernel_joins_the_recipe_if_faster_in_every_round_by_three_percent(rounds, median, taken):
    assert wall_tables.kernel_rule(costs_doc(rounds, median))[0] is taken


def model(label: str, init: str, scores: dict[str, float], random: str | None = None) -> dict:
    m = {
        "label": label,
        "run": label.split("@")[0],
        "init": init,
        "paradigms": {uid: {"accuracy": a} for uid, a in scores.items()},
    }
    if random:
        m["controls"] = {"random": random}
    return m


def test_a_halfs_row_is_each_seeds_mean_over_its_paradigms_against_its_own_random_weights():
    doc = {
        "method": "pll",
        "data": {"pairs_per_paradigm": 0},
        "references": {"5-gram": {"paradigms": {"p1": 0.60, "p2": 0.70, "p3": 0.10}}},
        "models": [
            model("seed-0@9", "pretrained", {"p1": 0.70, "p2": 0.60, "p3": 0.0}, "random-init/seed-0"),
            model("seed-1@9", "pretrained", {"p1": 0.80, "p2": 0.70, "p3": 0.0}, "random-init/seed-1"),
            model("random-init/seed-0", "random", {"p1": 0.50, "p2": 0.50, "p3": 1.0}),
            model("random-init/seed-1", "random", {"p1": 0.60, "p2": 0.70, "p3": 1.0}),
            model("unigram", "unigram", {"p1": 0.40, "p2": 0.44, "p3": 1.0}),
        ],
    }
    (row,) = wall_tables.half_rows(doc, {"reporting": ["p1", "p2"]})
    cells = [c.strip() for c in row.strip("|").split("|")]
    # seed 0: (0.70 + 0.60) / 2 = 65.0, its random weights 50.0; seed 1: 75.0 against 65.0
    assert cells[:3] == ["pll", "reporting (2)", "65.0, 75.0"]
    assert cells[3].startswith("70.0 ± ")  # the mean of the two seeds
    assert cells[4:6] == ["50.0, 65.0", "+15.0, +10.0"]
    # the paired differences 15 and 10: mean 12.5, half-width t(1) 12.706 x sd 3.536 / sqrt(2) = 31.8
    assert cells[6] == "+12.5 ± 31.8" and cells[7] == "2"
    assert cells[8:] == ["42.0", "65.0", "yes"]  # unigram, the 5-gram on p1 and p2 only, 70.0 >= 65.0


def test_a_file_not_scored_on_every_pair_is_refused(tmp_path):
    doc = {"method": "pll", "data": {"pairs_per_paradigm": 200}, "models": [model("s@1", "pretrained", {"p": 1})]}
    (tmp_path / "blimp-final-pll.json").write_text(json.dumps(doc))
    with pytest.raises(SystemExit, match="200 pairs a paradigm"):
        wall_tables.blimp(tmp_path)


@pytest.mark.skipif(not (wall_tables.RAW / "runs").is_dir(), reason="no kept run of section K yet")
def test_the_kept_runs_tokens_a_second_are_their_steps_tokens_over_the_counted_seconds():
    table = wall_tables.runs()
    for run in sorted((wall_tables.RAW / "runs").glob("seed-*")):
        budget = json.loads((run / "run.json").read_text())["budget"]
        # the recipe's batch: 64 sequences of 64 tokens a step, the same tokens in the sequence-length warm-up
        expected = budget["steps"] * 64 * 64 / budget["spent_seconds"]
        assert f"| {budget['steps']:,} |" in table and f"| {expected:,.0f} |" in table


def kept_run(raw: Path, seed: int, steps: int, loss: float) -> None:
    run = raw / "runs" / f"seed-{seed}"
    run.mkdir(parents=True)
    budget = {"finished": True, "steps": steps, "spent_seconds": 3600}
    info = {"budget": budget, "cpu": "a test CPU", "threads": 2, "model": {"vocab_size": 4096}}
    (run / "run.json").write_text(json.dumps(info))
    lines = [{"kind": "unigram", "train_entropy": 7.0}, {"kind": "eval", "step": steps, "eval_loss": loss}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))


def test_the_answer_is_the_reporting_halfs_pll_against_the_5_gram_and_each_seeds_random_weights(tmp_path):
    cut = wall_tables.blimp_halves.halves(wall_tables.blimp_halves.paradigm_rows(wall_tables.blimp_halves.BLIMP))
    report, choose = cut["report"], cut["choose"]

    def scores(on_report: float, on_choose: float) -> dict[str, float]:
        return {**dict.fromkeys(report, on_report), **dict.fromkeys(choose, on_choose)}

    doc = {
        "method": "pll",
        "data": {"pairs_per_paradigm": 0},
        "references": {"5-gram": {"paradigms": scores(0.72, 0.50)}},
        "models": [
            model("seed-0@9", "pretrained", scores(0.70, 0.60), "random-init/seed-0"),
            model("seed-1@9", "pretrained", scores(0.74, 0.60), "random-init/seed-1"),
            model("random-init/seed-0", "random", scores(0.50, 0.50)),
            model("random-init/seed-1", "random", scores(0.52, 0.52)),
        ],
    }
    (tmp_path / "blimp-final-pll.json").write_text(json.dumps(doc))
    kept_run(tmp_path, 0, 13000, 3.5)
    kept_run(tmp_path, 1, 12000, 6.9)  # 0.1 nats under the unigram entropy: still on the plateau
    text = wall_tables.answer(tmp_path)
    assert (
        "13,000, 12,000 steps in its 60 minutes (2 seeds; 1 of 2 past the unigram plateau on the 4,096-token BPE"
        in text
    )
    # reporting half: 70 and 74, mean 72.0 (t(1) 12.706 x sd 2.83 / sqrt 2 = 25.4), the 5-gram 72.0 there: at it;
    # against their random weights 20 and 22: +21.0 ± 12.7, an interval above 0
    assert (
        "on the reporting half (22 paradigms, which chose nothing) 72.0 ± 25.4 (at or above the 5-gram's 72.0 on the "
        "same paradigms), trained − random-init +21.0 ± 12.7 (the interval excludes 0)" in text
    )
    # all 45: seed 0 (22 x 70 + 23 x 60) / 45 = 64.9, seed 1 66.8: mean 65.9 against the 5-gram's 60.8
    assert "on all 45 (the development set, which chose the recipe) 65.9 ± " in text
    assert "(at or above the 5-gram's 60.8 on the same paradigms)" in text
    assert "word-l2r" not in text  # not scored: no clause for it


def test_the_answer_without_random_weights_scored_says_so(tmp_path):
    cut = wall_tables.blimp_halves.halves(wall_tables.blimp_halves.paradigm_rows(wall_tables.blimp_halves.BLIMP))
    every = dict.fromkeys(cut["report"] + cut["choose"], 0.6)
    doc = {
        "method": "pll",
        "data": {"pairs_per_paradigm": 0},
        "references": {"5-gram": {"paradigms": every}},
        "models": [model("seed-0@9", "pretrained", every, "random-init/seed-0")],  # its control not in the file
    }
    (tmp_path / "blimp-final-pll.json").write_text(json.dumps(doc))
    kept_run(tmp_path, 0, 100, 3.5)
    text = wall_tables.answer(tmp_path)
    assert "0 seeds each paired" in text and text.count("no random-weight control scored") == 2


def test_the_modelled_clocks_figure_is_section_hs_three_seeds_on_all_45():
    pll = json.loads((wall_tables.MODELLED / "blimp-final-pll.json").read_text())
    trained = [m["accuracy"] for m in pll["models"] if m["init"] == "pretrained"]
    assert len(trained) == 3
    text = wall_tables.modelled()
    # section H's Xeon seeds each bought 7,976 steps on the modelled clock (0.4385 s a step)
    assert "7,976 steps and " in text and f"{100 * sum(trained) / 3:.1f} ± " in text and "(3 seeds)" in text
