"""The masking schemes compared by `mapnet variance`, each drawing M masks of one sentence.

    draw = draw_proposal(ids, special_ids, vocab_size, masking, masks=8, seed=s, proposal=proposal)
    w = scheme_weights("mapnet_clipped", draw.log_ratio, masking.mapnet.clip_epsilon)
    scores, cost = oracle_scores(model, ids, special_ids, vocab_size, masking, rounds=4, seed=s)
    draw = draw_oracle(ids, special_ids, vocab_size, masking, masks=8, seed=s, scores=scores)

One weight per mask (the gradient is w * grad l, l the mean loss over the K masked positions): `uniform` (w = 1),
`mapnet_clipped` (w = clip(r, 1-eps, 1+eps), r = (1/n)^K / prod_k p(pos_k), the paper's eq. 5),
`mapnet_unclipped` (w = r), `mapnet_unweighted` (w = 1). A weight per masked position (the gradient of
sum_{i in S} w_i l_i / K, as training uses them): `ht`, `stratified`, `frequency` and `oracle`, whose
pi_i is proportional to the encoder's own per-position gradient-norm proxy, measured in the training context.
Each scheme's weights make its expected loss uniform masking's, (1/n) sum_i l_i, when l_i does not depend on the
other masked positions (exactly so for K = 1). Every scheme's draw and weights, and how the oracle's scores are
measured and why so: docs/internals.md#evaluationvarianceschemespy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from ...masking import designs
from ...masking.mapnet import sampling
from ...masking.mapnet.objective import ht_inclusion
from ...masking.mapnet.targets import gradnorm_proxy
from ...masking.strategy import frequency_masks, strata_of, stratified_masks
from ...masking.uniform import apply_replacement, eligible_positions, mask_counts, uniform_mask
from .gradients import ExampleGradients, MaskedExample

SCHEMES = ("uniform", "mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted")  # one weight per mask
POSITION_SCHEMES = ("ht", "stratified", "frequency", "oracle")  # one weight per masked position
ALL_SCHEMES = SCHEMES + POSITION_SCHEMES  # report order
MAPNET_SCHEMES = SCHEMES[1:]
SOURCES = {
    "uniform": "uniform",
    "mapnet_clipped": "mapnet",
    "mapnet_unclipped": "mapnet",
    "mapnet_unweighted": "mapnet",
    "ht": "ht",
    "stratified": "stratified",
    "frequency": "frequency",
    "oracle": "oracle",
}
_IMPORTANCE = {
    "uniform": "none",
    "mapnet_clipped": "clipped",
    "mapnet_unclipped": "unclipped",
    "mapnet_unweighted": "none",
}
ORACLE_BASES = ("proxy", "gradient")

# log_p = proposal(input_ids (B, T), attention_mask (B, T), eligible (B, T)), -inf off `eligible`
Proposal = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class SentenceDraw:
    """M masks of one sentence from one sampler (scalar weights not applied; per-position ones are in the examples)."""

    examples: list[MaskedExample]
    log_ratio: torch.Tensor  # (M,) float64: log r per mask (0 for all but MAP-Net's Gumbel-top-k masks)
    eligible: int  # n, the positions that could be masked
    inclusion: torch.Tensor | None = None  # (T,) float64 pi_i of a PPS design (ht, frequency, oracle), else None
    cost: int = 0  # extra passes spent building the design (the oracle's scoring rows or backward passes)


def _examples(
    ids: torch.Tensor, inputs: torch.Tensor, chosen: torch.Tensor, pad_id: int, weights: torch.Tensor | None = None
) -> list[MaskedExample]:
    """One example per mask; with `weights` (M, T) each example carries its masked positions' weights."""
    attention = ids != pad_id
    attention = None if bool(attention.all()) else attention  # None lets attention use its fastest kernel
    out = []
    for m in range(chosen.shape[0]):
        pos = chosen[m].nonzero().squeeze(1)  # ascending
        token_weights = None if weights is None else weights[m, pos].to(torch.float32)
        out.append(MaskedExample(inputs[m], pos, ids[pos], 1.0, attention, token_weights))
    return out


def _rows(ids: torch.Tensor, special_ids: Mapping[str, int], masks: int, mask_prob: float):
    """The sentence repeated M times, its eligible positions and K (the training rule), per row."""
    rows = ids[None].expand(masks, -1)
    eligible = eligible_positions(rows, special_ids)
    return rows, eligible, mask_counts(eligible.sum(1), mask_prob)


def _uniforms(g: torch.Generator, shape, device) -> torch.Tensor:
    """float64 uniforms from the scheme's CPU generator (the same draws on every device)."""
    return torch.rand(shape, generator=g, dtype=torch.float64).to(device)


