"""Everything random in a MAP-Net micro-batch, drawn on the host before the step.

    draws = draw_on_host(ids, attention_mask, special_ids=..., vocab_size=V, step=step, total_steps=S,
                         seed=seed, slots=slots, masking=settings.masking, rng=SequenceRNG(keys))
    draw = draw_masks(proposal, ids, attention_mask, ..., draws=draws.to(device))   # pinned, non-blocking copies

Why. MAP-Net chooses its masks on the device, from the proposal's output, but everything else about them is known
before the proposal runs: which positions are eligible, K per row, the exploration coins, each row's order
uniforms (uniform rows take the K smallest, MAP-Net rows use them as Gumbel noise or the systematic design's
order), the systematic starts, the 80/10/10 draws and the random token ids. Drawn on the device, each was a small
copy to the device from pageable memory, and the random ids' table a boolean index: a wait for the device's queue.
Drawn here they travel with the batch, and sum K and max K are host integers, so the masked positions come from a
fixed-size `nonzero_static` and the last block's query width needs no read (docs/performance.md, the step profile).
The draws are exactly those `draw_masks` made from the same streams (the order uniforms, then the replacement's
two uniforms per position): a uniformly masked row gets the very mask and replacement the uniform strategy gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace

import torch

from ...settings import MaskingSettings
from .. import uniform
from .sampling import exploration_coins, explore_probability


@dataclass
class HostDraws:
    eligible: torch.Tensor  # (B, T) bool: not special, not pad
    counts: torch.Tensor  # (B,) long: K per row
    coins: torch.Tensor  # (B,) bool: masked uniformly (the exploration coin)
    order: torch.Tensor  # (B, T) float32: the first draw of each row's stream
    start: torch.Tensor | None  # (B,) float64: systematic starts (importance "ht"), else None
    choice: torch.Tensor  # (B, T) float32: the 80/10/10 choice draws
    random_ids: torch.Tensor  # (B, T) long: the random replacement token of each position
    p_uniform: float  # the exploration probability of this step
    total: int  # sum of K: the micro-batch's masked positions
    width: int  # max K: the most masked positions in one row

    def to(self, device: torch.device | str) -> HostDraws:
        """On `device`: pinned, non-blocking copies on CUDA (the host goes on while they travel)."""
        device = torch.device(device)
        pin = device.type == "cuda"

        def move(t: torch.Tensor) -> torch.Tensor:
            if t.device == device or (device.type == t.device.type and device.index is None):
                return t
            return (t.pin_memory() if pin and t.device.type == "cpu" else t).to(device, non_blocking=True)

        return replace(
            self, **{f.name: move(t) for f in fields(self) if isinstance(t := getattr(self, f.name), torch.Tensor)}
        )


def draw_on_host(
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
) -> HostDraws:
    """The draws of one micro-batch from CPU tensors; `rng` as in `objective.draw_masks` (default: the
    training loop's keys (seed, step, slot) in the `uniform.TRAIN_MASKS` domain)."""
    B, T = input_ids.shape
    if len(slots) != B:
        raise ValueError(f"{len(slots)} slots for a batch of {B}")
    if rng is None:
        rng = uniform.SequenceRNG(uniform.sequence_keys(seed, step, slots, uniform.TRAIN_MASKS))
    eligible = uniform.eligible_positions(input_ids, special_ids)
    if attention_mask is not None:
        eligible &= attention_mask.bool()
    k = uniform.mask_counts(eligible.sum(1), masking.mask_prob)
    p_uniform = explore_probability(
        step, total_steps, masking.mapnet.explore_start, masking.mapnet.explore_end, masking.mapnet.explore_steps
    )
    coins = exploration_coins(seed, step, slots, p_uniform)
    order = rng.uniform(T)
    start = (
        uniform.keyed_uniforms(seed, step, slots, uniform.SYSTEMATIC_START)
        if masking.mapnet.importance == "ht"
        else None
    )
    choice, random_ids = uniform.replacement_draws((B, T), vocab_size, special_ids, "cpu", rng)
    counts = k.tolist()  # host tensors: no device is involved
    return HostDraws(
        eligible, k, coins, order, start, choice, random_ids, p_uniform, total=sum(counts), width=max(counts, default=0)
    )


__all__ = ["HostDraws", "draw_on_host"]
