"""The MAP-Net objective (paper eq. 10) and the joint loss of one micro-batch.

    joint = MapnetJoint(model, proposal)                 # one module: DDP wraps both networks at once
    part, stats = joint(input_ids, attention_mask, special_ids=ids, vocab_size=V, step=step, total_steps=S,
                        seed=seed, slots=slots, rng=rng, masking=settings.masking)
    M = map_training_sequences(step, S, seed, range(B), settings.masking)   # known before any forward
    part.total(settings.masking, enc_scale=world / B, map_scale=world / max(M, 1)).backward()

Paper 3.3, Algorithm 1: a sequence is masked uniformly with probability p_t, else by K Gumbel-top-k draws from
MAP-Net's p_prop over the unmasked sentence; the encoder's loss is w * l(x^M), MAP-Net's is eq. 10, and

    L_MAP = sum_k -log p_prop(pos_k) (l_k - mean_k l_k),     total = L_enc + lambda L_MAP (`masking.mapnet.loss_on`).

Sums come back, scaled by the global batch's counts (B sequences; M train MAP-Net, known from the coins): one gradient
however the batch is split. The steps, lambda, train_every and the rest: docs/internals.md#maskingmapnetobjectivepy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ...settings import MaskingSettings
from .. import designs, uniform
from . import stats as stats_mod
from .host_draws import HostDraws, draw_on_host
from .proposal import ProposalNetwork
from .sampling import (
    exploration_coins,
    explore_probability,
    gumbel_keys,
    importance_weights,
    log_importance_ratio,
    top_k_mask,
)
from .targets import TokenLossReference, gradnorm_proxy, regression_objective


def mapnet_objective(log_probs: torch.Tensor, chosen: torch.Tensor, token_losses: torch.Tensor) -> torch.Tensor:
    """Eq. 10 per sequence, (B,): sum_k -log p(pos_k) * (l_k - mean_k l_k).

    `log_probs` (B, T) carries MAP-Net's gradient; `token_losses` (B, T) holds
    the encoder's loss at chosen positions (anything elsewhere) and is
    detached here, so no gradient flows from this objective into the encoder.
    Rows with fewer than two chosen positions give 0 (the baseline equals l_1).
    """
    losses = torch.where(chosen, token_losses.detach().to(torch.float32), torch.zeros((), device=chosen.device))
    k = chosen.sum(1, keepdim=True)
    baseline = losses.sum(1, keepdim=True) / k.clamp(min=1)
    # where() before the product: -log p is +inf off the eligible set.
    neg_log_p = torch.where(chosen, -log_probs, torch.zeros((), device=chosen.device))
    advantage = torch.where(chosen, losses - baseline, torch.zeros((), device=chosen.device))
    return (neg_log_p * advantage).sum(1)


@dataclass
class MicroBatchLoss:
    """Sums of one micro-batch (0-d tensors on the device: reading them never forces a sync);
    `total` scales them by the global batch's counts."""

    enc_sum: torch.Tensor  # sum_b w_b * l_b (gradient into the encoder and the shared embedding)
    map_sum: torch.Tensor  # sum over MAP-training sequences of eq. 10 (gradient into MAP-Net and the shared embedding)
    loss_sum: torch.Tensor  # sum_b l_b, unweighted and detached: the logged loss, comparable with uniform runs
    sequences: int  # sequences in this micro-batch
    map_sequences: torch.Tensor  # sequences that train MAP-Net here
    masked: torch.Tensor  # masked positions

    def total(
        self, masking: MaskingSettings, enc_scale: float | None = None, map_scale: float | None = None
    ) -> torch.Tensor:
        """L_enc + lambda L_MAP ("map", default) or L_MAP + lambda L_enc ("encoder"); see the module doc.

        With gradient accumulation over ranks whose gradients DDP averages,
        pass enc_scale = world / B (B the global batch, as `train.mlm_loss`)
        and map_scale = world / max(M, 1) (M from `map_training_sequences` over the
        whole global batch); the step's gradient is then that of one big batch.
        Left out, each sum is divided by this micro-batch's own count.
        """
        enc = self.enc_sum * enc_scale if enc_scale is not None else self.enc_sum / max(self.sequences, 1)
        mp = self.map_sum * map_scale if map_scale is not None else self.map_sum / self.map_sequences.clamp(min=1)
        lam = masking.mapnet.loss_weight
        return enc + lam * mp if masking.mapnet.loss_on == "map" else mp + lam * enc