def draw_uniform(
    ids: torch.Tensor, special_ids: Mapping[str, int], vocab_size: int, masking, masks: int, seed: int
) -> SentenceDraw:
    """M i.i.d. RandMask masks of the 1-D sequence `ids` (same K rule as pretraining)."""
    rows = ids[None].expand(masks, -1)
    eligible = eligible_positions(rows, special_ids)
    g = torch.Generator().manual_seed(seed)
    chosen = uniform_mask(rows, eligible, masking.mask_prob, masking.mask_count, g)
    inputs = apply_replacement(rows, chosen, vocab_size, special_ids, masking.replace_mask, masking.replace_random, g)
    return SentenceDraw(
        _examples(ids, inputs, chosen, special_ids["pad"]),
        torch.zeros(masks, dtype=torch.float64),
        int(eligible[0].sum()),
    )


def draw_proposal(
    ids: torch.Tensor,
    special_ids: Mapping[str, int],
    vocab_size: int,
    masking,
    masks: int,
    seed: int,
    proposal: Proposal,
) -> SentenceDraw:
    """M i.i.d. masks of `ids` sampled from the proposal (K = round(mask_prob n) without replacement) + log r."""
    rows = ids[None].expand(masks, -1)
    eligible = eligible_positions(rows, special_ids)
    with torch.no_grad():
        log_p = proposal(ids[None], (ids != special_ids["pad"])[None], eligible[:1]).double()
    log_p = log_p.expand(masks, -1)
    k = mask_counts(eligible.sum(1), masking.mask_prob)  # the K training uses for MAP-Net rows
    g = torch.Generator().manual_seed(seed)
    uniforms = torch.rand(masks, ids.shape[0], generator=g, dtype=torch.float64).to(ids.device)
    chosen = sampling.gumbel_top_k(log_p, k, uniforms)
    log_r = sampling.log_importance_ratio(log_p, chosen, eligible)
    inputs = apply_replacement(rows, chosen, vocab_size, special_ids, masking.replace_mask, masking.replace_random, g)
    return SentenceDraw(_examples(ids, inputs, chosen, special_ids["pad"]), log_r, int(eligible[0].sum()))


def _pps_draw(
    ids: torch.Tensor,
    special_ids: Mapping[str, int],
    vocab_size: int,
    masking,
    seed: int,
    rows: torch.Tensor,
    eligible: torch.Tensor,
    k: torch.Tensor,
    pi: torch.Tensor,
    cost: int = 0,
) -> SentenceDraw:
    """M systematic-PPS masks with inclusion probabilities `pi` (M, T) and their HT weights (K/n)/pi_i."""
    g = torch.Generator().manual_seed(seed)
    order, start = _uniforms(g, rows.shape, ids.device), _uniforms(g, rows.shape[:1], ids.device)
    chosen = designs.systematic_sample(pi, order, start)
    weights = designs.ht_weights(pi, chosen, k, eligible)
    inputs = apply_replacement(rows, chosen, vocab_size, special_ids, masking.replace_mask, masking.replace_random, g)
    return SentenceDraw(
        _examples(ids, inputs, chosen, special_ids["pad"], weights),
        torch.zeros(rows.shape[0], dtype=torch.float64),
        int(eligible[0].sum()),
        pi[0].double().cpu(),
        cost,
    )


def draw_ht(
    ids: torch.Tensor,
    special_ids: Mapping[str, int],
    vocab_size: int,
    masking,
    masks: int,
    seed: int,
    proposal: Proposal,
) -> SentenceDraw:
    """M masks from MAP-Net's HT design (`objective.ht_inclusion` with the checkpoint's masking settings)."""
    rows, eligible, k = _rows(ids, special_ids, masks, masking.mask_prob)
    with torch.no_grad():
        log_p = proposal(ids[None], (ids != special_ids["pad"])[None], eligible[:1])
    pi = ht_inclusion(log_p, eligible[:1], k[:1], masking).expand(masks, -1)
    return _pps_draw(ids, special_ids, vocab_size, masking, seed, rows, eligible, k, pi)


def draw_stratified(
    ids: torch.Tensor, special_ids: Mapping[str, int], vocab_size: int, masking, masks: int, seed: int
) -> SentenceDraw:
    """M masks, each one uniformly random stratum of its own random partition, with weights m |S_j| / n."""
    rows, eligible, _ = _rows(ids, special_ids, masks, masking.mask_prob)
    g = torch.Generator().manual_seed(seed)
    partition, offsets = _uniforms(g, rows.shape, ids.device), _uniforms(g, (masks,), ids.device)
    copy_index = torch.zeros(masks, dtype=torch.long, device=ids.device)
    chosen, weights = stratified_masks(rows, eligible, masking.mask_prob, partition, offsets, copy_index)
    inputs = apply_replacement(rows, chosen, vocab_size, special_ids, masking.replace_mask, masking.replace_random, g)
    return SentenceDraw(
        _examples(ids, inputs, chosen, special_ids["pad"], weights),
        torch.zeros(masks, dtype=torch.float64),
        int(eligible[0].sum()),
    )


