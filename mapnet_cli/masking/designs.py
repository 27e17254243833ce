"""Fixed-size masks with exact inclusion probabilities, and Horvitz-Thompson weights.

    pi = inclusion_probabilities(scores, k)                      # (B, T): sum_i pi_i = K, 0 <= pi_i <= 1
    pi = mix_with_uniform(pi, eligible, k, alpha)                # defensive mixture: every weight <= 1/alpha
    chosen = systematic_sample(pi, rng.uniform(T), rng.uniform(1)[:, 0])   # exactly K positions
    w = ht_weights(pi, chosen, k, eligible)                      # (K/n) / pi_i at chosen positions

Why: the paper's set-level ratio degenerates once the proposal learns anything (E log r ~ -K KL(p || U)), while
Horvitz-Thompson (1952) needs only each position's pi_i = P(i in S):

    L_HT(S) = (1/K) sum_{i in S} w_i l_i,   w_i = (K/n) / pi_i   =>   E_S[L_HT] = (1/n) sum_i l_i,

uniform K-masking's expected loss, for any proposal (caveat: l_i is treated as a function of the position only),
drawn by randomised systematic PPS: exact pi_i and exactly K positions, from the sequence's keyed stream.
The derivation, the caveat, why this design and the mixture: docs/internals.md#maskingdesignspy.
"""

from __future__ import annotations

import torch


def inclusion_probabilities(scores: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """pi (B, T) float64 proportional to `scores` (>= 0; 0 off the eligible set), capped at 1, with sum_i pi_i = k_b.

    Proportional-to-size with capping: positions whose share K s_i / sum s would exceed 1 are
    taken with certainty and the rest share the remaining budget in proportion to their scores.
    Closed form (no loop, no device sync): sort the scores in decreasing order and take the
    smallest c with s_(c) (K - c) <= sum_{j >= c} s_(j) — the first position that fits once the c
    before it are certain; those c get pi = 1, the rest pi_j = (K - c) s_j / sum_{j >= c} s_(j).
    Needs at least K positive scores per row (callers mix with uniform or floor the proposal);
    zero-score positions get pi = 0.
    """
    s = scores.to(torch.float64).clamp(min=0)
    B, T = s.shape
    k = k.to(torch.float64)[:, None]
    sorted_s, order = s.sort(dim=1, descending=True, stable=True)
    tail = sorted_s.flip(1).cumsum(1).flip(1)  # sum_{j >= c} s_(j)
    c = torch.arange(T, device=s.device, dtype=torch.float64)[None]
    fits = sorted_s * (k - c) <= tail
    fits = torch.cat([fits, torch.ones(B, 1, dtype=torch.bool, device=s.device)], 1)  # c = T: all certain
    first = fits.to(torch.int8).argmax(1, keepdim=True)  # smallest c that fits
    tail_at = torch.cat([tail, torch.zeros(B, 1, dtype=torch.float64, device=s.device)], 1).gather(1, first)
    scale = torch.where(tail_at > 0, (k - first) / tail_at.clamp(min=1e-300), torch.zeros_like(tail_at))
    pi_sorted = torch.where(c < first, torch.ones_like(sorted_s), (sorted_s * scale).clamp(max=1.0))
    return torch.empty_like(pi_sorted).scatter_(1, order, pi_sorted)


def mix_with_uniform(pi: torch.Tensor, eligible: torch.Tensor, k: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha K/n + (1 - alpha) pi on the eligible positions (0 elsewhere): every HT weight <= 1/alpha."""
    if alpha <= 0.0:
        return pi
    n = eligible.sum(1, keepdim=True).clamp(min=1).to(torch.float64)
    uniform = torch.where(eligible, k[:, None].to(torch.float64) / n, torch.zeros((), dtype=torch.float64))
    return alpha * uniform + (1.0 - alpha) * pi.to(torch.float64)


def systematic_sample(pi: torch.Tensor, order_uniforms: torch.Tensor, start_uniforms: torch.Tensor) -> torch.Tensor:
    """Exactly round(sum_i pi_i) positions per row, position i with probability pi_i (see the module doc).

    `order_uniforms` (B, T) in [0, 1) give the random order (argsort), `start_uniforms`
    (B,) the systematic start U. Positions with pi_i = 1 are taken outright, so that
    floating-point rounding of the cumulative sums can never take one twice. Points are kept
    strictly below the last cumulative sum, so a hit always lands on a position with pi_i > 0.
    Shapes are static (at most T points per row): no device sync.
    """
    B, T = pi.shape
    pi = pi.to(torch.float64)
    certain = pi >= 1.0
    rest = torch.where(certain, torch.zeros_like(pi), pi)
    order = order_uniforms.argsort(dim=1, stable=True)
    cum = rest.gather(1, order).cumsum(1)
    k_rest = rest.sum(1).round()
    # Rescale so the last cumulative sum is K' (removes the drift of summing T floats).
    cum = cum * torch.where(cum[:, -1] > 0, k_rest / cum[:, -1].clamp(min=1e-300), torch.zeros_like(k_rest))[:, None]
    j = torch.arange(T, dtype=torch.float64, device=pi.device)
    points = start_uniforms.to(torch.float64).clamp(0.0, 1.0)[:, None] + j[None]
    top = torch.nextafter(cum[:, -1:], torch.zeros_like(cum[:, -1:]))
    points = torch.minimum(points, top)
    valid = (j[None] < k_rest[:, None]) & (cum[:, -1:] > 0)
    # The first position (in the random order) whose cumulative sum exceeds the point.
    hit = torch.searchsorted(cum, points.contiguous(), right=True).clamp(max=T - 1)
    hits = torch.zeros(B, T, dtype=torch.int64, device=pi.device)
    hits.scatter_add_(1, order.gather(1, hit), valid.to(torch.int64))  # invalid points add 0 anywhere
    return (hits > 0) | certain


def ht_weights(pi: torch.Tensor, chosen: torch.Tensor, k: torch.Tensor, eligible: torch.Tensor) -> torch.Tensor:
    """(B, T) float32 weights (K/n) / pi_i at `chosen` positions, 0 elsewhere; n = eligible positions per row."""
    pi = pi.to(torch.float64)
    n = eligible.sum(1, keepdim=True).clamp(min=1).to(torch.float64)
    w = (k[:, None].to(torch.float64) / n) / pi.clamp(min=1e-300)
    return torch.where(chosen, w, torch.zeros_like(w)).to(torch.float32)


def weighted_sequence_losses(
    token_losses: torch.Tensor, rows: torch.Tensor, token_weights: torch.Tensor, counts: torch.Tensor
) -> torch.Tensor:
    """(B,) sum_{i in S_b} w_i l_i / K_b from the model's flat, row-major token losses (0 where K_b = 0)."""
    B = counts.shape[0]
    out = torch.zeros(B, dtype=token_losses.dtype, device=token_losses.device)
    out = out.index_add(0, rows, token_losses * token_weights.to(token_losses.dtype))
    return out / counts.clamp(min=1).to(token_losses.dtype)


__all__ = ["inclusion_probabilities", "mix_with_uniform", "systematic_sample", "ht_weights", "weighted_sequence_losses"]
