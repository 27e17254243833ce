"""Section J's tables (experiments/common/syntax_tables.py): the README's rule, and the 5-gram figure on a half."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "experiments" / "common"))

import blimp_halves  # noqa: E402
import syntax_tables  # noqa: E402


@pytest.mark.parametrize(
    ("deltas", "taken"),
    [
        ([0.010, 0.004, 0.006], True),  # ahead on every seed, +0.67 points on the mean
        ([0.010, -0.001, 0.012], False),  # one seed behind
        ([0.004, 0.004, 0.004], False),  # ahead on every seed, but +0.4 points
        ([0.005, 0.005, 0.005], True),  # exactly the threshold
    ],
)
def test_the_rule_takes_a_lever_ahead_on_every_seed_by_half_a_point(deltas, taken):
    assert syntax_tables.rule(deltas)[0] is taken


def test_the_five_gram_of_a_half_is_the_mean_of_its_published_scores():
    choose = blimp_halves.halves(blimp_halves.paradigm_rows(blimp_halves.BLIMP))["choose"]
    rows = [json.loads(line) for line in (blimp_halves.BLIMP / "models_summary.jsonl").read_text().splitlines()]
    field = {uid: f for f, _, uid in blimp_halves.paradigm_rows(blimp_halves.BLIMP)}
    scores = {r["UID"]: r["ngram"] for r in rows if r.get("UID") in choose}
    syntax = [s for uid, s in scores.items() if field[uid] == "syntax"]
    mean, mean_syntax = syntax_tables.five_gram(choose)
    assert len(scores) == len(choose)
    assert mean == pytest.approx(sum(scores.values()) / len(scores))
    assert mean_syntax == pytest.approx(sum(syntax) / len(syntax))
