"""The masking schemes compared by `mapnet variance`, each drawing M masks of one sentence.

    draw = draw_uniform(ids, special_ids, vocab_size, masking, masks=8, seed=s)
    draw = draw_proposal(ids, special_ids, vocab_size, masking, masks=8, seed=s, proposal=proposal)
    w = scheme_weights("mapnet_clipped", draw.log_ratio, masking.clip_epsilon)

Schemes (the per-example gradient is w * grad l(theta; x^M, x)):

    uniform            RandMask: K uniform positions (masking.mask_count), w = 1
    mapnet_clipped     K positions from MAP-Net (Gumbel-top-k, without replacement),
                       w = clip(r, 1-eps, 1+eps), r = (1/n)^K / prod_k p(pos_k) — the paper's eq. 5
    mapnet_unclipped   the same masks, w = r
    mapnet_unweighted  the same masks, w = 1

The three MAP-Net schemes share their masks (common random numbers): their
gradients differ only by the scalar weight, so they are computed once and
scaled, and their differences are measured without mask noise between them.
Both samplers apply BERT's 80/10/10 replacement (masking.replace_*): which
tokens are corrupted how is part of the mask's randomness.

Note on "unclipped": for K > 1 the paper's ratio is its own approximation of
p_rand(x^M)/p_prop(x^M) (see `mapnet_cli.mapnet.sampling`), so even unclipped
weights are not exactly unbiased; the report's distance to the uniform mean
gradient shows how far off they are. For K = 1 the ratio is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from ..masking import apply_replacement, eligible_positions, mask_counts, uniform_mask
from ..mapnet import sampling
from .gradients import MaskedExample

SCHEMES = ("uniform", "mapnet_clipped", "mapnet_unclipped", "mapnet_unweighted")
SOURCES = {"uniform": "uniform", "mapnet_clipped": "mapnet", "mapnet_unclipped": "mapnet", "mapnet_unweighted": "mapnet"}
_IMPORTANCE = {"uniform": "none", "mapnet_clipped": "clipped", "mapnet_unclipped": "unclipped", "mapnet_unweighted": "none"}

# log_p = proposal(input_ids (B, T), attention_mask (B, T), eligible (B, T)), -inf off `eligible`
Proposal = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class SentenceDraw:
    """M masks of one sentence from one sampler, unweighted."""

    examples: list[MaskedExample]
    log_ratio: torch.Tensor  # (M,) float64: log r per mask (0 for uniform masks)
    eligible: int  # n, the positions that could be masked


def _examples(ids: torch.Tensor, inputs: torch.Tensor, chosen: torch.Tensor, pad_id: int) -> list[MaskedExample]:
    attention = ids != pad_id
    attention = None if bool(attention.all()) else attention  # None lets attention use its fastest kernel
    out = []
    for m in range(chosen.shape[0]):
        pos = chosen[m].nonzero().squeeze(1)  # ascending
        out.append(MaskedExample(inputs[m], pos, ids[pos], 1.0, attention))
    return out


def draw_uniform(ids: torch.Tensor, special_ids: Mapping[str, int], vocab_size: int, masking, masks: int,
                 seed: int) -> SentenceDraw:
    """M i.i.d. RandMask masks of the 1-D sequence `ids` (same K rule as pretraining)."""
    rows = ids[None].expand(masks, -1)
    eligible = eligible_positions(rows, special_ids)
    g = torch.Generator().manual_seed(seed)
    chosen = uniform_mask(rows, eligible, masking.mask_prob, masking.mask_count, g)
    inputs = apply_replacement(rows, chosen, vocab_size, special_ids, masking.replace_mask, masking.replace_random, g)
    return SentenceDraw(_examples(ids, inputs, chosen, special_ids["pad"]), torch.zeros(masks, dtype=torch.float64),
                        int(eligible[0].sum()))


def draw_proposal(ids: torch.Tensor, special_ids: Mapping[str, int], vocab_size: int, masking, masks: int, seed: int,
                  proposal: Proposal) -> SentenceDraw:
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


def scheme_weights(scheme: str, log_ratio: torch.Tensor, clip_epsilon: float) -> torch.Tensor:
    """Per-mask importance weights of `scheme` (float64; the same rule as training, via `sampling`)."""
    return sampling.importance_weights(log_ratio, _IMPORTANCE[scheme], clip_epsilon).double() if scheme != "uniform" \
        else torch.ones_like(log_ratio, dtype=torch.float64)


__all__ = ["SCHEMES", "SOURCES", "Proposal", "SentenceDraw", "draw_uniform", "draw_proposal", "scheme_weights"]
