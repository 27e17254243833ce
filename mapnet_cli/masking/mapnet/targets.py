"""What the proposal network learns besides the paper's eq. 10 (`masking.mapnet.target`).

    t = gradnorm_proxy(out.logits, out.labels)                        # (N,) at masked positions
    t = reference.progress(out.labels)                                # learnability: how fast its type's loss falls
    terms = regression_objective(log_p, chosen, log_target_dense)     # (B,) per sequence

Eq. 10's optimum puts all mass on the K highest losses; the variance of a Horvitz-Thompson mean is minimised under
sum_i pi_i = K by pi_i proportional to ||g_i|| (the paper's own theorem), so the proposal is *regressed* onto a
target t_i: `gradnorm`, the logit-gradient norm ||softmax - onehot|| (free, bounded by sqrt 2), or `learnability`,
max(slow - fast, 0) of two exponential averages of the type's loss (learning progress). With both centred over
the masked positions S_b (log p is defined up to a constant) and t floored at `masking.mapnet.target_floor`,

    objective_b = (1/K) sum_{i in S_b} ((log p_i - mean_S log p) - (log t_i - mean_S log t))^2,

minimal at p_i proportional to t_i. Derivations and measurements: docs/internals.md#maskingmapnettargetspy.
"""

from __future__ import annotations

import torch
from torch import nn

from ... import distributed


def gradnorm_proxy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(N,) ||softmax(logits) - onehot(labels)||_2, detached: sqrt(sum_j p_j^2 - 2 p_y + 1)."""
    p = torch.softmax(logits.detach().float(), dim=-1)
    p_y = p.gather(1, labels[:, None]).squeeze(1)
    return (p.pow(2).sum(1) - 2.0 * p_y + 1.0).clamp(min=0.0).sqrt()


def regression_objective(log_probs: torch.Tensor, chosen: torch.Tensor, log_targets: torch.Tensor) -> torch.Tensor:
    """(B,) centred squared error between log p and log target over each row's chosen positions (see module doc).

    `log_probs` carries the proposal's gradient; `log_targets` is detached here. Rows with
    fewer than two chosen positions give 0 (a single position fixes nothing relative).
    """
    zero = torch.zeros((), device=chosen.device)
    k = chosen.sum(1, keepdim=True).clamp(min=1).to(torch.float32)
    diff = torch.where(chosen, log_probs.float() - log_targets.detach().float(), zero)
    centred = torch.where(chosen, diff - diff.sum(1, keepdim=True) / k, zero)
    terms = centred.pow(2).sum(1) / k.squeeze(1)
    return torch.where(chosen.sum(1) >= 2, terms, zero)


# The fast average forgets 20x faster than the slow one (0.99 -> 0.99^20 ~ 0.82).
FAST_DECAY_POWER = 20


class TokenLossReference(nn.Module):
    """Slow and fast average loss per token type: `mean[v]` (slow), `fast[v]`, `seen[v]` (buffers,
    saved with the checkpoint).

    Within a step `observe` accumulates weighted sums on each rank; `update` all-reduces them (one
    collective, every rank) and folds the global batch's mean into both averages:
    avg <- decay avg + (1 - decay) batch_mean where the type was seen before, batch_mean the first
    time. Every rank then holds the same averages, whatever the split.
    """

    def __init__(self, vocab_size: int, decay: float):
        super().__init__()
        self.decay, self.fast_decay = decay, decay**FAST_DECAY_POWER
        self.register_buffer("mean", torch.zeros(vocab_size, dtype=torch.float64))
        self.register_buffer("fast", torch.zeros(vocab_size, dtype=torch.float64))
        self.register_buffer("seen", torch.zeros(vocab_size, dtype=torch.float64))
        self._pending = torch.zeros(2, vocab_size, dtype=torch.float64)

    def progress(self, labels: torch.Tensor) -> torch.Tensor:
        """(N,) max(slow - fast average loss of each label's type, 0): how fast that type's loss falls (0 if unseen)."""
        gap = (self.mean[labels] - self.fast[labels]).clamp(min=0.0)
        return torch.where(self.seen[labels] > 0, gap, torch.zeros_like(gap)).float()

    @torch.no_grad()
    def observe(self, labels: torch.Tensor, losses: torch.Tensor, weights: torch.Tensor | None = None) -> None:
        if self._pending.device != labels.device:
            self._pending = self._pending.to(labels.device)
        w = torch.ones_like(losses, dtype=torch.float64) if weights is None else weights.detach().to(torch.float64)
        self._pending[0].index_add_(0, labels, w * losses.detach().to(torch.float64))
        self._pending[1].index_add_(0, labels, w)

    @torch.no_grad()
    def update(self, info: distributed.DistInfo) -> None:
        flat = distributed.all_reduce_sum(self._pending.to(self.mean.device).reshape(-1), info).view(2, -1)
        total, count = flat[0], flat[1]
        got = count > 0
        batch_mean = total / count.clamp(min=1e-300)
        for avg, decay in ((self.mean, self.decay), (self.fast, self.fast_decay)):
            blended = decay * avg + (1.0 - decay) * batch_mean
            avg.copy_(torch.where(got, torch.where(self.seen > 0, blended, batch_mean), avg))
        self.seen.copy_(torch.where(got, torch.ones_like(self.seen), self.seen))
        self._pending.zero_()


__all__ = ["FAST_DECAY_POWER", "gradnorm_proxy", "regression_objective", "TokenLossReference"]
