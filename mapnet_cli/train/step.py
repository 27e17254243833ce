"""One optimizer step over a rank's micro-batches (`train_step`), and the precision it runs in.

Loss normalisation (mapnet choice). The objective of a step is the mean over
the global batch's B sequences of each sequence's mean masked-token loss — the
paper's per-sentence loss l(theta; x^M, x), the quantity MAP-Net's importance
weight multiplies. Each micro-batch contributes sum(l_s) x world / B; DDP
averages over ranks, so the summed gradient is exactly that of one big batch,
with no extra communication (B is a constant). Per-token normalisation would
need the global masked count and would let long sequences outweigh short ones,
which breaks per-sequence importance weighting.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from .. import distributed
from ..masking.strategy import MicroBatch, mlm_loss


class NonFiniteLoss(Exception):
    pass


@dataclass
class StepStats:
    loss: float        # mean per-sequence loss over the global batch
    grad_norm: float   # before clipping
    lr: float
    masked: int
    tokens: int


def train_step(model, optimizer, scheduler, batches: list[MicroBatch], *, scale: float, grad_clip: float,
               autocast, info: distributed.DistInfo, batch_size: int, loss_fn=mlm_loss) -> StepStats:
    """Forward/backward every micro-batch (gradients all-reduced on the last), clip, step."""
    model.train()
    totals = torch.zeros(3, dtype=torch.float64, device=info.device)
    for i, batch in enumerate(batches):
        with distributed.no_sync(model, sync=i == len(batches) - 1):
            with autocast:
                loss, seq_sum, masked = loss_fn(model, batch, scale)
            loss.backward()
        totals += torch.stack([seq_sum.double(), masked.double(), torch.tensor(float(batch.tokens), device=info.device, dtype=torch.float64)])
    params = [p for p in model.parameters() if p.grad is not None]
    grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params])  # logged every step
    if grad_clip:  # not clip_grad_norm_(inf): it would still multiply every gradient by 1.0, a full pass for nothing
        torch.nn.utils.clip_grads_with_norm_(params, grad_clip, grad_norm)
    distributed.all_reduce_sum(totals, info)
    seq_sum, masked, tokens, norm = torch.cat([totals, grad_norm.double().view(1)]).tolist()  # the one sync
    lr = optimizer.param_groups[0]["lr"]
    if not (np.isfinite(seq_sum) and np.isfinite(norm)):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteLoss(f"loss {seq_sum / batch_size:.4g}, gradient norm {norm:.4g}")
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return StepStats(seq_sum / batch_size, norm, lr, int(masked), int(tokens))


def precision_context(precision: str, device: torch.device):
    bf16 = precision == "bf16" or (precision == "auto" and device.type == "cuda")
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


__all__ = ["NonFiniteLoss", "StepStats", "train_step", "precision_context"]
