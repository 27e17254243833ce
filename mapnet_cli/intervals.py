"""Intervals over seeds: the one definition every table uses (compare, finetune-glue, probes).

mean_ci([6.71, 6.76, 6.73])   # {"mean": ..., "ci95": [lo, hi], "n": 3}; no interval from one value
"""

from __future__ import annotations

import math

import numpy as np


def t_quantile_975(dof: int) -> float:
    """Two-sided 95% Student-t quantile, exact for integer dof (Abramowitz & Stegun 26.7.3-4 + bisection)."""

    def central(t: float) -> float:  # P(|T| < t)
        theta = math.atan(t / math.sqrt(dof))
        c2, s = math.cos(theta) ** 2, math.sin(theta)
        if dof % 2 == 0:
            term, total = 1.0, 1.0
            for k in range(2, dof, 2):
                term *= c2 * (k - 1) / k
                total += term
            return s * total
        if dof == 1:
            return 2 * theta / math.pi
        term, total = 1.0, 1.0
        for k in range(3, dof, 2):
            term *= c2 * (k - 1) / k
            total += term
        return 2 / math.pi * (theta + s * math.cos(theta) * total)

    lo, hi = 0.0, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if central(mid) < 0.95 else (lo, mid)
    return (lo + hi) / 2


def mean_ci(values: list[float]) -> dict:
    """Mean and a 95% t-interval over seeds (n-1 dof); no interval from one value."""
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    if len(x) < 2:
        return {"mean": mean, "ci95": None, "n": len(x)}
    half = t_quantile_975(len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": len(x)}


__all__ = ["t_quantile_975", "mean_ci"]
