"""GLUE metrics against values worked out by hand (see each comment)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mapnet_cli.evaluation.glue import metrics as M

PRED = np.array([1, 1, 0, 0, 1])
GOLD = np.array([1, 0, 0, 1, 1])  # tp=2 (0, 4), fp=1 (1), tn=1 (2), fn=1 (3)


def test_accuracy_and_f1_by_hand():
    assert M.accuracy(PRED, GOLD) == pytest.approx(3 / 5)
    assert M.f1_positive(PRED, GOLD) == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))  # 2/3
    # F1 is of class 1: swapping the classes changes it (tp=1, fp=1, fn=1 -> 1/2).
    assert M.f1_positive(1 - PRED, 1 - GOLD) == pytest.approx(0.5)
    assert M.f1_positive(np.zeros(5, int), GOLD) == 0.0  # no predicted positive: 0, not a division error


def test_matthews_by_hand_and_degenerate():
    # (tp*tn - fp*fn) / sqrt((tp+fp)(tp+fn)(tn+fp)(tn+fn)) = (2 - 1) / sqrt(3*3*2*2) = 1/6
    assert M.matthews_corrcoef(PRED, GOLD) == pytest.approx(1 / 6)
    assert M.matthews_corrcoef(GOLD, GOLD) == pytest.approx(1.0)
    assert M.matthews_corrcoef(1 - GOLD, GOLD) == pytest.approx(-1.0)
    # A constant prediction (a collapsed CoLA model) or a one-class gold set: 0 (sklearn's convention).
    assert M.matthews_corrcoef(np.ones(5, int), GOLD) == 0.0
    assert M.matthews_corrcoef(PRED, np.zeros(5, int)) == 0.0


def test_pearson_by_hand():
    # dx = (-1, 0, 1), dy = (-4/3, -1/3, 5/3): r = 3 / sqrt(2 * 42/9) = 9 / sqrt(84)
    assert M.pearson([1, 2, 3], [1, 2, 4]) == pytest.approx(9 / math.sqrt(84))
    assert M.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert M.pearson([2, 2, 2], [1, 2, 3]) == 0.0  # constant side: undefined, scored as no correlation
    assert M.pearson([1.0, float("nan"), 2.0], [1, 2, 3]) == 0.0


def test_average_ranks_share_ties():
    np.testing.assert_allclose(M.average_ranks(np.array([3, 1, 3, 3, 2])), [4, 1, 4, 4, 2])
    np.testing.assert_allclose(M.average_ranks(np.array([0.5, 0.5])), [1.5, 1.5])


def test_spearman_with_ties_by_hand():
    # ranks x = (1, 2.5, 2.5, 4), y = (1, 3, 2, 4); centred: (-1.5, 0, 0, 1.5), (-1.5, .5, -.5, 1.5)
    # rho = 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10)
    assert M.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(3 / math.sqrt(10))
    # Monotone but non-linear: Spearman 1, Pearson below 1.
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert M.spearman(x, x**3) == pytest.approx(1.0)
    assert M.pearson(x, x**3) < 0.99


def test_spearman_matches_brute_force_ranks():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 6, size=40).astype(float)  # many ties
    y = x + rng.normal(size=40)

    def naive_rank(v):  # rank = 1 + (# smaller) + (# equal - 1) / 2
        return np.array([1 + np.sum(v < a) + (np.sum(v == a) - 1) / 2 for a in v])

    rx, ry = naive_rank(x), naive_rank(y)
    expected = np.corrcoef(rx, ry)[0, 1]
    assert M.spearman(x, y) == pytest.approx(expected)


def test_entry_score_and_glue_aggregation():
    assert M.entry_score({"f1": 0.9, "acc": 0.8}) == pytest.approx(0.85)
    scores = {"CoLA": 0.5, "MRPC": 0.8, "WNLI": 0.1, "MNLI-m": 0.7, "MNLI-mm": 0.6}
    score, used = M.glue_score(scores)
    # WNLI is reported but not averaged; MNLI-m and MNLI-mm are two of the paper's nine entries.
    assert used == ["CoLA", "MRPC", "MNLI-m", "MNLI-mm"]
    assert score == pytest.approx((0.5 + 0.8 + 0.7 + 0.6) / 4)
    assert M.glue_score({"WNLI": 0.5}) == (pytest.approx(float("nan"), nan_ok=True), [])
    assert len(M.SCORE_ENTRIES) == 9
