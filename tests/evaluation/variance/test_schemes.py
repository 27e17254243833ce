"""The per-position schemes (ht, stratified, frequency, oracle), per-position gradients, and the scale-free figures."""

from __future__ import annotations

import math

import pytest
import torch
from test_exact import SENTENCES, SPECIAL, THEOREM2_SENTENCES, TableProposal, V, flat_gradient, tiny_model

from mapnet_cli.evaluation.variance import estimator as est
from mapnet_cli.evaluation.variance.gradients import ExampleGradients, MaskedExample
from mapnet_cli.evaluation.variance.measure import analyse, measure
from mapnet_cli.evaluation.variance.schemes import (
    draw_frequency,
    draw_ht,
    draw_oracle,
    draw_stratified,
    frequency_type_scores,
    oracle_inclusion,
    oracle_scores,
)
from mapnet_cli.masking import designs
from mapnet_cli.masking.uniform import eligible_positions, mask_counts
from mapnet_cli.settings import MapnetSettings, MaskingSettings


def test_per_position_weights_differentiate_the_weighted_training_loss():
    model = tiny_model()
    ids = SENTENCES[0]
    mask = torch.tensor([False, True, False, True, True, False])
    inputs = torch.where(mask, torch.full_like(ids, SPECIAL["mask"]), ids)
    pos = mask.nonzero().squeeze(1)
    w = torch.tensor([0.5, 2.0, 1.25])
    grads = ExampleGradients(model)
    got = grads.blocks(MaskedExample(inputs, pos, ids[pos], 1.0, None, w))
    out = model(inputs[None], None, mask[None], targets=ids[None])  # what training differentiates (strategy.mlm_loss)
    loss = designs.weighted_sequence_losses(out.token_losses, out.rows, w, mask[None].sum(1))[0]
    want = torch.autograd.grad(loss, list(model.parameters()))
    for a, b in zip(got, want):
        assert torch.allclose(a, b, atol=1e-6)
    # all-ones weights are the plain mean; the scalar weight still multiplies
    ones = grads.blocks(MaskedExample(inputs, pos, ids[pos], 1.0, None, torch.ones(3)))
    plain = grads.blocks(MaskedExample(inputs, pos, ids[pos]))
    scaled = grads.blocks(MaskedExample(inputs, pos, ids[pos], 3.0, None, w))
    for a, b, c, d in zip(ones, plain, scaled, got):
        assert torch.allclose(a, b, atol=1e-7) and torch.allclose(c, 3.0 * d, atol=1e-6)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:There is a performance drop")  # no CPU batching rule for attention
def test_vmap_takes_per_position_weights():
    model = tiny_model()
    grads = ExampleGradients(model, method="vmap")
    ids = SENTENCES[1]
    examples = [
        MaskedExample(
            torch.where(torch.arange(6) == i, SPECIAL["mask"], ids),
            torch.tensor([i, 4]),
            ids[torch.tensor([i, 4])],
            1.0,
            None,
            torch.tensor([0.3 + i, 1.7]),
        )
        for i in (1, 2)
    ]
    for ex, batched in zip(examples, grads.blocks_vmap(examples)):
        for a, b in zip(grads.blocks(ex), batched):
            assert torch.allclose(a, b, atol=1e-6)


def test_position_scheme_draws_carry_their_designs_weights():
    masking = MaskingSettings(
        strategy="mapnet", mask_prob=0.5, mapnet=MapnetSettings(importance="ht", mix_uniform=0.25)
    )
    ids = torch.tensor([2, 5, 9, 13, 17, 6, 8, 11, 3, 0])  # n = 7 eligible (pad at the end), K = 4
    n, K = 7, 4

    def log_p(ids_, attention, eligible):  # a fixed proposal over the 7 eligible positions
        logits = torch.tensor([0.0, 2.0, -1.0, 0.5, 1.0, -2.0, 0.3, 0.0, 0.0, 0.0], dtype=torch.float64)
        return torch.log_softmax(logits.masked_fill(~eligible[0], -math.inf), 0)[None]

    M = 4000
    draws = {
        "ht": draw_ht(ids, SPECIAL, V, masking, M, 1, log_p),
        "frequency": draw_frequency(ids, SPECIAL, V, masking, M, 2, frequency_type_scores(torch.arange(V) * 10, 0.5)),
    }
    for name, d in draws.items():
        pi = d.inclusion
        assert float(pi.sum()) == pytest.approx(K) and float(pi.max()) <= 1 and (pi[[0, 8, 9]] == 0).all()
        assert float(pi[1:8].min()) >= 0.25 * K / n - 1e-12  # the mixture's floor (masking.mix_uniform)
        hits = torch.zeros(10)
        for e in d.examples:
            assert e.positions.numel() == K
            assert torch.allclose(e.token_weights.double(), (K / n) / pi[e.positions], rtol=1e-6)
            hits[e.positions] += 1
        assert torch.allclose(hits / M, pi.float(), atol=4.5 * math.sqrt(0.25 / M)), name  # P(i in S) = pi_i
    d = draw_stratified(ids, SPECIAL, V, masking, 200, 3)
    sizes = {e.positions.numel() for e in d.examples}
    assert sizes <= {3, 4}  # m = round(7/4) = 2 strata of 3 and 4 positions
    for e in d.examples:
        assert torch.allclose(e.token_weights, torch.full((e.positions.numel(),), 2 * e.positions.numel() / n))