def map_training_sequences(
    step: int,
    total_steps: int,
    seed: int,
    slots: Sequence[int],
    masking: MaskingSettings,
    eligible_counts: Sequence[int] | torch.Tensor | None = None,
) -> int:
    """How many of `slots` will train MAP-Net at `step` — computable before any forward pass.

    The coins are pure functions of (seed, step, slot), so a loop can count
    over the whole global batch (every rank knows every slot) and pass
    map_scale = world / max(M, 1) to `MicroBatchLoss.total` without an
    all-reduce (M = 0 happens when p_t = 1 and masking.mapnet.train_on_uniform is off; then
    every map_sum is 0 and the scale is irrelevant). Sequences with no eligible
    token (K = 0) are left out when `eligible_counts` are given.
    """
    if masking.mapnet.train_on_uniform:
        rows = torch.ones(len(slots), dtype=torch.bool)
    else:
        p = explore_probability(
            step, total_steps, masking.mapnet.explore_start, masking.mapnet.explore_end, masking.mapnet.explore_steps
        )
        rows = ~exploration_coins(seed, step, slots, p)
    if eligible_counts is not None:
        rows &= torch.as_tensor(eligible_counts).cpu() > 0
    return int(rows.numpy().sum())  # numpy: a host count, not an operator a sync counter would flag


@dataclass
class MaskDraw:
    """One micro-batch's masks: what was chosen, how, and with what weight."""

    eligible: torch.Tensor  # (B, T) bool: not special, not pad
    counts: torch.Tensor  # (B,) K per sequence
    uniform_rows: torch.Tensor  # (B,) bool: masked uniformly (exploration) rather than by MAP-Net
    log_probs: torch.Tensor  # (B, T) MAP-Net's log p_prop (with gradient when it learns), -inf off `eligible`
    chosen: torch.Tensor  # (B, T) bool: the K masked positions
    log_ratio: torch.Tensor  # (B,) float64 log r (paper's formula), also for uniform rows
    weights: torch.Tensor  # (B,) float32 importance weights (1 for uniform rows), detached
    corrupted: torch.Tensor  # (B, T) encoder input after the 80/10/10 replacement
    p_uniform: float  # the exploration probability of this step
    token_weights: torch.Tensor | None = None  # (B, T) HT weights at chosen positions (importance "ht"), else None
    inclusion: torch.Tensor | None = None  # (B, T) pi_i of the HT design (importance "ht"), else None
    positions: torch.Tensor | None = None  # (N,) flat row-major indices of `chosen` (N = sum of K)
    width: int | None = None  # max K: the most chosen positions in one row


PROPOSAL_FLOOR = 1e-9  # smallest proposal probability of an eligible position under importance "ht"


def ht_inclusion(
    log_p: torch.Tensor, eligible: torch.Tensor, k: torch.Tensor, masking: MaskingSettings
) -> torch.Tensor:
    """pi (B, T) of `masking.mapnet.importance = "ht"`: the proposal at temperature T, capped PPS, mixed with
    uniform."""
    tempered = torch.softmax(
        (log_p.detach().to(torch.float64) / masking.mapnet.temperature).masked_fill(~eligible, float("-inf")), dim=-1
    ).nan_to_num(0.0)
    # Every eligible position keeps pi > 0 even when the softmax underflows (alpha = 0, low T): HT is
    # unbiased only over positions that can be drawn. The mixture is what bounds the weights.
    tempered = torch.where(eligible, tempered.clamp(min=PROPOSAL_FLOOR), tempered)
    pi = designs.inclusion_probabilities(tempered, k)
    return designs.mix_with_uniform(pi, eligible, k, masking.mix_uniform)


