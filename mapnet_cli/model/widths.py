"""Widths the model derives from its settings, without torch: read by `--init-from` and `shard` checks,
which must not pay for importing torch (`mapnet shard --init-from` never trains)."""

from __future__ import annotations


def default_intermediate(hidden: int, block: str = "bert") -> int:
    """The feed-forward width `model.intermediate = 0` means: 4H for BERT's; for the modern block's GeGLU,
    whose input matrix is twice as wide, 8H/3 rounded up to a multiple of 32 — BERT's parameters and FLOPs."""
    return 4 * hidden if block == "bert" else -(-8 * hidden // (3 * 32)) * 32


__all__ = ["default_intermediate"]