def test_oracle_scores_are_the_proxy_or_gradient_norm_and_pi_follows_them():
    model = tiny_model()
    with torch.no_grad():
        model.head.bias[5] = 8.0  # masking a 5 is easy: a small proxy, a small gradient
    one = MaskingSettings(mask_prob=0.25, replace_mask=1.0, replace_random=0.0)  # K = 1: each stratum is one position
    grads = ExampleGradients(model)
    for ids in THEOREM2_SENTENCES:
        proxy, rows = oracle_scores(model, ids, SPECIAL, V, one, rounds=2, seed=0)
        assert rows == 2 * 4  # n / K rows per round
        exact, passes = oracle_scores(model, ids, SPECIAL, V, one, rounds=1, seed=0, basis="gradient", grads=grads)
        assert passes == 4
        for i in range(1, 5):
            masked = ids.clone()
            masked[i] = SPECIAL["mask"]
            with torch.no_grad():
                p = torch.softmax(model(masked[None])[0, i].float(), -1)
            want = torch.linalg.vector_norm(p - torch.nn.functional.one_hot(ids[i], V).float())
            assert float(proxy[i]) == pytest.approx(
                float(want), rel=1e-3, abs=1e-5
            )  # float32 sqrt(sum p^2 - 2 p_y + 1)
            assert float(exact[i]) == pytest.approx(float(flat_gradient(grads, ids, (i,)).norm()), rel=1e-5)
        assert float(proxy[0]) == float(proxy[5]) == 0.0  # [CLS], [SEP]
        assert float(exact[ids == 5].max()) < float(exact[(ids != 5) & (ids > 4)].min())
    # pi: capped PPS on the scores, sum K, proportional to them where not capped
    ids = THEOREM2_SENTENCES[1]
    for masking in (one, MaskingSettings(mask_prob=0.5)):
        scores, _ = oracle_scores(model, ids, SPECIAL, V, masking, rounds=3, seed=1)
        eligible = eligible_positions(ids[None], SPECIAL)
        k = mask_counts(eligible.sum(1), masking.mask_prob)
        pi = oracle_inclusion(scores[None], eligible, k, masking)[0]
        assert float(pi.sum()) == pytest.approx(float(k)) and float(pi.max()) <= 1.0
        free = eligible[0] & (pi < 1)
        ratio = pi[free] / scores[free]
        assert torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-9)
        d = draw_oracle(ids, SPECIAL, V, masking, 3, 0, scores)
        assert torch.equal(d.inclusion, pi) and all(e.token_weights is not None for e in d.examples)