def draw_masks(
    proposal: ProposalNetwork,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    special_ids: Mapping[str, int],
    vocab_size: int,
    step: int,
    total_steps: int,
    seed: int,
    slots: Sequence[int],
    masking: MaskingSettings,
    rng: uniform.SequenceRNG | None = None,
    learn: bool = True,
    draws: HostDraws | None = None,
) -> MaskDraw:
    """Steps 1-2 of the module doc: coin, proposal, Gumbel-top-k, weights, replacement.

    `draws`: the micro-batch's randomness, drawn on the host beforehand (`host_draws`; the training
    loop's way: then nothing here waits for the device). Without it they are drawn here from
    `input_ids` read back to the host, from `rng`, the `SequenceRNG` the uniform strategy would use
    for these sequences — given the same one, a uniformly masked sequence gets exactly the mask and
    replacement the uniform strategy gives it. Without `rng`, it is keyed as the training loop keys
    uniform masks: (seed, step, slot) in the `masking.TRAIN_MASKS` domain. `learn=False`: the
    proposal runs without autograd (a step on which it does not learn; `log_probs` then carries no
    gradient).
    """
    B, T = input_ids.shape
    device = input_ids.device
    if draws is not None and rng is not None:
        raise ValueError("draw_masks takes its randomness from draws or from rng, not both")
    if draws is None:
        draws = draw_on_host(
            input_ids.cpu(),
            None if attention_mask is None else attention_mask.cpu(),
            special_ids=special_ids,
            vocab_size=vocab_size,
            step=step,
            total_steps=total_steps,
            seed=seed,
            slots=slots,
            masking=masking,
            rng=rng,
        ).to(device)
    elif len(slots) != B:
        raise ValueError(f"{len(slots)} slots for a batch of {B}")
    eligible, k, uniform_rows, u = draws.eligible, draws.counts, draws.coins, draws.order

    with torch.set_grad_enabled(learn and torch.is_grad_enabled()):
        log_p = proposal(input_ids, attention_mask, eligible)
    # The first draw of each sequence's stream, as in masking.uniform.uniform_mask: uniform rows take the
    # K smallest u (stable on ties: the very mask uniform_mask picks), MAP rows the K largest
    # Gumbel keys log p + G(u) — or, with HT weights, the systematic PPS design ordered by u,
    # started from its own keyed uniform (so the mask stream stays the uniform strategy's).
    uniform_keys = (-u.to(torch.float64)).masked_fill(~eligible, float("-inf"))
    uniform_chosen = top_k_mask(uniform_keys, k)
    token_weights = inclusion = None
    if masking.mapnet.importance == "ht":
        inclusion = ht_inclusion(log_p, eligible, k, masking)
        proposed = designs.systematic_sample(inclusion, u, draws.start)
        chosen = torch.where(uniform_rows[:, None], uniform_chosen, proposed)
        # float64: a coin-uniform row's weights are then exactly (K/n) / (K/n) = 1.
        uniform_pi = k[:, None].double() / eligible.sum(1, keepdim=True).clamp(min=1).double()
        inclusion = torch.where(uniform_rows[:, None] & eligible, uniform_pi, inclusion)
        token_weights = designs.ht_weights(inclusion, chosen, k, eligible)
    else:
        keys = gumbel_keys(log_p, u)
        # A diverged proposal (NaN or infinite scores) must still draw exactly K, so the step reaches the
        # loop's non-finite check instead of the size assert below (top_k_mask never takes a non-finite
        # key): such keys rank last among the eligible.
        keys = torch.where(eligible & ~keys.isfinite(), torch.finfo(keys.dtype).min, keys)
        chosen = torch.where(uniform_rows[:, None], uniform_chosen, top_k_mask(keys, k))

    log_r = log_importance_ratio(log_p, chosen, eligible)
    mode = (
        "none" if masking.mapnet.importance == "ht" else masking.mapnet.importance
    )  # HT weighs positions, not sequences
    weights = importance_weights(log_r, mode, masking.mapnet.clip_epsilon)
    weights = torch.where(uniform_rows, torch.ones_like(weights), weights)
    corrupted = uniform.apply_replacement(
        input_ids,
        chosen,
        vocab_size,
        special_ids,
        masking.replace_mask,
        masking.replace_random,
        drawn=(draws.choice, draws.random_ids),
    )
    # Every row holds exactly its K (both designs draw exactly K): the flat positions have a size known
    # on the host, so finding them waits for nothing. The assert is checked on the device, asynchronously.
    torch._assert_async(chosen.sum() == draws.total, "MAP-Net drew a mask of another size than sum(K)")
    positions = torch.nonzero_static(chosen.flatten(), size=draws.total).squeeze(1)
    return MaskDraw(
        eligible,
        k,
        uniform_rows,
        log_p,
        chosen,
        log_r,
        weights,
        corrupted,
        draws.p_uniform,
        token_weights,
        inclusion,
        positions,
        draws.width,
    )


def proposal_terms(
    draw: MaskDraw, out, dense_losses: torch.Tensor, masking: MaskingSettings, reference: TokenLossReference | None
) -> torch.Tensor:
    """(B,) MAP-Net's objective per sequence for `masking.mapnet.target` (see `targets`)."""
    if masking.mapnet.target == "loss":
        return mapnet_objective(draw.log_probs, draw.chosen, dense_losses)
    if masking.mapnet.target == "gradnorm":
        target = gradnorm_proxy(out.logits, out.labels)
    else:
        if reference is None:
            raise ValueError("masking.mapnet.target 'learnability' needs the token-loss reference")
        target = reference.progress(out.labels)
    B, T = draw.chosen.shape
    log_t = torch.zeros(B, T, dtype=torch.float32, device=draw.chosen.device)
    log_t = log_t.masked_scatter(draw.chosen, target.float().clamp(min=masking.mapnet.target_floor).log())
    return regression_objective(draw.log_probs, draw.chosen, log_t)


