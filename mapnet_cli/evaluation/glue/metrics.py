"""GLUE's metrics in numpy, and how they are folded into one score.

Every metric returns a fraction (accuracy 0.87, not 87); reports multiply by 100. Definitions follow the GLUE
evaluation (sklearn / scipy semantics):

- Matthews correlation (CoLA): (TP·TN − FP·FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)), 0 when any factor of the
  denominator is 0 (sklearn's convention: a constant prediction or a one-class gold set carries no correlation).
- F1 (MRPC, QQP): of the positive class 1; 0 when there are no true positives.
- Pearson and Spearman (STS-B): Spearman is Pearson on ranks, ties sharing their average rank (scipy's
  `rankdata(method="average")`). A constant side (a collapsed model predicting one score) leaves the correlation
  undefined (scipy: NaN); here it is 0, as MCC's, so one collapsed seed lowers a configuration's mean, not erases it.

The GLUE score (`glue_score`): the mean over the paper's "9 tasks" columns (CoLA, SST-2, MRPC, STS-B, QQP, MNLI-m,
MNLI-mm, QNLI, RTE), a two-metric entry counting their mean, as the GLUE leaderboard does; WNLI is reported but
not averaged, as in the paper (and BERT, RoBERTa, ELECTRA). docs/evaluation.md#fine-tuning-on-glue says more.
"""

from __future__ import annotations

import math

import numpy as np


def accuracy(pred: np.ndarray, gold: np.ndarray) -> float:
    pred, gold = np.asarray(pred), np.asarray(gold)
    if gold.size == 0:
        return float("nan")
    return float(np.mean(pred == gold))


def f1_positive(pred: np.ndarray, gold: np.ndarray, positive: int = 1) -> float:
    pred, gold = np.asarray(pred) == positive, np.asarray(gold) == positive
    tp = int(np.sum(pred & gold))
    fp = int(np.sum(pred & ~gold))
    fn = int(np.sum(~pred & gold))
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def matthews_corrcoef(pred: np.ndarray, gold: np.ndarray) -> float:
    pred, gold = np.asarray(pred).astype(bool), np.asarray(gold).astype(bool)
    # Python ints: the products overflow int64 only for absurd sizes, but floats would lose exactness.
    tp = int(np.sum(pred & gold))
    tn = int(np.sum(~pred & ~gold))
    fp = int(np.sum(pred & ~gold))
    fn = int(np.sum(~pred & gold))
    denom = (tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)
    return 0.0 if denom == 0 else (tp * tn - fp * fn) / math.sqrt(denom)


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < 2 or not (np.isfinite(x).all() and np.isfinite(y).all()):
        return 0.0  # a diverged model's NaN predictions: no correlation, as above
    dx, dy = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(np.dot(dx, dx)) * float(np.dot(dy, dy)))
    if denom == 0.0:
        return 0.0
    # Clip: rounding can push a perfect correlation a hair past 1.
    return float(np.clip(np.dot(dx, dy) / denom, -1.0, 1.0))


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span."""
    x = np.asarray(x)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    # Start index of each run of equal values in sorted order.
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    ends = np.r_[starts[1:], xs.size]  # exclusive
    run_rank = (starts + ends + 1) / 2.0  # mean of 1-based ranks starts+1 .. ends
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(run_rank, ends - starts)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return 0.0  # NaN would otherwise rank as the largest value
    return pearson(average_ranks(x), average_ranks(y))


# ---------------------------------------------------------------- per task
METRICS = {
    "mcc": matthews_corrcoef,
    "acc": accuracy,
    "f1": f1_positive,
    "pearson": pearson,
    "spearman": spearman,
}


def compute(metric_names: tuple[str, ...], pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    return {name: METRICS[name](pred, gold) for name in metric_names}


def entry_score(metrics: dict[str, float]) -> float:
    """One number for one GLUE entry: the mean of its metrics (GLUE's rule for two-metric tasks)."""
    values = list(metrics.values())
    return float(np.mean(values)) if values else float("nan")


# The paper's nine entries, in GLUE's column order. WNLI is not among them.
SCORE_ENTRIES = ("CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI-m", "MNLI-mm", "QNLI", "RTE")


def glue_score(entry_scores: dict[str, float]) -> tuple[float, list[str]]:
    """Unweighted mean over the paper's entries that are present; returns (score, entries used).

    A partial run (say only RTE and SST-2) gets the mean of what was run, and
    the list says so: a score over 2 entries is not comparable with one over 9.
    """
    used = [e for e in SCORE_ENTRIES if e in entry_scores and not math.isnan(entry_scores[e])]
    if not used:
        return float("nan"), []
    return float(np.mean([entry_scores[e] for e in used])), used
