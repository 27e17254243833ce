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