def mapnet_micro_batch_loss(
    model: nn.Module,
    proposal: ProposalNetwork,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    special_ids: Mapping[str, int],
    vocab_size: int,
    step: int,
    total_steps: int,
    seed: int,
    slots: Sequence[int],
    masking: MaskingSettings,
    rng: uniform.SequenceRNG | None = None,
    token_kinds: Mapping[str, torch.Tensor] | None = None,
    with_stats: bool = True,
    reference: TokenLossReference | None = None,
    learn: bool = True,
    draws: HostDraws | None = None,
) -> tuple[MicroBatchLoss, stats_mod.MapnetStats | None]:
    """Mask one micro-batch with MAP-Net (or uniformly, by the exploration coin) and compute both losses.

    `model` is a `BertForMLM` (its `mlm_losses` runs the head at masked
    positions only); `slots` are the sequences' global batch slots at `step`
    (they key the exploration coin); `rng` and `draws` as in `draw_masks`. Returns the
    micro-batch's loss sums (see `MicroBatchLoss.total`) and its statistics
    (None with `with_stats=False`: steps that are not logged skip ~40 small kernels).
    `reference`: the learnability target's per-type loss average (observed here, updated per step).
    `learn=False`: MAP-Net draws the masks but does not learn (`masking.mapnet.train_every`, module doc).
    """
    draw = draw_masks(
        proposal,
        input_ids,
        attention_mask,
        special_ids=special_ids,
        vocab_size=vocab_size,
        step=step,
        total_steps=total_steps,
        seed=seed,
        slots=slots,
        masking=masking,
        rng=rng,
        learn=learn,
        draws=draws,
    )
    B, T = input_ids.shape
    device = input_ids.device
    chosen = draw.chosen
    # Through forward (not .mlm_losses) so DDP hooks stay in the path if `model` is wrapped.
    out = model(draw.corrupted, attention_mask, draw.positions, targets=input_ids, width=draw.width)
    # Dense (B, T) token losses: the positions are row-major, the order of out.token_losses.
    dense = (
        torch.zeros(B * T, dtype=out.token_losses.dtype, device=device)
        .index_copy(0, draw.positions, out.token_losses.detach())
        .view(B, T)
    )

    train_rows = (~draw.uniform_rows | masking.mapnet.train_on_uniform) & (draw.counts > 0)
    # A frozen step needs the proposal's objective only for its logged statistics.
    terms = proposal_terms(draw, out, dense, masking, reference) if learn or with_stats else None
    if learn:
        # where(), not indexing: the sum stays connected to every MAP-Net parameter even when no row
        # trains it, so DDP always sees a gradient (zero) for each one.
        map_sum = torch.where(train_rows, terms, torch.zeros((), device=device)).sum()
    else:  # zero gradients, no activations: see "Learning on every k-th step only" above
        map_sum = sum(p.sum() for p in proposal.parameters()) * 0
    if draw.token_weights is not None:
        flat_w = draw.token_weights.flatten().index_select(0, draw.positions)
        seq = designs.weighted_sequence_losses(out.token_losses, out.rows, flat_w, draw.counts)
        enc_sum = seq.float().sum()
    else:
        flat_w = None
        enc_sum = (draw.weights * out.sequence_losses.float()).sum()
    if reference is not None:
        reference.observe(out.labels, out.token_losses, flat_w)

    part = MicroBatchLoss(
        enc_sum=enc_sum,
        map_sum=map_sum,
        loss_sum=out.sequence_losses.detach().float().sum(),
        sequences=B,
        map_sequences=train_rows.sum(),
        masked=chosen.sum(),
    )
    if not with_stats:
        return part, None
    st = stats_mod.collect(
        log_probs=draw.log_probs,
        eligible=draw.eligible,
        input_ids=input_ids,
        chosen=chosen,
        uniform_rows=draw.uniform_rows,
        log_ratio=draw.log_ratio,
        weights=draw.weights,
        token_losses=dense,
        train_rows=train_rows,
        map_terms=terms,
        p_uniform=draw.p_uniform,
        clip_epsilon=masking.mapnet.clip_epsilon,
        token_kinds=token_kinds,
        token_weights=draw.token_weights,
    )
    return part, st


class MapnetJoint(nn.Module):
    """The encoder and MAP-Net as one module, so one DistributedDataParallel wraps both.

    The shared embedding is registered once (by the encoder), so
    `joint.parameters()` lists it once. `forward` is `mapnet_micro_batch_loss`.
    """

    def __init__(self, model: nn.Module, proposal: ProposalNetwork):
        super().__init__()
        if proposal.tok_embeddings is not model.encoder.tok_embeddings:
            raise ValueError("MAP-Net must share the encoder's token embedding (pass model.encoder.tok_embeddings)")
        self.model = model
        self.proposal = proposal

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs):
        return mapnet_micro_batch_loss(self.model, self.proposal, input_ids, attention_mask, **kwargs)


__all__ = [
    "mapnet_objective",
    "MicroBatchLoss",
    "MaskDraw",
    "ht_inclusion",
    "draw_masks",
    "proposal_terms",
    "map_training_sequences",
    "mapnet_micro_batch_loss",
    "MapnetJoint",
]