def frequency_type_scores(counts: torch.Tensor, power: float) -> torch.Tensor:
    """(V,) float64 count^-power per token type, exactly as `strategy.FrequencyTraining` builds its proposal."""
    return (counts.double() + 1.0).pow(-power)


def draw_frequency(
    ids: torch.Tensor,
    special_ids: Mapping[str, int],
    vocab_size: int,
    masking,
    masks: int,
    seed: int,
    type_scores: torch.Tensor,
) -> SentenceDraw:
    """M masks from the static frequency proposal (`strategy.frequency_masks`), HT weights."""
    rows, eligible, _ = _rows(ids, special_ids, masks, masking.mask_prob)
    g = torch.Generator().manual_seed(seed)
    order, start = _uniforms(g, rows.shape, ids.device), _uniforms(g, (masks,), ids.device)
    chosen, weights, pi = frequency_masks(
        rows, eligible, type_scores.to(ids.device), masking.mask_prob, masking.mix_uniform, order, start
    )
    inputs = apply_replacement(rows, chosen, vocab_size, special_ids, masking.replace_mask, masking.replace_random, g)
    return SentenceDraw(
        _examples(ids, inputs, chosen, special_ids["pad"], weights),
        torch.zeros(masks, dtype=torch.float64),
        int(eligible[0].sum()),
        pi[0].double().cpu(),
    )


