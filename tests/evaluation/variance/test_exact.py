"""Against exact enumeration: every K-subset of a tiny BERT's sentences, weighted by its probability.

Sentences have n = 4 maskable positions and K = 2 (so 6 subsets) or K = 1;
replacement is always [MASK], so a mask is its subset. The exact mask,
sentence and total variances of each scheme follow from the subset
probabilities (uniform: 1/6; MAP-Net: Gumbel-top-k = sequential sampling
without replacement) and weights (the paper's r, clipped or not). The real
samplers + estimators, averaged over many seeds, must hit them within the
spread of the estimates.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from variance_fixtures import summarise_vectors

from mapnet_cli.evaluation.variance import estimator as est
from mapnet_cli.evaluation.variance.gradients import ExampleGradients, MaskedExample
from mapnet_cli.evaluation.variance.measure import _SOURCE_DOMAIN, analyse, measure
from mapnet_cli.evaluation.variance.schemes import SCHEMES, SOURCES, draw_proposal, draw_uniform, scheme_weights
from mapnet_cli.masking.uniform import mix_seed
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import MapnetSettings, MaskingSettings

SPECIAL = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
V = 20


def tiny_model() -> BertForMLM:
    torch.manual_seed(0)
    return BertForMLM(
        BertConfig(
            vocab_size=V,
            layers=1,
            hidden=8,
            heads=2,
            intermediate=16,
            max_position=8,
            dropout=0.0,
            attention_dropout=0.0,
        )
    )


SENTENCES = torch.tensor([[2, 5, 9, 13, 17, 3], [2, 6, 6, 11, 19, 3], [2, 8, 12, 7, 15, 3], [2, 18, 10, 14, 5, 3]])
# Half of their positions hold token 5, which the Theorem-2 model finds trivial to predict.
THEOREM2_SENTENCES = torch.tensor([[2, 5, 5, 13, 17, 3], [2, 5, 6, 5, 19, 3], [2, 8, 5, 7, 5, 3], [2, 5, 10, 14, 5, 3]])


class TableProposal:
    """A fixed proposal per sentence: log p over the 4 eligible positions, -inf elsewhere."""

    def __init__(self, logits: dict[tuple, torch.Tensor]):
        self.logits = logits

    def __call__(self, ids, attention_mask, eligible):
        out = torch.full(ids.shape, float("-inf"), dtype=torch.float64)
        for b in range(ids.shape[0]):
            out[b, 1:5] = torch.log_softmax(self.logits[tuple(ids[b].tolist())], 0)
        return out


def flat_gradient(grads: ExampleGradients, ids: torch.Tensor, subset: tuple[int, ...]) -> torch.Tensor:
    pos = torch.tensor(sorted(subset))
    inputs = ids.clone()
    inputs[pos] = SPECIAL["mask"]
    return torch.cat([b.reshape(-1) for b in grads.blocks(MaskedExample(inputs, pos, ids[pos]))]).double()


def subset_probability(p: torch.Tensor, subset: tuple[int, ...]) -> float:
    """P(the set) under sequential sampling without replacement: sum over its orderings."""
    total = 0.0
    for order in itertools.permutations(subset):
        prob, left = 1.0, 1.0
        for i in order:
            prob *= float(p[i - 1]) / left
            left -= float(p[i - 1])
        total += prob
    return total


def exact_terms(model, proposal: TableProposal, K: int, eps: float):
    """Per scheme: exact W, B, T, the per-sentence mean gradients, and the gradient cache."""
    grads = ExampleGradients(model)
    subsets = list(itertools.combinations(range(1, 5), K))
    cache = {(s, sub): flat_gradient(grads, SENTENCES[s], sub) for s in range(4) for sub in subsets}
    out = {}
    for scheme in SCHEMES:
        mus, second = [], []
        for s in range(4):
            p = torch.softmax(proposal.logits[tuple(SENTENCES[s].tolist())], 0).double()
            mu, m2 = 0.0, 0.0
            for sub in subsets:
                if scheme == "uniform":
                    prob, w = 1 / len(subsets), 1.0
                else:
                    prob = subset_probability(p, sub)
                    log_r = torch.tensor(
                        [K * math.log(1 / 4) - sum(math.log(float(p[i - 1])) for i in sub)], dtype=torch.float64
                    )
                    w = float(scheme_weights(scheme, log_r, eps)[0])
                g = cache[(s, sub)]
                mu = mu + prob * w * g
                m2 += prob * w * w * float(g @ g)
            mus.append(mu)
            second.append(m2 - float(mu @ mu))
        mus = torch.stack(mus)
        W = sum(second) / 4
        B = float(((mus - mus.mean(0)) ** 2).sum(1).mean())  # P_X: uniform over the 4 sentences
        out[scheme] = {"mask_variance": W, "sentence_variance": B, "total_variance": W + B, "mean": mus.mean(0)}
    for scheme in SCHEMES[1:]:
        out[scheme]["bias_sq"] = float(((out[scheme]["mean"] - out["uniform"]["mean"]) ** 2).sum())
    return out, cache


def sampled_vectors(proposal, masking, cache, sentence_ids: list[int], M: int, seed: int):
    """The real samplers; gradients looked up in the exact cache. (A, S, M, P) weighted vectors."""
    vec = {"uniform": [], "mapnet": []}
    log_r = []
    for j, s in enumerate(sentence_ids):
        ids = SENTENCES[s]
        du = draw_uniform(ids, SPECIAL, V, masking, M, mix_seed(seed, _SOURCE_DOMAIN["uniform"], j))
        dp = draw_proposal(ids, SPECIAL, V, masking, M, mix_seed(seed, _SOURCE_DOMAIN["mapnet"], j), proposal)
        for name, d in (("uniform", du), ("mapnet", dp)):
            for e in d.examples:
                assert torch.equal(e.inputs[e.positions], torch.full_like(e.positions, SPECIAL["mask"]))
            vec[name].append(torch.stack([cache[(s, tuple(e.positions.tolist()))] for e in d.examples]))
        log_r.append(dp.log_ratio)
    log_r = torch.stack(log_r)
    out = []
    for scheme in SCHEMES:
        w = scheme_weights(
            scheme, log_r if SOURCES[scheme] == "mapnet" else torch.zeros_like(log_r), masking.mapnet.clip_epsilon
        )
        out.append(w[:, :, None] * torch.stack(vec[SOURCES[scheme]]))
    return torch.stack(out)


@pytest.fixture(scope="module")
def setup():
    model = tiny_model()
    g = torch.Generator().manual_seed(1)
    proposal = TableProposal(
        {tuple(s.tolist()): 1.2 * torch.randn(4, generator=g, dtype=torch.float64) for s in SENTENCES}
    )
    masking = MaskingSettings(
        mask_prob=0.5, replace_mask=1.0, replace_random=0.0, mapnet=MapnetSettings(clip_epsilon=0.2)
    )
    exact, cache = exact_terms(model, proposal, K=2, eps=0.2)
    return model, proposal, masking, exact, cache


def test_samplers_and_estimators_are_unbiased_for_the_exact_terms(setup):
    model, proposal, masking, exact, cache = setup
    S, M, reps = 5, 3, 600
    g = torch.Generator().manual_seed(2)
    results = {s: {k: [] for k in ("mask_variance", "sentence_variance", "total_variance", "bias_sq")} for s in SCHEMES}
    for r in range(reps):
        sentence_ids = torch.randint(0, 4, (S,), generator=g).tolist()  # i.i.d. from P_X
        summ = summarise_vectors(sampled_vectors(proposal, masking, cache, sentence_ids, M, seed=r))
        for a, scheme in enumerate(SCHEMES):
            d = est.decompose(summ.norms[a], summ.means[a, a], M)
            for k in ("mask_variance", "sentence_variance", "total_variance"):
                results[scheme][k].append(float(d[k]))
            if a:
                results[scheme]["bias_sq"].append(
                    float(
                        est.mean_distance(summ.means[a, a], summ.means[0, 0], summ.means[a, 0])["distance_sq_unbiased"]
                    )
                )
    for scheme in SCHEMES:
        for k, values in results[scheme].items():
            if not values:
                continue
            v = torch.tensor(values, dtype=torch.float64)
            truth = exact[scheme][k if k != "bias_sq" else "bias_sq"]
            se = float(v.std()) / math.sqrt(reps)
            assert abs(float(v.mean()) - truth) < 4.5 * se + 1e-9, (scheme, k, float(v.mean()), truth, se)
    # the comparison is meaningful: the schemes really differ, and clipping really biases
    assert exact["mapnet_unweighted"]["bias_sq"] > 0.05 * exact["mapnet_clipped"]["bias_sq"] > 0
    assert (
        abs(exact["mapnet_unclipped"]["mask_variance"] - exact["uniform"]["mask_variance"])
        > 0.05 * exact["uniform"]["mask_variance"]
    )


def test_measure_builds_the_gram_the_samplers_and_gradients_imply(setup):
    model, proposal, masking, exact, cache = setup
    seqs = SENTENCES[[0, 2, 1]]
    meas = measure(model, proposal, seqs, SPECIAL, V, masking, masks=3, seed=7)
    vectors = sampled_vectors(proposal, masking, cache, [0, 2, 1], 3, seed=7)
    flat = vectors.reshape(-1, vectors.shape[-1])
    assert meas.schemes == list(SCHEMES) and not meas.unavailable
    assert torch.allclose(meas.gram6, (flat @ flat.T).view(meas.gram6.shape), rtol=1e-5, atol=1e-7)
    exact_pass = meas.gradient["evaluations"]
    panels = measure(model, proposal, seqs, SPECIAL, V, masking, masks=3, seed=7, memory_gb=20 * 4 * 1e-9 * 1.1)
    assert torch.allclose(panels.gram6, meas.gram6, rtol=1e-5, atol=1e-6)  # float32 products, other order
    assert panels.gradient["evaluations"] > exact_pass  # small panels: recomputed, same answer
    sketched = measure(model, proposal, seqs, SPECIAL, V, masking, masks=3, seed=7, project_dim=64)
    assert sketched.gradient["mode"] == "sketch" and sketched.gram6.shape == meas.gram6.shape


def test_gradient_norm_proposal_lowers_mask_variance_and_stays_unbiased():
    """Theorem 2 on a toy: K = 1, p(i) proportional to the gradient norm of masking i, weight (1/n)/p(i)."""
    model = tiny_model()
    with torch.no_grad():  # the head predicts token 5 almost surely: masking a 5 gives a tiny gradient
        model.head.bias[5] = 8.0
    grads = ExampleGradients(model)
    masking = MaskingSettings(
        mask_prob=0.25, replace_mask=1.0, replace_random=0.0, mapnet=MapnetSettings(clip_epsilon=0.2)
    )
    logits, exact_uniform, exact_is = {}, [], []
    for ids in THEOREM2_SENTENCES:
        g = torch.stack([flat_gradient(grads, ids, (i,)) for i in range(1, 5)])
        norms = g.norm(dim=1)
        logits[tuple(ids.tolist())] = torch.log(norms)
        mean_sq = float((g.mean(0) ** 2).sum())
        exact_uniform.append(float((norms**2).mean()) - mean_sq)
        exact_is.append(float(norms.sum() ** 2) / 16 - mean_sq)  # sum_i p_i ||g_i / (n p_i)||^2 - ||mean||^2
    assert sum(exact_is) < sum(exact_uniform)  # Cauchy-Schwarz: the optimal proposal wins exactly
    proposal = TableProposal(logits)
    # 16 sentences drawn i.i.d. from P_X (uniform over the 4), 8 masks each
    sentences = THEOREM2_SENTENCES[torch.randint(0, 4, (16,), generator=torch.Generator().manual_seed(5))]
    meas = measure(model, proposal, sentences, SPECIAL, V, masking, masks=8, seed=3)
    res = analyse(meas, batch_sizes=(1, 2), bootstrap=1000, seed=3, clip_epsilon=0.2)["schemes"]
    uni, unc = res["uniform"]["mask_variance"], res["mapnet_unclipped"]["mask_variance"]
    assert unc["ci95"][1] < uni["ci95"][0], (unc, uni)  # measured mask variance clearly lower
    # unbiased: for K = 1 the paper's ratio is exact, so the weighted mean gradient is the uniform one ...
    assert res["mapnet_unclipped"]["bias_vs_uniform"]["distance_unbiased"]["ci95"][0] == 0.0
    # ... while without weights the proposal's preference for hard positions is a visible bias
    assert res["mapnet_unweighted"]["bias_vs_uniform"]["relative_unbiased"]["ci95"][0] > 0.2
