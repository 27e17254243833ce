"""Masking strategies: where masks are drawn, how each position's loss is weighted, what is learned.

    strategy = train.training_strategy(settings, model, data, info)   # right after the encoder is built
    batch = strategy.micro_batch(ids, step, slots, keys, device)
    loss, seq_sum, masked = strategy.loss_fn(step, with_stats)(ddp, batch, scale)
    strategy.after_step()                                        # every rank, after the optimizer step

Every strategy has the same interface (`Strategy` below), so `train.Run` never asks which one it runs:
`UniformTraining`, `StratifiedTraining` and `FrequencyTraining` here, `adaptive.AdaptiveTraining` and
`mapnet.training.MapnetTraining`. Where each one samples (in `micro_batch`, or in the forward pass from the
proposal network), how it weights a masked position's loss (1, m |S_j| / n, (K/n) / pi_i, the paper's
per-sequence ratio) and what it learns (nothing, AMLM's table, the proposal), in one table:
docs/masking.md#beyond-the-paper-unbiased-per-position-weights-variance-targeted-proposals-no-network-baselines.
Randomness: masks come from per-sequence streams keyed by (seed, step, global slot)
(`masking.uniform.SequenceRNG`), so they do not depend on the batch split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import torch

from ..data.unigram import token_counts
from . import designs
from .uniform import (
    STRATA,
    SYSTEMATIC_START,
    SequenceRNG,
    apply_replacement,
    eligible_positions,
    keyed_uniforms,
    mask_counts,
    sequence_keys,
    uniform_mask,
)


@dataclass
class MicroBatch:
    inputs: torch.Tensor | None  # (b, T) corrupted ids; None with MAP-Net (masked in the forward pass)
    targets: torch.Tensor  # (b, T) original ids
    mask: torch.Tensor | None  # (b, T) bool, positions to predict; None with MAP-Net
    attention_mask: torch.Tensor | None  # (b, T) bool, None when nothing is padded; (b, 1, T, T): hybrid.py's
    tokens: int  # non-pad tokens
    slots: range | None = None  # the rows' global batch slots (key MAP-Net's exploration coins)
    keys: Sequence[int] | None = None  # the rows' mask-stream keys (MAP-Net's `draws` were drawn from them)
    weights: torch.Tensor | None = None  # (b, T) float loss weight of each masked position; None = all 1
    positions: torch.Tensor | None = None  # (N,) flat row-major indices of `mask`, computed on the host (`to_device`)
    width: int | None = None  # the most masked positions in one row (the last block's query grid)
    draws: Any = None  # MAP-Net: the micro-batch's randomness drawn on the host (`mapnet.host_draws`)


def to_device(batch: MicroBatch, device: torch.device) -> MicroBatch:
    """A micro-batch drawn on the host, with its masked positions and query width worked out there
    (so the step never reads them back from the device), copied to `device` without blocking.

    Why on the host: the training step's only device-to-host reads would otherwise be the masks'
    `nonzero` and the widest row of the last block's query grid (`model.bert.query_layout`), each a
    stall that empties an accelerator's queue once per micro-batch. Drawing a 32 x 128 batch's uniform
    masks costs the host ~1.5 ms (`benchmarks/profile_step.py`; the unit schemes more), and with
    nothing read back the host prepares the next step's batch while the device still runs this one.
    Pinned memory makes the copies asynchronous.
    """
    if batch.mask is not None and batch.positions is None:
        if batch.mask.device.type != "cpu":
            raise ValueError("to_device takes a batch drawn on the host")
        batch.positions = batch.mask.flatten().nonzero().squeeze(1)
        batch.width = int(batch.mask.sum(1).max()) if batch.mask.numel() else 0
    if device.type == "cpu":
        return batch
    pin = device.type == "cuda"

    def move(t: torch.Tensor | None) -> torch.Tensor | None:
        if t is None or t.device == device:
            return t
        return (t.pin_memory() if pin else t).to(device, non_blocking=True)

    return replace(
        batch,
        inputs=move(batch.inputs),
        targets=move(batch.targets),
        mask=move(batch.mask),
        attention_mask=move(batch.attention_mask),
        weights=move(batch.weights),
        positions=move(batch.positions),
        draws=None if batch.draws is None else batch.draws.to(device),
    )


def mlm_loss(model, batch: MicroBatch, scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss to backpropagate, detached sum of unweighted per-sequence losses, masked count).

    With per-position weights the sequence's loss is sum_{i in S} w_i l_i / K; the
    logged sum stays unweighted, so it compares across strategies.
    """
    return loss_terms(mlm_output(model, batch), batch, scale)


