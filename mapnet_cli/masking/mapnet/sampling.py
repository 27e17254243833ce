"""Sampling masks from a proposal: Gumbel-top-k, importance weights, exploration schedule.

    eligible = uniform.eligible_positions(ids, special_ids)
    log_p = proposal(ids, attention_mask, eligible)                 # -inf off `eligible`
    k = uniform.mask_counts(eligible.sum(1), 0.15)                   # round(0.15 n), >= 1
    chosen = gumbel_top_k(log_p, k, rng.uniform(T, device))
    w = importance_weights(log_importance_ratio(log_p, chosen, eligible), "clipped", 0.2)

Vectorised over the batch; randomness from per-sequence streams keyed by (seed, step, global batch slot)
(`masking.uniform.SequenceRNG` for the positions and the 80/10/10 replacement, `masking.uniform.mix_seed` for the
exploration coin), so a sequence's mask, coin and replacement never depend on the micro-batch or rank split.
The importance ratio is the paper's formula exactly (section 3.3), r(x^M) = (1/n)^K / prod_k p_prop(pos_k): an
approximation (the exact k-th pick without replacement has probability p(pos_k) / (1 - sum_{j<k} p(pos_j))),
exactly 1 at p = uniform, kept because the paper trains with it; the clipping to [1-eps, 1+eps] bounds its bias.
Why it is one: docs/masking.md#map-net-masking-mapnet ("The weight formula").
"""

from __future__ import annotations

import math

import torch

from ..uniform import mix_seed

# Domain of the exploration coin in `masking.uniform.mix_seed`, apart from the masks' own streams.
COIN_DOMAIN = 0x4D4150  # "MAP"

# Unclipped weights are exp(log r) with log r clamped to +-MAX_LOG_RATIO first.
# exp(30) ~ 1e13 is far beyond any useful weight yet far inside float32
# (max ~3.4e38, and a loss of ~10 times 1e13 per sequence stays finite), so the
# clamp only prevents inf/NaN; it never changes a weight that could matter.
MAX_LOG_RATIO = 30.0

# Uniforms from torch.rand lie in [0, 1); 0 would give an infinite Gumbel key.
_U_MIN = 2.0**-30


# ---------------------------------------------------------------- which positions, how many
def gumbel_keys(log_probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """log p_i + G_i with G_i = -log(-log u_i) ~ Gumbel(0, 1); float64, -inf where log p is -inf."""
    u = uniforms.to(torch.float64).clamp(_U_MIN, 1.0)  # torch.rand is < 1, so the key is never +inf
    return log_probs.detach().to(torch.float64) - torch.log(-torch.log(u))


def top_k_mask(keys: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Bool mask (B, T) of each row's k[b] largest finite keys.

    Rows have different K: every position's rank within its row is compared
    with that row's K, so there is no loop over the batch. The sort is stable,
    so equal keys go to the lower position (as in `masking.uniform.uniform_mask`).
    """
    order = keys.argsort(dim=1, descending=True, stable=True)
    ranks = torch.empty_like(order)
    ranks.scatter_(1, order, torch.arange(keys.shape[1], device=keys.device).expand_as(order))
    return (ranks < k[:, None]) & torch.isfinite(keys)


def gumbel_top_k(log_probs: torch.Tensor, k: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """K positions per row WITHOUT replacement from softmax(log_probs), as a bool mask (B, T).

    Gumbel-top-k (Vieira 2014; Kool et al. 2019): the K largest of
    log p_i + G_i, G_i ~ Gumbel(0, 1) i.i.d., are distributed exactly as K
    sequential draws without replacement. Positions with log p = -inf are never
    chosen. `uniforms` (B, T) in [0, 1) supply the randomness.
    """
    return top_k_mask(gumbel_keys(log_probs, uniforms), k)


# ---------------------------------------------------------------- importance weights
def log_importance_ratio(log_probs: torch.Tensor, chosen: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """log r = -K log n - sum_k log p(pos_k) per sequence (the paper's formula; see the module doc).

    Detached: the weight is a constant that multiplies the encoder's loss; it
    must not send gradient into MAP-Net (MAP-Net learns from its own objective).
    Sequences with nothing chosen get log r = 0.
    """
    log_probs = log_probs.detach().to(torch.float64)
    n = eligible.sum(dim=1).to(torch.float64)
    k = chosen.sum(dim=1).to(torch.float64)
    picked = torch.where(chosen, log_probs, torch.zeros_like(log_probs)).sum(dim=1)
    log_r = -k * torch.log(n.clamp(min=1.0)) - picked
    return torch.where(k > 0, log_r, torch.zeros_like(log_r))


def importance_weights(log_r: torch.Tensor, mode: str, clip_epsilon: float) -> torch.Tensor:
    """Per-sequence weights from log r: "clipped" (paper), "unclipped", or "none" (all 1). float32, detached."""
    log_r = log_r.detach()
    if mode == "none":
        w = torch.ones_like(log_r)
    elif mode == "unclipped":
        w = torch.exp(log_r.clamp(-MAX_LOG_RATIO, MAX_LOG_RATIO))
    elif mode == "clipped":
        # Clip in log space: the same result as clip(exp(log r)) but never overflows.
        w = torch.exp(log_r.clamp(math.log1p(-clip_epsilon), math.log1p(clip_epsilon)))
        w = w.clamp(1.0 - clip_epsilon, 1.0 + clip_epsilon)  # exact bounds despite exp/log rounding
    else:
        raise ValueError(f"unknown importance mode {mode!r}")
    return w.to(torch.float32)


# ---------------------------------------------------------------- exploration
def explore_probability(step: int, total_steps: int, start: float, end: float, explore_steps: int = 0) -> float:
    """p_t, the probability that a sequence is masked uniformly at optimizer step `step` (0-based).

    Linear from `start` at step 0 to `end` at step `explore_steps` (0: the
    whole run, `total_steps`), constant `end` afterwards — the paper's 100% ->
    33% over 1000k steps.
    """
    length = explore_steps if explore_steps > 0 else total_steps
    if length <= 0 or step >= length:
        return float(end)
    frac = max(step, 0) / length
    return float(start + (end - start) * frac)


def exploration_coins(seed: int, step: int, slots, p_uniform: float, device=None) -> torch.Tensor:
    """True where the sequence at global batch slot `slots[b]` of `step` is masked uniformly (probability p_uniform).

    One 53-bit uniform per sequence from `mix_seed(COIN_DOMAIN, seed, step, slot)`:
    a pure function of the sequence's identity, so the coin does not depend on
    the batch split, and it does not consume draws from the mask streams.
    """
    u = [(mix_seed(COIN_DOMAIN, seed, step, int(s)) >> 10) * 2.0**-53 for s in slots]
    return torch.tensor(u, dtype=torch.float64, device=device) < p_uniform


__all__ = [
    "COIN_DOMAIN",
    "MAX_LOG_RATIO",
    "gumbel_keys",
    "top_k_mask",
    "gumbel_top_k",
    "log_importance_ratio",
    "importance_weights",
    "explore_probability",
    "exploration_coins",
]