# ---------------------------------------------------------------- the oracle
def _strata_rows(ids: torch.Tensor, eligible: torch.Tensor, k: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """(m, T) bool: row j masks stratum j of a fresh random partition (every eligible position in one row)."""
    stratum, m = strata_of(eligible, k, _uniforms(g, eligible.shape, ids.device))
    return stratum[0][None, :] == torch.arange(int(m[0]), device=ids.device)[:, None]


def _proxy_values(
    model, inputs: torch.Tensor, chosen: torch.Tensor, ids: torch.Tensor, attention: torch.Tensor | None
) -> torch.Tensor:
    """(N,) ||softmax - onehot|| at the chosen positions of each row (row-major), one batched forward."""
    att = None if attention is None else attention[None].expand(chosen.shape[0], -1)
    with torch.no_grad():
        logits = model(inputs, att, chosen)
    return gradnorm_proxy(logits, ids[None].expand_as(chosen)[chosen]).double()


def _gradient_values(
    grads: ExampleGradients,
    inputs: torch.Tensor,
    chosen: torch.Tensor,
    ids: torch.Tensor,
    attention: torch.Tensor | None,
) -> torch.Tensor:
    """(N,) exact ||d l_i / d theta|| at the chosen positions of each row (row-major), one backward each."""
    out = []
    for j in range(chosen.shape[0]):
        for i in chosen[j].nonzero().squeeze(1).tolist():
            pos = torch.tensor([i], device=ids.device)
            blocks = grads.blocks(MaskedExample(inputs[j], pos, ids[pos], 1.0, attention))
            out.append(torch.sqrt(sum((b.double() ** 2).sum() for b in blocks)))
    return torch.stack(out).to(ids.device) if out else torch.zeros(0, dtype=torch.float64, device=ids.device)


def oracle_scores(
    model,
    ids: torch.Tensor,
    special_ids: Mapping[str, int],
    vocab_size: int,
    masking,
    rounds: int,
    seed: int,
    basis: str = "proxy",
    grads: ExampleGradients | None = None,
) -> tuple[torch.Tensor, int]:
    """((T,) float64 score per position, 0 off the eligible set; passes spent), see the module doc.

    `basis` "proxy": RMS over `rounds` partitions of the encoder's ||softmax - onehot|| at each
    position (one forward of ~n/K rows per round); "gradient": RMS of the exact per-position
    gradient norm w.r.t. `grads`' parameters (one backward per position and round). The caller
    holds eval mode (no dropout), as for the measured gradients.
    """
    if basis not in ORACLE_BASES:
        raise ValueError(f"oracle basis must be one of {ORACLE_BASES} (got {basis!r})")
    if basis == "gradient" and grads is None:
        raise ValueError("the gradient basis needs an ExampleGradients")
    eligible = eligible_positions(ids[None], special_ids)
    k = mask_counts(eligible.sum(1), masking.mask_prob)
    attention = ids != special_ids["pad"]
    attention = None if bool(attention.all()) else attention
    g = torch.Generator().manual_seed(seed)
    squares = torch.zeros(ids.shape[0], dtype=torch.float64, device=ids.device)
    cost = 0
    for _ in range(max(1, rounds)):
        chosen = _strata_rows(ids, eligible, k, g)
        rows = ids[None].expand(chosen.shape[0], -1)
        inputs = apply_replacement(
            rows, chosen, vocab_size, special_ids, masking.replace_mask, masking.replace_random, g
        )
        if basis == "proxy":
            values, cost = _proxy_values(model, inputs, chosen, ids, attention), cost + chosen.shape[0]
        else:
            values, cost = _gradient_values(grads, inputs, chosen, ids, attention), cost + int(chosen.sum())
        dense = torch.zeros(chosen.shape, dtype=torch.float64, device=ids.device).masked_scatter(chosen, values)
        squares += dense.pow(2).sum(0)  # each eligible position sits in exactly one row
    return (squares / max(1, rounds)).sqrt(), cost


def oracle_inclusion(scores: torch.Tensor, eligible: torch.Tensor, k: torch.Tensor, masking) -> torch.Tensor:
    """pi (B, T): capped PPS proportional to the floored scores, mixed with uniform only if the run's mix_uniform >
    0."""
    top = torch.where(eligible, scores, torch.zeros_like(scores)).amax(1, keepdim=True)
    floor = masking.mapnet.target_floor * torch.where(top > 0, top, torch.ones_like(top))
    floored = torch.where(eligible, scores.clamp(min=0).maximum(floor), torch.zeros_like(scores))
    return designs.mix_with_uniform(designs.inclusion_probabilities(floored, k), eligible, k, masking.mix_uniform)


def draw_oracle(
    ids: torch.Tensor,
    special_ids: Mapping[str, int],
    vocab_size: int,
    masking,
    masks: int,
    seed: int,
    scores: torch.Tensor,
    cost: int = 0,
) -> SentenceDraw:
    """M masks from the oracle design built on `scores` (`oracle_scores`), HT weights."""
    rows, eligible, k = _rows(ids, special_ids, masks, masking.mask_prob)
    pi = oracle_inclusion(scores[None].to(ids.device), eligible[:1], k[:1], masking).expand(masks, -1)
    return _pps_draw(ids, special_ids, vocab_size, masking, seed, rows, eligible, k, pi, cost)


def scheme_weights(scheme: str, log_ratio: torch.Tensor, clip_epsilon: float) -> torch.Tensor:
    """Per-mask importance weights of `scheme` (float64; the same rule as training, via `sampling`).

    1 for uniform masks and for the per-position schemes, whose weights live in their examples.
    """
    if SOURCES[scheme] != "mapnet":
        return torch.ones_like(log_ratio, dtype=torch.float64)
    return sampling.importance_weights(log_ratio, _IMPORTANCE[scheme], clip_epsilon).double()


def own_schemes(masking) -> tuple[str, ...]:
    """The scheme(s) measuring what a run with these masking settings trains with (`compare.SCHEME`)."""
    if masking.strategy == "mapnet":
        return ("ht",) if masking.mapnet.importance == "ht" else MAPNET_SCHEMES
    # Unit masks (whole-word, span, pmi) are not measured yet: nothing of their own, uniform stays the reference.
    return {"uniform": ("uniform",), "stratified": ("stratified",), "frequency": ("frequency",)}.get(
        masking.strategy, ()
    )


def default_schemes(masking) -> tuple[str, ...]:
    """`mapnet variance` with variance.schemes empty: uniform, MAP-Net's four (unavailable without a
    proposal), and the checkpoint's own scheme when it is stratified or frequency. The oracle is
    only added on request (--oracle: it costs extra forwards); stratified and frequency on other
    checkpoints by naming them in variance.schemes."""
    extra = tuple(s for s in own_schemes(masking) if s not in SCHEMES + ("ht",))
    return SCHEMES + ("ht",) + extra


def snapshot_schemes(masking) -> tuple[str, ...]:
    """Pretraining snapshots: uniform (the reference for the bias) + the run's own scheme(s), nothing more."""
    own = own_schemes(masking)
    return ("uniform",) + tuple(s for s in own if s != "uniform")


__all__ = [
    "SCHEMES",
    "POSITION_SCHEMES",
    "ALL_SCHEMES",
    "MAPNET_SCHEMES",
    "SOURCES",
    "ORACLE_BASES",
    "Proposal",
    "SentenceDraw",
    "draw_uniform",
    "draw_proposal",
    "draw_ht",
    "draw_stratified",
    "frequency_type_scores",
    "draw_frequency",
    "oracle_scores",
    "oracle_inclusion",
    "draw_oracle",
    "scheme_weights",
    "own_schemes",
    "default_schemes",
    "snapshot_schemes",
]
