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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import record_function

from .. import distributed
from ..masking.strategy import MicroBatch, mlm_loss


class NonFiniteLoss(Exception):
    def __init__(self, message: str, step: int | None = None):
        super().__init__(message)
        self.step = step  # an earlier, unread step that was the first non-finite one (None: this step)


@dataclass
class StepStats:
    lr: float
    local_tokens: int  # non-pad tokens of this rank's micro-batches (known on the host)
    finite: torch.Tensor  # 0-dim bool on the device: the gradient norm was finite (the same on every rank)
    # Read steps only (None otherwise), over every rank:
    loss: float | None = None  # mean per-sequence loss over the global batch
    grad_norm: float | None = None  # before clipping
    masked: int | None = None  # masked positions
    tokens: int | None = None  # non-pad tokens
    window_tokens: int | None = None  # non-pad tokens of this step and the `window_tokens` before it


def train_step(
    model,
    optimizer,
    scheduler,
    batches: list[MicroBatch],
    *,
    scale: float,
    grad_clip: float,
    autocast,
    info: distributed.DistInfo,
    batch_size: int,
    loss_fn=mlm_loss,
    read: bool = True,
    window_tokens: int = 0,
    first_bad: torch.Tensor | None = None,
    frozen: Sequence[torch.nn.Parameter] = (),
) -> StepStats:
    """Forward/backward every micro-batch (gradients all-reduced on the last), clip, step.

    `read`: bring the step's loss, gradient norm and masked count to the host (one sync, and one
    all-reduce of the sums) and refuse a non-finite step before the optimizer applies it. A step
    that is not read queues its work and returns at once: nothing waits for the device. Its
    gradients' finiteness stays on the device (`StepStats.finite`) for the caller to check at its next read;
    the loop reads every logging, evaluation and checkpoint step, so no checkpoint holds weights
    from after a non-finite step. `window_tokens`: this rank's tokens of the unread steps before
    this one, summed over ranks in the same all-reduce for the logged throughput. `first_bad`:
    the caller's record of the first non-finite unread step (0-dim, 0: none), read in the same sync.
    `frozen`: parameters that take no update this step. Their gradients (zeros: they are in the loss only
    so that DDP sees every parameter used) are dropped before clipping, so the optimizer skips them
    (no momentum step, no weight decay) and they count nowhere in the gradient norm.
    """
    model.train()
    totals = torch.zeros(2, dtype=torch.float64, device=info.device)
    for i, batch in enumerate(batches):
        with distributed.no_sync(model, sync=i == len(batches) - 1):
            with record_function("mapnet.forward"), autocast:
                loss, seq_sum, masked = loss_fn(model, batch, scale)
            with record_function("mapnet.backward"):
                loss.backward()
        totals += torch.stack([seq_sum.double(), masked.double()])
    for p in frozen:
        p.grad = None
    tokens = sum(batch.tokens for batch in batches)
    lr = optimizer.param_groups[0]["lr"]
    with record_function("mapnet.optimizer"):
        params = [p for p in model.parameters() if p.grad is not None]
        grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params])
        if (
            grad_clip
        ):  # not clip_grad_norm_(inf): it would still multiply every gradient by 1.0, a full pass for nothing
            torch.nn.utils.clip_grads_with_norm_(params, grad_clip, grad_norm)
        # The gradient norm, not the loss: after DDP's all-reduce it is the same on every rank, so every rank
        # agrees on which unread step went bad and stops at the same read (a rank stopping alone would leave
        # the others waiting in a collective). A non-finite loss with finite gradients leaves the weights as
        # they were; the read steps also check the all-reduced loss.
        finite = torch.isfinite(grad_norm)
        stats = StepStats(lr, tokens, finite)
        if read:
            counts = torch.tensor(
                [tokens, tokens + window_tokens], dtype=torch.float64, pin_memory=info.device.type == "cuda"
            )  # pinned: the copy does not wait
            sums = torch.cat([totals, counts.to(info.device, non_blocking=True)])
            distributed.all_reduce_sum(sums, info)
            earlier = (first_bad if first_bad is not None else grad_norm.new_zeros(())).double().view(1)
            with record_function("mapnet.read"):
                seq_sum, masked, step_tokens, window, norm, bad = torch.cat(
                    [sums, grad_norm.double().view(1), earlier]
                ).tolist()  # the one sync
            if bad:
                optimizer.zero_grad(set_to_none=True)
                raise NonFiniteLoss("its gradient norm was not finite; seen at the next read", step=int(bad))
            if not (np.isfinite(seq_sum) and np.isfinite(norm)):
                optimizer.zero_grad(set_to_none=True)
                raise NonFiniteLoss(f"loss {seq_sum / batch_size:.4g}, gradient norm {norm:.4g}")
            stats = StepStats(
                lr, tokens, finite, seq_sum / batch_size, norm, int(masked), int(step_tokens), int(window)
            )
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
    return stats


class StepContext:
    """What a training step's forward runs under: `precision_context`'s autocast and SDPA's kernel
    (`train.attention_kernel`: "math" restricts it to the reference kernel). The kernel chosen in the forward pass
    fixes the backward's too (autograd records the ops the forward ran). Reusable, one `with` after another, as
    torch.autocast is (sdpa_kernel's own context is single-use)."""

    def __init__(self, bf16: bool, device: torch.device, attention: str = "auto"):
        if attention not in ("auto", "math"):
            raise ValueError(f"attention kernel must be auto or math (got {attention!r})")
        self.autocast, self.attention = precision_context(bf16, device), attention
        self._stack: contextlib.ExitStack | None = None

    def __enter__(self):
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(self.autocast)
        if self.attention == "math":
            self._stack.enter_context(sdpa_kernel(SDPBackend.MATH))
        return self

    def __exit__(self, *exc):
        stack, self._stack = self._stack, None
        return stack.__exit__(*exc)


def precision_context(bf16: bool, device: torch.device):
    """bf16 autocast on `device`, or nothing (fp32): `bf16` is train.autocasts_bf16(device), the setting resolved."""
    if not isinstance(bf16, bool):  # a setting's value ("fp32" is truthy) would silently turn bf16 on
        raise TypeError(f"precision_context takes train.autocasts_bf16(device), a bool (got {bf16!r})")
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


__all__ = ["NonFiniteLoss", "StepContext", "StepStats", "train_step", "precision_context"]