def mlm_output(model, batch: MicroBatch):
    """The encoder's `MLMOutput` at the batch's masked positions (a strategy that also reads the logits
    or token losses, `adaptive`, calls this and then `loss_terms`)."""
    if batch.positions is not None:  # worked out on the host: nothing is read back from the device
        return model(batch.inputs, batch.attention_mask, batch.positions, targets=batch.targets, width=batch.width)
    return model(batch.inputs, batch.attention_mask, batch.mask, targets=batch.targets)


def loss_terms(out, batch: MicroBatch, scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`mlm_loss`'s three terms from an `MLMOutput` of `batch`."""
    seq = out.sequence_losses
    if batch.weights is not None:
        at = (
            batch.weights.flatten().index_select(0, batch.positions)
            if batch.positions is not None
            else batch.weights[batch.mask]
        )
        seq = designs.weighted_sequence_losses(out.token_losses, out.rows, at, batch.mask.sum(1))
    return seq.sum() * scale, out.sequence_losses.detach().sum(), batch.mask.sum()


def batch_tensors(
    ids: np.ndarray, special_ids: dict, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor | None, int]:
    targets = torch.from_numpy(ids.astype(np.int64)).to(device, non_blocking=True)
    pad = ids == special_ids["pad"]
    attn = torch.from_numpy(~pad).to(device) if pad.any() else None  # decided on the CPU: no device sync
    return targets, attn, int((~pad).sum())


class Strategy(Protocol):
    """What a masking strategy provides to the training loop."""

    model: torch.nn.Module  # the encoder
    net: torch.nn.Module  # what DDP wraps (the encoder, or encoder + proposal as one module)
    copies: int  # batch slots each distinct sequence fills (1 except `stratified`)

    @property
    def modules(self) -> dict[str, torch.nn.Module]: ...  # checkpoint layout: prefix -> module

    @property
    def optim_modules(self) -> list[torch.nn.Module]: ...

    def optim_lrs(self, lr: float) -> list[float]: ...  # peak LR of each of optim_modules

    def micro_batch(
        self, ids: np.ndarray, step: int, slots: range, keys: Sequence[int], device: torch.device
    ) -> MicroBatch: ...

    def loss_fn(self, step: int, with_stats: bool, pieces: int = 1): ...  # pieces: per sequence, this step

    def after_step(self) -> None: ...  # every rank, after each optimizer step

    def frozen(
        self, step: int
    ) -> list[torch.nn.Parameter]: ...  # take no update at `step` (their gradients are dropped)

    def metrics(self) -> dict[str, Any]: ...  # a collective on log steps: every rank calls it

    def compile(self) -> None: ...

    def checkpoint_extra(self) -> dict[str, Any]: ...

    def check_resume(self, meta: dict, ckpt) -> None: ...


class UniformTraining:
    """The uniform strategy: batches arrive masked, the encoder is the only network."""

    copies = 1

    def __init__(self, settings, model: torch.nn.Module, data, info=None):
        self.settings, self.model, self.net = settings, model, model
        self.special_ids, self.vocab_size = data.special_ids, data.vocab_size

    @property
    def modules(self) -> dict[str, torch.nn.Module]:
        return {"": self.model}

    @property
    def optim_modules(self) -> list[torch.nn.Module]:
        return [self.model]

    def optim_lrs(self, lr: float) -> list[float]:
        return [lr]

    def micro_batch(self, ids, step, slots, keys, device) -> MicroBatch:
        """Uniform masks + 80/10/10 replacement, each row from its own keyed stream."""
        m = self.settings.masking
        targets, attn, tokens = batch_tensors(ids, self.special_ids, device)
        rng = SequenceRNG(keys)
        mask = uniform_mask(targets, eligible_positions(targets, self.special_ids), m.mask_prob, m.mask_count, rng)
        inputs = apply_replacement(
            targets, mask, self.vocab_size, self.special_ids, m.replace_mask, m.replace_random, rng
        )
        return MicroBatch(inputs, targets, mask, attn, tokens, slots=slots, keys=list(keys))

    def loss_fn(self, step: int, with_stats: bool, pieces: int = 1):
        return mlm_loss

    def after_step(self) -> None:
        pass

    def frozen(self, step: int) -> list[torch.nn.Parameter]:
        return []

    def metrics(self) -> dict[str, Any]:
        return {}

    def compile(self) -> None:
        pass  # the encoder's blocks are compiled by the run, whatever the strategy

    def checkpoint_extra(self) -> dict[str, Any]:
        return {}

    def check_resume(self, meta: dict, ckpt) -> None:
        pass


def strata_of(
    eligible: torch.Tensor, k: torch.Tensor, order_uniforms: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """A random partition of each row's eligible positions into m = max(1, round(n / K)) strata of
    near-equal size (dealt round-robin in a random order): (stratum id (B, T), -1 off `eligible`; m (B,))."""
    B, T = eligible.shape
    n = eligible.sum(1)
    m = torch.floor(n.double() / k.clamp(min=1).double() + 0.5).long().clamp(min=1)
    scores = order_uniforms.masked_fill(~eligible, 2.0)  # ineligible rank last
    order = scores.argsort(dim=1, stable=True)
    ranks = torch.empty_like(order).scatter_(1, order, torch.arange(T, device=order.device).expand(B, T))
    stratum = torch.where(eligible, ranks % m[:, None], torch.full_like(ranks, -1))
    return stratum, m


def stratified_masks(
    targets: torch.Tensor,
    eligible: torch.Tensor,
    mask_prob: float,
    group_uniforms: torch.Tensor,
    offsets: torch.Tensor,
    copy_index: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Fully-explored masking (Zheng et al. 2020): (mask (B, T), per-position weights (B, T)).

    Row b's partition comes from `group_uniforms[b]` — the same for every copy of one
    sequence — and copy j takes stratum (offset + j) mod m, so copies of a sequence never
    share a masked position (while j < m), and over j = 0..m-1 every eligible position is
    masked exactly once. Each copy's stratum is uniform over the m strata, so position i is
    masked with probability 1/m; the weight m |S_j| / n makes the loss
    sum_{i in S_j} w_i l_i / |S_j| = (m / n) sum_{i in S_j} l_i, whose mean over strata is
    (1/n) sum_i l_i — the uniform-masking expectation — even when strata differ in size by one.
    """
    k = mask_counts(eligible.sum(1), mask_prob)
    stratum, m = strata_of(eligible, k, group_uniforms)
    pick = (torch.floor(offsets.double() * m.double()).long() + copy_index) % m
    mask = stratum == pick[:, None]
    size = mask.sum(1).double()
    n = eligible.sum(1).clamp(min=1).double()
    w = (m.double() * size / n).to(torch.float32)
    return mask, torch.where(mask, w[:, None], torch.zeros((), dtype=torch.float32, device=mask.device))


class StratifiedTraining(UniformTraining):
    """Fully-explored masking: each sequence fills `masking.stratified.copies` slots of the batch, masked
    with different strata of one random partition; a step therefore sees batch_size / copies distinct
    sequences (the same masked-token count and compute as uniform)."""

    def __init__(self, settings, model, data, info=None):
        super().__init__(settings, model, data)
        self.copies = settings.masking.stratified.copies

    def micro_batch(self, ids, step, slots, keys, device) -> MicroBatch:
        m, t = self.settings.masking, self.settings.train
        targets, attn, tokens = batch_tensors(ids, self.special_ids, device)
        eligible = eligible_positions(targets, self.special_ids)
        groups = [s // self.copies for s in slots]
        group_rng = SequenceRNG(sequence_keys(t.seed, step, groups, STRATA))
        order = group_rng.uniform(targets.shape[1], device)
        offsets = group_rng.uniform(1, device)[:, 0]
        copy_index = torch.tensor([s % self.copies for s in slots], device=device)
        mask, weights = stratified_masks(targets, eligible, m.mask_prob, order, offsets, copy_index)
        rng = SequenceRNG(keys)
        inputs = apply_replacement(
            targets, mask, self.vocab_size, self.special_ids, m.replace_mask, m.replace_random, rng
        )
        return MicroBatch(inputs, targets, mask, attn, tokens, slots=slots, keys=list(keys), weights=weights)


def frequency_masks(
    targets: torch.Tensor,
    eligible: torch.Tensor,
    type_scores: torch.Tensor,
    mask_prob: float,
    alpha: float,
    order_uniforms: torch.Tensor,
    start_uniforms: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Static proposal p_i proportional to type_scores[token_i], mixed with uniform, sampled by systematic PPS:
    (mask, HT weights, pi), all (B, T)."""
    k = mask_counts(eligible.sum(1), mask_prob)
    scores = torch.where(
        eligible, type_scores[targets], torch.zeros((), dtype=type_scores.dtype, device=targets.device)
    )
    pi = designs.mix_with_uniform(designs.inclusion_probabilities(scores, k), eligible, k, alpha)
    mask = designs.systematic_sample(pi, order_uniforms, start_uniforms)
    return mask, designs.ht_weights(pi, mask, k, eligible), pi


def pps_micro_batch(strategy, ids, step: int, slots, keys, device, scores_on, ht_weights: bool = True) -> MicroBatch:
    """A micro-batch with exactly K masks per row drawn by systematic PPS from per-type scores, as `frequency_masks`
    draws them: the draw of the frequency arm and of the adaptive one, whose scores differ only in where they come
    from. `scores_on(device)` gives the (V,) scores on the batch's device; `ht_weights` False drops the HT weights
    (a biased, unweighted objective)."""
    m, t = strategy.settings.masking, strategy.settings.train
    targets, attn, tokens = batch_tensors(ids, strategy.special_ids, device)
    eligible = eligible_positions(targets, strategy.special_ids)
    rng = SequenceRNG(keys)
    order = rng.uniform(targets.shape[1], device)
    start = keyed_uniforms(t.seed, step, slots, SYSTEMATIC_START, device)
    mask, weights, _ = frequency_masks(
        targets, eligible, scores_on(targets.device), m.mask_prob, m.mix_uniform, order, start
    )
    inputs = apply_replacement(
        targets, mask, strategy.vocab_size, strategy.special_ids, m.replace_mask, m.replace_random, rng
    )
    return MicroBatch(
        inputs, targets, mask, attn, tokens, slots=slots, keys=list(keys), weights=weights if ht_weights else None
    )


class FrequencyTraining(UniformTraining):
    """A static, no-network proposal: p proportional to count(token type)^-power (rare types masked more, as
    word2vec's subsampling keeps them), per-token mixture with uniform (masking.frequency.mix_uniform), HT weights.
    The baseline a learned proposal must beat: it needs no network and no training signal."""

    def __init__(self, settings, model, data, info=None):
        super().__init__(settings, model, data)
        counts = torch.from_numpy(token_counts(data)).double()
        self.type_scores = (counts + 1.0).pow(-settings.masking.frequency.power)

    def micro_batch(self, ids, step, slots, keys, device) -> MicroBatch:
        return pps_micro_batch(self, ids, step, slots, keys, device, self._scores_on)

    def _scores_on(self, device) -> torch.Tensor:
        if self.type_scores.device != device:  # once, not a host-to-device copy per micro-batch
            self.type_scores = self.type_scores.to(device)
        return self.type_scores


__all__ = [
    "MicroBatch",
    "to_device",
    "mlm_loss",
    "mlm_output",
    "loss_terms",
    "Strategy",
    "UniformTraining",
    "StratifiedTraining",
    "FrequencyTraining",
    "strata_of",
    "stratified_masks",
    "frequency_masks",
    "pps_micro_batch",
]
