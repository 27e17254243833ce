"""Sampling designs: exact inclusion probabilities, HT unbiasedness by enumeration, the mixture bound."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
import torch

from mapnet_cli.masking import designs
from mapnet_cli.masking.mapnet.sampling import importance_weights, log_importance_ratio


def systematic_set_probabilities(pi: list[float]) -> dict[frozenset, float]:
    """Exact P(S) of randomised systematic PPS: every order (uniform over n!) x the pieces of U in [0, 1)."""
    n, K = len(pi), round(sum(pi))
    out: dict[frozenset, float] = {}
    orders = list(itertools.permutations(range(n)))
    for order in orders:
        cum = [0.0]
        for i in order:
            cum.append(cum[-1] + pi[i])
        cum = [c * K / cum[-1] for c in cum]  # exactly K at the end, as the sampler rescales
        # The selection changes only where U + j crosses a cumulative sum: U's breakpoints are their fractional parts.
        cuts = sorted({0.0, 1.0, *(c - math.floor(c) for c in cum if 0 < c - math.floor(c) < 1)})
        for lo, hi in zip(cuts, cuts[1:]):
            u = (lo + hi) / 2
            chosen = set()
            for j in range(K):
                point = u + j
                chosen.add(next(order[a] for a in range(n) if cum[a] <= point < cum[a + 1]))
            key = frozenset(chosen)
            out[key] = out.get(key, 0.0) + (hi - lo) / len(orders)
    return out


def gumbel_top_k_set_probabilities(p: list[float], K: int) -> dict[frozenset, float]:
    """Exact P(S) of K sequential draws without replacement from p (what Gumbel-top-k samples)."""
    out: dict[frozenset, float] = {}
    for seq in itertools.permutations(range(len(p)), K):
        prob, left = 1.0, 1.0
        for i in seq:
            prob *= p[i] / left
            left -= p[i]
        out[frozenset(seq)] = out.get(frozenset(seq), 0.0) + prob
    return out


PROPOSAL = [0.40, 0.25, 0.15, 0.12, 0.08]  # a clearly non-uniform proposal over n = 5 positions
LOSSES = [0.3, 2.0, 1.1, 4.5, 0.7]


def test_inclusion_probabilities_sum_to_k_are_capped_and_proportional():
    scores = torch.tensor([[8.0, 1.0, 1.0, 1.0, 1.0, 0.0], [1.0, 2.0, 3.0, 4.0, 0.0, 0.0]])
    k = torch.tensor([2, 3])
    pi = designs.inclusion_probabilities(scores, k)
    assert pi.sum(1).tolist() == pytest.approx([2.0, 3.0])
    assert float(pi.max()) <= 1.0
    # Row 0: position 0 would get 8/12 * 2 > 1, so it is certain and the rest share 1 equally.
    assert pi[0].tolist() == pytest.approx([1.0, 0.25, 0.25, 0.25, 0.25, 0.0])
    # Row 1: 3 * (4 / 10) > 1 -> certain; the other 2 split as 1 : 2 : 3.
    assert pi[1].tolist() == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0, 0.0, 0.0])


def test_systematic_pps_has_exactly_the_stated_inclusion_probabilities_by_enumeration():
    k = torch.tensor([2])
    pi = designs.inclusion_probabilities(torch.tensor([PROPOSAL]), k)[0].tolist()
    q = systematic_set_probabilities(pi)
    assert sum(q.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(len(s) == 2 for s in q)  # exactly K distinct positions, always
    for i in range(5):
        assert sum(p for s, p in q.items() if i in s) == pytest.approx(pi[i], abs=1e-12)
    # The random order makes every pair possible: second-order probabilities > 0 (HT variance estimable).
    assert len(q) == math.comb(5, 2)


def test_ht_weights_are_unbiased_for_a_non_uniform_proposal_and_the_paper_weight_is_not():
    """E_S[(1/K) sum_{i in S} w_i l_i] = mean l exactly; the clipped sequence ratio misses it on the same case."""
    K, n = 2, 5
    target = sum(LOSSES) / n  # = E over uniform K-subsets of the mean loss over the subset
    uniform = sum(sum(LOSSES[i] for i in s) / K for s in itertools.combinations(range(n), K)) / math.comb(n, K)
    assert uniform == pytest.approx(target)

    pi = designs.inclusion_probabilities(torch.tensor([PROPOSAL]), torch.tensor([K]))
    q = systematic_set_probabilities(pi[0].tolist())
    ht = 0.0
    for s, prob in q.items():
        chosen = torch.zeros(1, n, dtype=torch.bool)
        chosen[0, list(s)] = True
        w = designs.ht_weights(pi, chosen, torch.tensor([K]), torch.ones(1, n, dtype=torch.bool))[0].double()
        ht += prob * sum(w[i].item() * LOSSES[i] for i in s) / K
    assert ht == pytest.approx(target, abs=1e-6)

    # The paper: Gumbel-top-k from the proposal, per-sequence weight clip((1/n)^K / prod p, 0.8, 1.2).
    log_p = torch.tensor([PROPOSAL], dtype=torch.float64).log()
    paper = 0.0
    for s, prob in gumbel_top_k_set_probabilities(PROPOSAL, K).items():
        chosen = torch.zeros(1, n, dtype=torch.bool)
        chosen[0, list(s)] = True
        w = importance_weights(log_importance_ratio(log_p, chosen, torch.ones(1, n, dtype=torch.bool)), "clipped", 0.2)
        paper += prob * float(w) * sum(LOSSES[i] for i in s) / K
    assert abs(paper - target) > 0.1  # measured: 1.452 vs 1.720
    # docs/masking.md quotes this case's two numbers: they are what the enumeration gives now.
    page = (Path(__file__).resolve().parents[2] / "docs" / "masking.md").read_text(encoding="utf-8")
    quoted = re.search(r"clipped weight on Gumbel-top-k masks gives (\d\.\d\d) instead of (\d\.\d\d)", page)
    assert quoted and quoted.groups() == (f"{paper:.2f}", f"{target:.2f}")


def test_equal_inclusion_probabilities_give_uniform_masking_with_unit_weights():
    pi = [0.4] * 5
    q = systematic_set_probabilities(pi)
    assert all(p == pytest.approx(1 / math.comb(5, 2)) for p in q.values()) and len(q) == 10
    chosen = torch.tensor([[True, False, True, False, False]])
    w = designs.ht_weights(
        torch.tensor([pi], dtype=torch.float64), chosen, torch.tensor([2]), torch.ones(1, 5, dtype=torch.bool)
    )
    assert w[0, chosen[0]].tolist() == pytest.approx([1.0, 1.0])


def test_sampling_frequencies_match_pi_and_every_draw_has_k_positions():
    g = torch.Generator().manual_seed(0)
    B, T = 20_000, 12
    scores = torch.rand(1, T, generator=g).pow(3).expand(B, T)
    eligible = torch.ones(B, T, dtype=torch.bool)
    eligible[:, -2:] = False
    scores = torch.where(eligible, scores, torch.zeros(()))
    k = torch.full((B,), 4)
    pi = designs.inclusion_probabilities(scores, k)
    chosen = designs.systematic_sample(pi, torch.rand(B, T, generator=g), torch.rand(B, generator=g))
    assert chosen.sum(1).eq(4).all()
    assert not chosen[:, -2:].any()
    freq = chosen.double().mean(0)
    se = (pi[0] * (1 - pi[0]) / B).sqrt()
    assert ((freq - pi[0]).abs() <= 4 * se + 1e-9).all()


def test_mixture_bounds_every_weight_by_one_over_alpha():
    g = torch.Generator().manual_seed(1)
    B, T, alpha = 256, 40, 0.25
    logits = torch.randn(B, T, generator=g) * 6  # a very peaked proposal
    eligible = torch.rand(B, T, generator=g) < 0.9
    scores = torch.where(eligible, logits.softmax(-1), torch.zeros(()))
    k = torch.floor(eligible.sum(1) * 0.15 + 0.5).long().clamp(min=1)
    pi = designs.mix_with_uniform(designs.inclusion_probabilities(scores, k), eligible, k, alpha)
    assert pi.sum(1).tolist() == pytest.approx(k.double().tolist())
    chosen = designs.systematic_sample(pi, torch.rand(B, T, generator=g), torch.rand(B, generator=g))
    assert chosen.sum(1).eq(k).all() and not (chosen & ~eligible).any()
    w = designs.ht_weights(pi, chosen, k, eligible)
    assert float(w.max()) <= 1 / alpha + 1e-5
    without = designs.ht_weights(designs.inclusion_probabilities(scores, k), chosen, k, eligible)
    assert float(without.max()) > 1 / alpha  # the bound is the mixture's doing


def test_weighted_sequence_losses_match_a_dense_computation():
    g = torch.Generator().manual_seed(2)
    mask = torch.rand(3, 7, generator=g) < 0.4
    mask[:, 0] = True
    losses = torch.rand(3, 7, generator=g)
    weights = torch.rand(3, 7, generator=g) + 0.5
    rows = mask.nonzero()[:, 0]
    got = designs.weighted_sequence_losses(losses[mask], rows, weights[mask], mask.sum(1))
    want = (losses * weights * mask).sum(1) / mask.sum(1)
    assert torch.allclose(got, want)


def test_closed_form_capping_matches_the_iterative_definition():
    """Take every position whose share exceeds 1 with certainty, rescale the rest, repeat: the closed
    form must give the same pi on random rows with heavy tails, K up to n."""
    g = torch.Generator().manual_seed(3)
    for _ in range(50):
        T = int(torch.randint(2, 30, (1,), generator=g))
        s = torch.rand(4, T, generator=g, dtype=torch.float64).pow(8) + 1e-9
        k = torch.randint(1, T + 1, (4,), generator=g)
        want = torch.empty_like(s)
        for b in range(4):
            certain = torch.zeros(T, dtype=torch.bool)
            while True:
                free = torch.where(certain, 0.0, s[b])
                pi = torch.where(certain, 1.0, free * (k[b] - certain.sum()) / free.sum())
                if not (pi > 1 + 1e-12).any():
                    break
                certain |= pi > 1
            want[b] = pi.clamp(max=1.0)
        got = designs.inclusion_probabilities(s, k)
        assert torch.allclose(got, want, atol=1e-9), (got, want)
        assert torch.allclose(got.sum(1), k.double())


def test_a_start_at_the_top_of_the_unit_interval_never_hits_a_zero_probability_position():
    """U + K' - 1 can round up to the last cumulative sum; the hit must still be a position with pi > 0."""
    pi = torch.tensor([[0.5, 0.5, 0.5, 0.5, 0.0, 0.0]], dtype=torch.float64).expand(64, 6)
    order = torch.rand(64, 6, generator=torch.Generator().manual_seed(4))
    for u in (1 - 2.0**-53, 1 - 2.0**-50, 0.0):
        chosen = designs.systematic_sample(pi, order, torch.full((64,), u, dtype=torch.float64))
        assert chosen.sum(1).eq(2).all() and not chosen[:, 4:].any()


def test_weights_count_every_eligible_position_even_where_pi_is_zero():
    pi = torch.tensor([[0.6, 0.4, 0.0, 0.0]], dtype=torch.float64)
    chosen = torch.tensor([[True, False, False, False]])
    w = designs.ht_weights(pi, chosen, torch.tensor([1]), torch.ones(1, 4, dtype=torch.bool))
    assert w[0, 0].item() == pytest.approx(0.25 / 0.6)  # K/n with n = 4 eligible, not the 2 with pi > 0
