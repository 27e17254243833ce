"""The estimators on synthetic two-level data with known answers: algebra, unbiasedness, intervals."""

from __future__ import annotations

import math

import pytest
import torch
from variance_fixtures import summarise_vectors

from mapnet_cli.evaluation.variance import estimator as est


def two_level(reps: int, S: int, M: int, D: int, seed: int, between: float = 1.0, log_sd: float = 0.5):
    """g_{s,m} = c + L z_s + sigma_s e_{s,m}: B = tr(L L^T), W = D E[sigma^2] with log sigma ~ N(0, log_sd^2).

    The within-sentence scale varies by sentence (heteroscedastic), as masks of
    long and short sentences do, so E_x Var(g|x) is a real average.
    """
    g = torch.Generator().manual_seed(seed)
    L = torch.randn(D, D, generator=g, dtype=torch.float64) * between / math.sqrt(D)
    c = torch.randn(D, generator=g, dtype=torch.float64)
    z = torch.randn(reps, S, 1, D, generator=g, dtype=torch.float64)
    sigma = torch.exp(log_sd * torch.randn(reps, S, 1, 1, generator=g, dtype=torch.float64))
    e = torch.randn(reps, S, M, D, generator=g, dtype=torch.float64)
    x = c + z @ L.T + sigma * e
    W = D * math.exp(2 * log_sd**2)  # E[sigma^2] = E[exp(2u)], u ~ N(0, log_sd^2)
    B = float((L * L).sum())
    return x, W, B


def summaries(x: torch.Tensor):
    """(reps, S, M, D) -> norms (reps, S), means (reps, S, S)."""
    M = x.shape[2]
    norms = (x * x).sum(dim=(-1, -2))
    gbar = x.mean(2)
    return norms, gbar @ gbar.transpose(-1, -2), M


def test_terms_match_their_definitions_and_add_up():
    x, _, _ = two_level(1, S=5, M=4, D=7, seed=0)
    x = x[0]
    s = summarise_vectors(x[None])
    d = est.decompose(s.norms[0], s.means[0, 0], 4)
    # definitions, computed the plain way
    w = torch.stack([x[i].var(0, unbiased=True).sum() for i in range(5)]).mean()
    gbar = x.mean(1)
    b = gbar.var(0, unbiased=True).sum()
    pairs = [
        0.5 * ((x[i, m] - x[j, k]) ** 2).sum()
        for i in range(5)
        for j in range(5)
        if i != j
        for m in range(4)
        for k in range(4)
    ]
    pooled = x.reshape(20, 7).var(0, unbiased=True).sum()
    assert float(d["mask_variance"]) == pytest.approx(float(w), rel=1e-12)
    assert float(d["between_sentence_raw"]) == pytest.approx(float(b), rel=1e-12)
    assert float(d["sentence_variance"]) == pytest.approx(float(b - w / 4), rel=1e-12)
    assert float(d["total_variance"]) == pytest.approx(float(torch.stack(pairs).mean()), rel=1e-12)
    assert float(d["pooled_biased"]) == pytest.approx(float(pooled), rel=1e-12)
    # law of total variance, sample by sample: the directly measured total is the sum of the terms
    assert float(d["sum_of_terms"]) == pytest.approx(float(d["total_variance"]), rel=1e-12)


def test_summarise_reads_the_right_entries_of_a_multi_scheme_gram():
    g = torch.Generator().manual_seed(1)
    v = torch.randn(3, 4, 2, 5, generator=g, dtype=torch.float64)
    s = summarise_vectors(v)
    gbar = v.mean(2)
    assert torch.allclose(s.norms, (v * v).sum(dim=(-1, -2)))
    assert torch.allclose(s.means, torch.einsum("asd,btd->abst", gbar, gbar))


def test_estimators_are_unbiased_and_the_pooled_variance_is_not():
    S, M, D, reps = 4, 3, 6, 20000
    x, W, B = two_level(reps, S, M, D, seed=2)
    d = est.decompose(*summaries(x))
    for key, truth in (("mask_variance", W), ("sentence_variance", B), ("total_variance", W + B)):
        values = d[key]
        se = float(values.std()) / math.sqrt(reps)
        assert abs(float(values.mean()) - truth) < 4.5 * se, (key, float(values.mean()), truth, se)
    pooled = d["pooled_biased"]
    se = float(pooled.std()) / math.sqrt(reps)
    expected = W + M * (S - 1) / (S * M - 1) * B  # the pooled variance's known bias
    assert abs(float(pooled.mean()) - expected) < 4.5 * se
    assert float(pooled.mean()) < W + B - 6 * se  # detectably short of the truth
    raw = d["between_sentence_raw"]  # without the W/M correction the sentence term is biased up
    assert float(raw.mean()) > B + 6 * float(raw.std()) / math.sqrt(reps)


def test_bootstrap_intervals_cover_the_truth_at_about_95_percent():
    # Mildly heterogeneous sentences; with strongly skewed per-sentence variances and S ~ 24
    # the percentile intervals undercover (about 85% in the same simulation with log_sd=0.5).
    S, M, D, reps = 32, 4, 5, 200
    x, W, B = two_level(reps, S, M, D, seed=3, between=1.5, log_sd=0.25)
    truth = {"mask_variance": W, "sentence_variance": B, "total_variance": W + B}
    hits = dict.fromkeys(truth, 0)
    g = torch.Generator().manual_seed(4)
    for r in range(reps):
        flat = x[r].reshape(S * M, D)
        gram6 = (flat @ flat.T).view(1, S, M, 1, S, M)
        full = est.summarise(gram6)
        point = est.decompose(full.norms[0], full.means[0, 0], M)
        rep = next(est.bootstrap(gram6, 400, g, chunk=400))
        dd = est.decompose(rep.norms[:, 0], rep.means[:, 0, 0], M)
        for k in truth:
            lo, hi = est.interval(dd[k], float(point[k]))
            hits[k] += lo <= truth[k] <= hi
    for k, n in hits.items():
        assert 0.88 <= n / reps <= 0.995, (k, n / reps)