def test_ht_and_oracle_are_unbiased_relative_to_uniform_and_lower_mask_variance():
    """K = 1, where per-position HT is exactly unbiased (no other masked position changes l_i)."""
    model = tiny_model()
    with torch.no_grad():
        model.head.bias[5] = 8.0
    grads = ExampleGradients(model)
    masking = MaskingSettings(
        mask_prob=0.25, replace_mask=1.0, replace_random=0.0, mapnet=MapnetSettings(clip_epsilon=0.2)
    )
    # MAP-Net's table: the Theorem-2 proposal, p_i proportional to the gradient norm of masking i
    proposal = TableProposal(
        {
            tuple(ids.tolist()): torch.stack([flat_gradient(grads, ids, (i,)).norm() for i in range(1, 5)]).log()
            for ids in THEOREM2_SENTENCES
        }
    )
    sentences = THEOREM2_SENTENCES[torch.randint(0, 4, (16,), generator=torch.Generator().manual_seed(5))]
    meas = measure(
        model,
        proposal,
        sentences,
        SPECIAL,
        V,
        masking,
        masks=8,
        seed=3,
        schemes=("uniform", "mapnet_unweighted", "ht", "oracle"),
        oracle_rounds=1,
    )
    assert meas.schemes == ["uniform", "mapnet_unweighted", "ht", "oracle"]
    assert meas.gradient["oracle"] == {"basis": "proxy", "rounds": 1, "forward_rows": 16 * 4}
    res = analyse(meas, batch_sizes=(1,), bootstrap=1000, seed=3)["schemes"]
    uni = res["uniform"]["mask_variance"]
    for name in ("ht", "oracle"):
        assert res[name]["bias_vs_uniform"]["distance_unbiased"]["ci95"][0] == 0.0, name  # 0 inside the interval
        assert res[name]["weights"]["per_position"] is True
    assert res["ht"]["mask_variance"]["ci95"][1] < uni["ci95"][0]  # the optimal proposal, HT-weighted: lower
    assert res["oracle"]["mask_variance"]["estimate"] < uni["estimate"]  # the proxy ranks positions as the norm does
    # the same proposal without weights is visibly biased: the check above can fail
    assert res["mapnet_unweighted"]["bias_vs_uniform"]["relative_unbiased"]["ci95"][0] > 0.2


def test_a_constant_weight_cancels_in_the_noise_scales():
    """Common random numbers: mapnet_clipped and mapnet_unweighted share masks; when every ratio
    is clipped to 1 - eps, clipped = 0.8 x unweighted, gradient by gradient."""
    model = tiny_model()
    peaked = TableProposal(
        {tuple(s.tolist()): torch.tensor([8.0, 8.0, -8.0, -8.0], dtype=torch.float64) for s in SENTENCES}
    )
    # positions are (almost surely) always {1, 2}, r = (1/16) / (1/4) = 0.25; the replacement is random
    masking = MaskingSettings(
        mask_prob=0.5, replace_mask=0.5, replace_random=0.5, mapnet=MapnetSettings(clip_epsilon=0.2)
    )
    sentences = SENTENCES[torch.randint(0, 4, (12,), generator=torch.Generator().manual_seed(0))]
    meas = measure(
        model,
        peaked,
        sentences,
        SPECIAL,
        V,
        masking,
        masks=4,
        seed=1,
        schemes=("uniform", "mapnet_clipped", "mapnet_unweighted"),
    )
    w = meas.weights["mapnet_clipped"]
    c = float(w[0, 0])
    assert c == pytest.approx(0.8) and bool((w == c).all())
    res = analyse(meas, batch_sizes=(1,), bootstrap=300, seed=0)["schemes"]
    clipped, plain = res["mapnet_clipped"], res["mapnet_unweighted"]
    for term in ("mask_variance", "total_variance", "mean_gradient_sq"):  # raw figures scale by c^2 ...
        assert clipped[term]["estimate"] == pytest.approx(c * c * plain[term]["estimate"], rel=1e-9)
    for name in est.SCALE_FREE:  # ... the scale-free ones do not move, intervals included
        assert plain[name]["estimate"] > 0 and math.isfinite(plain[name]["estimate"])
        assert clipped[name]["estimate"] == pytest.approx(plain[name]["estimate"], rel=1e-9)
        assert clipped[name]["ci95"] == pytest.approx(plain[name]["ci95"], rel=1e-9)
    assert plain["mask_variance"]["estimate"] > 0


def test_noise_scale_is_total_over_an_unbiased_squared_mean():
    g = torch.Generator().manual_seed(0)
    S, M, D, reps = 6, 3, 5, 20000
    mu = torch.randn(D, generator=g, dtype=torch.float64)
    x = (
        mu
        + torch.randn(reps, S, 1, D, generator=g, dtype=torch.float64)
        + torch.randn(reps, S, M, D, generator=g, dtype=torch.float64)
    )
    norms, gbar = (x * x).sum(dim=(-1, -2)), x.mean(2)
    d = est.decompose(norms, gbar @ gbar.transpose(-1, -2), M)
    values = d["mean_gradient_sq"]
    assert abs(float(values.mean()) - float(mu @ mu)) < 4.5 * float(values.std()) / math.sqrt(reps)
    sf = est.scale_free({k: v[:1] for k, v in d.items()})
    assert float(sf["noise_scale"][0]) == pytest.approx(float(d["total_variance"][0] / d["mean_gradient_sq"][0]))
    assert est.inverse_interval(torch.tensor([-0.1, 0.2, 0.4] * 40, dtype=torch.float64), 0.2)[1] == math.inf
