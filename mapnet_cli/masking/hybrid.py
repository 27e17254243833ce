"""The hybrid masked/causal objective (`masking.strategy = "hybrid"`): one encoder, most rows masked, some causal.

    mapnet pretrain shards/ --out runs/hybrid --recipe hour --masking hybrid   # one row in 16 causal (GPT-BERT's 1:15)

GPT-BERT (Charpentier & Samuel, BabyLM 2024) trains one transformer on masked and on causal language modelling at
once, a 1:15 causal-to-masked share of the data, and finds the mix beats either objective alone on BabyLM's grammar
tests. Here a batch slot s is causal when s mod `masking.hybrid.causal_every` is 0 (global slots: the same rows
whatever the micro-batch split or the number of ranks); every other row is masked exactly as `uniform` masks it.

A causal row predicts *every* eligible token from the tokens before it, with the MLM's head and alignment: the
output at position j predicts token j, as a masked row's does. GPT-BERT shifts the masked outputs instead (the
output at j - 1 predicts a masked token j), so that both objectives predict the next token; that would change
what a masked position's output means, and with it pseudo-log-likelihood scoring, `mapnet blimp` and the exported
Hugging Face model. So the causal row's *inputs* shift: position j holds token j - 1 (position 0 keeps `[CLS]`,
so position 1 holds it too) and attends to positions <= j only. Position j then sees tokens 0..j-1 and never token
j, which is what "predict j from the left context" asks, and the same weights serve both rows. With the modern
block's rotary positions attention depends on offsets only, so the one-position shift costs nothing; with learned
absolute positions a causal row's token j-1 sits at position j, a mismatch the masked rows do not have.

The step's objective stays mapnet's (`train/step.py`): the mean over the batch's rows of each row's mean loss over
its predicted positions, a causal row counting once like any other though it predicts ~3x the positions at 30%
masking. The logged training loss therefore mixes next-token and masked-token losses and compares with no other
strategy's; the held-out loss (uniform exact-K masks, every strategy the same) is the comparison.
"""

from __future__ import annotations

import torch

from .strategy import MicroBatch, UniformTraining
from .uniform import eligible_positions


def causal_rows(slots: range, every: int) -> list[bool]:
    """Which rows of a micro-batch with these global batch slots are causal."""
    return [s % every == 0 for s in slots]


def causal_batch(batch: MicroBatch, causal: torch.Tensor, special_ids) -> MicroBatch:
    """`batch` (masked as `uniform` masks) with the rows `causal` (b,) bool made causal rows: inputs shifted one
    position right ([CLS] kept at 0), every eligible position predicted, and a (b, 1, T, T) attention mask: a
    causal row's position j sees the real keys at positions <= j, a masked row's every real key."""
    targets = batch.targets
    b, T = targets.shape
    shifted = torch.cat([targets[:, :1], targets[:, :-1]], dim=1)
    inputs = torch.where(causal[:, None], shifted, batch.inputs)
    mask = torch.where(causal[:, None], eligible_positions(targets, special_ids), batch.mask)
    real = (
        torch.ones(b, T, dtype=torch.bool, device=targets.device)
        if batch.attention_mask is None
        else batch.attention_mask.bool()
    )
    # A causal row's key j holds token j - 1: real where token j - 1 is (position 0 holds [CLS], always real).
    real_keys = torch.where(causal[:, None], torch.cat([real[:, :1], real[:, :-1]], dim=1), real)
    seen = torch.ones(T, T, dtype=torch.bool, device=targets.device).tril()  # query j, key i: i <= j
    attention = real_keys[:, None, None, :] & torch.where(causal[:, None, None], seen, torch.ones_like(seen))[:, None]
    return MicroBatch(
        inputs, targets, mask, attention, batch.tokens, slots=batch.slots, keys=batch.keys, weights=batch.weights
    )


class HybridTraining(UniformTraining):
    """Uniform masking for most rows; one slot in `masking.hybrid.causal_every` a causal row (`causal_batch`)."""

    def micro_batch(self, ids, step, slots, keys, device) -> MicroBatch:
        batch = super().micro_batch(ids, step, slots, keys, device)
        causal = torch.tensor(causal_rows(slots, self.settings.masking.hybrid.causal_every), device=device)
        return causal_batch(batch, causal, self.special_ids) if bool(causal.any()) else batch


__all__ = ["HybridTraining", "causal_batch", "causal_rows"]