def test_two_stage_bootstrap_resamples_masks_as_documented():
    S, M, D = 6, 4, 3
    x, _, _ = two_level(1, S, M, D, seed=10)
    flat = x[0].reshape(S * M, D)
    gram6 = (flat @ flat.T).view(1, S, M, 1, S, M)
    g = torch.Generator().manual_seed(11)
    rep = next(est.bootstrap(gram6, 8, g, resample_masks=True))
    # each replicate equals the summaries of the explicitly resampled vectors
    g = torch.Generator().manual_seed(11)
    sent = torch.randint(0, S, (8, S), generator=g)
    mask = torch.randint(0, M, (8, S, M), generator=g)
    for k in range(8):
        xs = x[0][sent[k][:, None], mask[k]]  # (S, M, D)
        s = summarise_vectors(xs[None])
        assert torch.allclose(rep.norms[k], s.norms) and torch.allclose(rep.means[k], s.means)
    # and the shrink of w_s by (M-1)/M under mask resampling, on average
    many = torch.cat(
        [
            est.decompose(r.norms[:, 0], r.means[:, 0, 0], M)["mask_variance"]
            for r in est.bootstrap(gram6, 4000, torch.Generator().manual_seed(12), resample_masks=True, chunk=8)
        ]
    )
    full = est.summarise(gram6)
    point = float(est.decompose(full.norms[0], full.means[0, 0], M)["mask_variance"])
    assert float(many.mean()) == pytest.approx(point * (M - 1) / M, rel=0.05)


def test_mean_distance_is_unbiased_for_the_squared_bias():
    S, M, D, reps = 5, 3, 4, 20000
    x, _, _ = two_level(reps, S, M, D, seed=5)
    g = torch.Generator().manual_seed(6)
    delta = torch.randn(D, generator=g, dtype=torch.float64) * 0.3
    # scheme a: the same sentences, its own masks (independent noise), mean shifted by delta
    y = x.mean(2, keepdim=True) + delta + torch.randn(x.shape, generator=g, dtype=torch.float64) * 1.3
    gu, ga = x.mean(2), y.mean(2)
    mm = lambda p, q: p @ q.transpose(-1, -2)  # noqa: E731
    d = est.mean_distance(mm(ga, ga), mm(gu, gu), mm(ga, gu))
    values = d["distance_sq_unbiased"]
    se = float(values.std()) / math.sqrt(reps)
    truth = float((delta * delta).sum())
    assert abs(float(values.mean()) - truth) < 4.5 * se
    plug_in = d["distance"] ** 2
    assert float(plug_in.mean()) > truth + 6 * float(plug_in.std()) / math.sqrt(reps)


def test_relative_distance_is_nan_exactly_when_the_uniform_mean_is_indistinguishable_from_zero():
    mm = lambda p, q: p @ q.transpose(-1, -2)  # noqa: E731
    ga = torch.tensor([[1.0, 0.5], [1.2, 0.4], [0.9, 0.6]], dtype=torch.float64)
    centred = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]], dtype=torch.float64)  # mean 0: ||mu||^2 estimate < 0
    d = est.mean_distance(mm(ga, ga), mm(centred, centred), mm(ga, centred))
    assert math.isnan(float(d["relative_unbiased"])) and math.isnan(float(d["relative_sq_unbiased"]))
    assert float(d["distance_unbiased"]) > 0  # the distance itself is still measured
    shifted = centred + torch.tensor([3.0, 1.0], dtype=torch.float64)  # clearly nonzero mean
    d = est.mean_distance(mm(ga, ga), mm(shifted, shifted), mm(ga, shifted))
    S = 3
    ref_sq = float((shifted.mean(0) ** 2).sum()) - float(shifted.var(0).sum()) / S
    assert float(d["relative_unbiased"]) == pytest.approx(float(d["distance_unbiased"]) / math.sqrt(ref_sq))


def test_minibatch_direct_measurement_agrees_with_total_over_b():
    x, _, _ = two_level(1, S=16, M=4, D=6, seed=7)
    flat = x[0].reshape(64, 6)
    gram = (flat @ flat.T).view(16, 4, 16, 4)
    s = est.summarise(gram.view(1, 16, 4, 1, 16, 4))
    total = float(est.decompose(s.norms[0], s.means[0, 0], 4)["total_variance"])
    g = torch.Generator().manual_seed(8)
    for B in (1, 3, 8):
        direct = est.minibatch_direct(gram, B, 40000, g)
        assert abs(direct["estimate"] - total / B) < 4.5 * direct["mc_stderr"], (B, direct, total / B)
    assert est.minibatch_direct(gram, 9, 100, g) is None  # 2B > S: no two disjoint batches


def test_gram_matrix_in_panels_is_exact_and_counts_its_recomputation():
    g = torch.Generator().manual_seed(9)
    blocks = [torch.randn(7, 3, 4, generator=g), torch.randn(7, 5, generator=g)]  # 7 examples, 2 parameter blocks
    flat = torch.cat([b.reshape(7, -1) for b in blocks], 1).double()
    expected = flat @ flat.T
    for panel in (1, 3, 7, 100):
        calls = []

        def fn(i, calls=calls):
            calls.append(i)
            return [b[i] for b in blocks]

        got = est.gram_matrix(7, fn, panel)
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-5)
        p = min(panel, 7)
        assert len(calls) == sum(7 - start for start in range(0, 7, p))
