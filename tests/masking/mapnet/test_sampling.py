"""Gumbel-top-k, importance weights and the exploration schedule against exact answers."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from mapnet_cli.masking.mapnet.sampling import (
    MAX_LOG_RATIO,
    exploration_coins,
    explore_probability,
    gumbel_top_k,
    importance_weights,
    log_importance_ratio,
    top_k_mask,
)

# Chi-square thresholds: the 0.999 quantiles for the degrees of freedom used below
# (scipy.stats.chi2.ppf(0.999, df)). A correct sampler fails each test with
# probability 1e-3 per seed; the seeds are fixed, so the tests are deterministic
# and were checked to pass. A sampler that ignores the proposal, or that draws
# with replacement, gives statistics in the hundreds or thousands (see the
# sanity assertions that the *wrong* distribution is rejected).
CHI2_999 = {4: 18.467, 9: 27.877}


def _chi2(observed: torch.Tensor, expected: torch.Tensor) -> float:
    return float(((observed - expected) ** 2 / expected).sum())


def test_k1_matches_the_proposal_chi_square():
    g = torch.Generator().manual_seed(0)
    probs = torch.tensor([0.05, 0.10, 0.15, 0.30, 0.40])
    draws = 40_000
    log_p = probs.log().expand(draws, -1)
    chosen = gumbel_top_k(log_p, torch.ones(draws, dtype=torch.long), torch.rand(draws, 5, generator=g))
    assert torch.equal(chosen.sum(1), torch.ones(draws, dtype=torch.long))
    counts = chosen.sum(0).double()
    assert _chi2(counts, probs.double() * draws) < CHI2_999[4]
    # The same counts are far from uniform: the test can tell a sampler that ignores p.
    assert _chi2(counts, torch.full((5,), draws / 5, dtype=torch.float64)) > 1000


def test_k_greater_than_1_never_repeats_and_never_picks_ineligible():
    g = torch.Generator().manual_seed(1)
    B, T = 256, 40
    eligible = torch.rand(B, T, generator=g) < 0.7
    eligible[:, 0] = False  # like [CLS]
    eligible[-3:] = False  # rows with nothing eligible
    eligible[-3, 5] = True  # ... and one with a single eligible position
    scores = torch.randn(B, T, generator=g) * 3
    log_p = torch.log_softmax(scores.masked_fill(~eligible, float("-inf")), 1)
    log_p[-2:] = float("-inf")
    n = eligible.sum(1)
    k = torch.clamp(torch.randint(1, 12, (B,), generator=g), max=n)
    chosen = gumbel_top_k(log_p, k, torch.rand(B, T, generator=g))
    assert torch.equal(chosen.sum(1), k)  # a bool mask has no repeats: exactly K distinct positions
    assert not (chosen & ~eligible).any()
    assert chosen[-3, 5] and chosen[-3].sum() == 1
    assert not chosen[-2:].any()


def test_without_replacement_inclusion_matches_exact_enumeration():
    """P(position i in the K-set) from enumerating every ordered draw without replacement."""
    probs = [0.05, 0.1, 0.15, 0.2, 0.5]
    n, K = len(probs), 2
    exact = [0.0] * n
    for order in itertools.permutations(range(n), K):
        p, left = 1.0, 1.0
        for i in order:
            p *= probs[i] / left
            left -= probs[i]
        for i in order:
            exact[i] += p
    assert math.isclose(sum(exact), K)
    draws = 40_000
    g = torch.Generator().manual_seed(2)
    log_p = torch.tensor(probs).log().expand(draws, -1)
    chosen = gumbel_top_k(log_p, torch.full((draws,), K), torch.rand(draws, n, generator=g))
    counts = chosen.sum(0).double()
    expected = torch.tensor(exact, dtype=torch.float64) * draws
    # Inclusion counts are not independent cells (they sum to K * draws), so use
    # per-position binomial z-scores: |z| < 4 for all 5 positions fails by chance
    # with probability ~3e-4.
    z = (counts - expected) / torch.sqrt(expected * (1 - expected / draws))
    assert z.abs().max() < 4, (counts, expected)
    # With-replacement inclusion 1-(1-p)^K is distinguishable: position 4 would be 0.75, not exact[4].
    naive = torch.tensor([1 - (1 - p) ** K for p in probs], dtype=torch.float64) * draws
    assert ((counts - naive) / torch.sqrt(naive)).abs().max() > 10


def test_top_k_mask_is_stable_on_ties():
    keys = torch.tensor([[1.0, 2.0, 2.0, 2.0, float("-inf")]], dtype=torch.float64)
    assert top_k_mask(keys, torch.tensor([2])).tolist() == [[False, True, True, False, False]]
    assert top_k_mask(keys, torch.tensor([5])).tolist() == [[True, True, True, True, False]]


def test_log_ratio_matches_hand_computation_and_weights_clip():
    # n = 4 eligible, K = 2 chosen with p = 0.5 and 0.1: r = (1/4)^2 / (0.5 * 0.1) = 1.25
    probs = torch.tensor([[0.0, 0.5, 0.1, 0.3, 0.1, 0.0]], dtype=torch.float64)
    eligible = probs > 0
    log_p = probs.log()
    chosen = torch.tensor([[False, True, True, False, False, False]])
    log_r = log_importance_ratio(log_p, chosen, eligible)
    assert math.isclose(float(log_r), -2 * math.log(4) - math.log(0.5) - math.log(0.1), rel_tol=1e-12)
    assert math.isclose(math.exp(float(log_r)), 1.25, rel_tol=1e-9)
    assert math.isclose(float(importance_weights(log_r, "clipped", 0.2)), 1.2, rel_tol=1e-6)
    assert math.isclose(float(importance_weights(log_r, "clipped", 0.3)), 1.25, rel_tol=1e-6)
    assert math.isclose(float(importance_weights(log_r, "unclipped", 0.2)), 1.25, rel_tol=1e-6)
    assert float(importance_weights(log_r, "none", 0.2)) == 1.0
    # Below 1 - eps: r = (1/4)^2 / (0.5 * 0.3) = 0.4167 -> 0.8
    chosen_low = torch.tensor([[False, True, False, True, False, False]])
    low = log_importance_ratio(log_p, chosen_low, eligible)
    assert math.isclose(float(importance_weights(low, "clipped", 0.2)), 0.8, rel_tol=1e-6)
    assert math.isclose(float(importance_weights(low, "unclipped", 0.2)), 0.0625 / 0.15, rel_tol=1e-6)


def test_uniform_proposal_gives_weight_one_and_many_weights_stay_in_bounds():
    eligible = torch.ones(3, 10, dtype=torch.bool)
    log_p = torch.full((3, 10), -math.log(10), dtype=torch.float64)
    chosen = gumbel_top_k(log_p, torch.tensor([1, 3, 10]), torch.rand(3, 10))
    log_r = log_importance_ratio(log_p, chosen, eligible)
    assert torch.allclose(log_r, torch.zeros(3, dtype=torch.float64), atol=1e-12)
    g = torch.Generator().manual_seed(3)
    log_r = torch.randn(10_000, generator=g, dtype=torch.float64) * 3
    w = importance_weights(log_r, "clipped", 0.1)
    assert w.min() >= 0.9 and w.max() <= 1.1
    assert ((w == 0.9) | (w == 1.1)).float().mean() > 0.9  # most of these ratios are far outside the band


def test_unclipped_weights_never_overflow():
    log_r = torch.tensor([1e4, -1e4, 0.0], dtype=torch.float64)
    w = importance_weights(log_r, "unclipped", 0.2)
    assert torch.isfinite(w).all()
    assert math.isclose(float(w[0]), math.exp(MAX_LOG_RATIO), rel_tol=1e-5)
    assert float(w[2]) == 1.0
    with pytest.raises(ValueError):
        importance_weights(log_r, "sometimes", 0.2)


def test_weights_are_constants():
    scores = torch.randn(2, 6, requires_grad=True)
    log_p = torch.log_softmax(scores, 1)
    chosen = torch.zeros(2, 6, dtype=torch.bool)
    chosen[:, :2] = True
    w = importance_weights(log_importance_ratio(log_p, chosen, torch.ones(2, 6, dtype=torch.bool)), "unclipped", 0.2)
    assert not w.requires_grad


def test_exploration_schedule_start_middle_end_after():
    assert explore_probability(0, 1000, 1.0, 0.33) == 1.0
    assert math.isclose(explore_probability(500, 1000, 1.0, 0.33), 0.665)
    assert math.isclose(explore_probability(1000, 1000, 1.0, 0.33), 0.33)
    assert math.isclose(explore_probability(5000, 1000, 1.0, 0.33), 0.33)
    # explore_steps shorter than the run: constant after it
    assert math.isclose(explore_probability(100, 1000, 1.0, 0.2, explore_steps=200), 0.6)
    assert math.isclose(explore_probability(200, 1000, 1.0, 0.2, explore_steps=200), 0.2)
    assert math.isclose(explore_probability(999, 1000, 1.0, 0.2, explore_steps=200), 0.2)


def test_exploration_coins_depend_only_on_the_sequence():
    slots = list(range(4000))
    whole = exploration_coins(7, 11, slots, 0.4)
    halves = torch.cat([exploration_coins(7, 11, slots[:1500], 0.4), exploration_coins(7, 11, slots[1500:], 0.4)])
    assert torch.equal(whole, halves)
    assert abs(whole.double().mean().item() - 0.4) < 0.03  # binomial sd ~0.008
    assert not torch.equal(whole, exploration_coins(7, 12, slots, 0.4))  # a new step, new coins
    assert not torch.equal(whole, exploration_coins(8, 11, slots, 0.4))  # a new seed, new coins
    assert exploration_coins(0, 0, slots, 1.0).all() and not exploration_coins(0, 0, slots, 0.0).any()
