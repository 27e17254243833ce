"""AdamW with BERT's parameter groups, and the warm-up + linear-decay schedule.

    optimizer = build_optimizer([model], settings.optim)
    scheduler = build_scheduler(optimizer, settings.optim, total_steps=settings.train.steps)

Weight decay follows BERT/RoBERTa: every weight matrix and the embeddings are
decayed; biases and LayerNorm parameters are not (all 1-D parameters).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn

from ..errors import MapnetError


def param_groups(modules: Iterable[nn.Module], weight_decay: float, lrs: list[float] | None = None) -> list[dict]:
    """Two groups: decayed matrices/embeddings, and undecayed biases + norms — two per distinct
    learning rate when `lrs` (one per module) differ (MAP-Net's own rate, `masking.mapnet.lr`).

    Shared parameters (the tied embedding, or an embedding MAP-Net borrows)
    appear once, whichever module names them first (so with MAP-Net the shared
    embedding follows the encoder's rate).
    """
    modules = list(modules)
    lrs = list(lrs) if lrs is not None else [None] * len(modules)
    groups: dict = {}
    seen = set()
    for module, lr in zip(modules, lrs):
        for p in module.parameters():
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            groups.setdefault((lr, p.dim() >= 2), []).append(p)
    out = []
    for lr in dict.fromkeys(lrs):
        for decayed in (True, False):
            group = {"params": groups.get((lr, decayed), []), "weight_decay": weight_decay if decayed else 0.0}
            if lr is not None and len(set(lrs)) > 1:
                group["lr"] = lr
            out.append(group)
    return out


def build_optimizer(modules: Iterable[nn.Module], optim, lrs: list[float] | None = None) -> torch.optim.AdamW:
    """AdamW from the `optim` settings, in the implementation `optim.impl` names.

    `fused` (the default) on CPU as on CUDA (torch >= 2.4): one pass over each parameter and
    no full-size temporaries, where torch's CPU default allocates several per
    tensor (an isolated step of the 30M-parameter `small` model: ~1.3 s ->
    ~0.47 s on 2 cores). `foreach`: torch's multi-tensor kernels, the default torch picks on CUDA.
    Both agree to float32 rounding (`tests/train/test_step_options.py`). Where this torch has no fused
    kernel for the parameters' device or dtype, `fused` is refused in one line rather than silently
    replaced: a run records the implementation it asked for, and its speed depends on it."""
    groups = param_groups(modules, optim.weight_decay, lrs)
    kwargs = dict(lr=optim.lr, betas=tuple(optim.betas), eps=optim.eps)
    if optim.impl == "foreach":
        return torch.optim.AdamW(groups, foreach=True, **kwargs)
    try:
        return torch.optim.AdamW(groups, fused=True, **kwargs)
    except RuntimeError as exc:  # torch checks devices and dtypes when the optimizer is built
        raise MapnetError(
            f"optim.impl = fused: this torch has no fused AdamW for these parameters ({exc}); --set optim.impl=foreach"
        ) from None


def lr_factor(step: int, warmup_steps: int, total_steps: int, schedule: str = "linear") -> float:
    """Multiplier of the peak LR for the update that follows `step` completed updates.

    Linear warm-up from 1/warmup to 1, then (schedule "linear") linear decay
    reaching zero at `total_steps`, or (schedule "constant") flat.
    """
    if warmup_steps and step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def build_scheduler(optimizer: torch.optim.Optimizer, optim, total_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR whose state_dict holds only numbers, so checkpoints load with weights_only=True."""
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, optim.warmup.steps, total_steps, optim.schedule)
    )


__all__ = ["param_groups", "build_optimizer", "lr_factor", "build_scheduler"]
