"""What the proposal network learns besides the paper's eq. 10 (`masking.mapnet.target`).

    t = gradnorm_proxy(out.logits, out.labels)                        # (N,) at masked positions
    t = reference.progress(out.labels)                                # learnability: how fast its type's loss falls
    terms = regression_objective(log_p, chosen, log_target_dense)     # (B,) per sequence

Why not eq. 10. Eq. 10 is REINFORCE on E_p[sum_k l_k]: its optimum puts all
mass on the K highest losses, not on the variance-optimal proposal. For the
Horvitz-Thompson estimator of a mean, sum_i y_i / (n pi_i), the variance under
Poisson sampling is (1/n^2) sum_i (1 - pi_i) ||y_i||^2 / pi_i; minimising
sum_i ||y_i||^2 / pi_i under sum_i pi_i = K gives pi_i proportional to ||y_i||
(Lagrange: ||y_i||^2 / pi_i^2 = const). With y_i the per-position gradient, the
target is p_i proportional to ||g_i|| — the paper's own theorem — so the
proposal is *regressed* onto a per-position gradient-norm proxy instead of
rewarded for loss.

The proxy (`gradnorm`). The gradient of the cross-entropy with respect to the
logits at a masked position is softmax(z) - onehot(y), and the gradient of the
decoder (tied embedding) weights from that position is (softmax - onehot) h^T
with h the head's LayerNorm output, so its norm is ||softmax - onehot|| ||h||.
||h|| is nearly the same at every position (LayerNorm fixes it to ~sqrt(H) times
the gain), so ||softmax - onehot|| carries the ranking; Katharopoulos & Fleuret
(2018) show the full per-example gradient norm is bounded by a constant times
this logit-gradient norm. It comes free from the logits the loss already has.
Unlike the loss it is bounded (<= sqrt 2), so tokens the model can never
predict (loss grows without bound) get no more than twice the mass of
half-learned ones.

`learnability`: how fast the loss of the position's token type is falling —
learning progress (Graves et al. 2017; Oudeyer et al. 2007), a cheap stand-in
for reducible loss. `TokenLossReference` keeps two exponential averages of
each type's loss over the global batch, a slow one (decay
`masking.mapnet.learnability_decay`, 0.99 per step) and a fast one (decay 0.99^20 ~
0.82), and the target is max(slow - fast, 0): the lagged average minus the
current level. A type whose loss does not move — noise that no context
predicts, or a particle fixed by grammar once it is learned — gets ~0 and the
proposal stops sending mass there; a type the encoder is learning now gets
mass in proportion to its progress. It is per type, not per context.

Why not "current loss minus the type's lagged average" per position: measured
on the synthetic corpus (tiny, 60-200 steps), max(l_i - lagged_type, 0) put 1.4-4x
their share of mass on the noise words. The clamp keeps the upper half of each
type's spread across contexts, and a noise word's loss spreads widely (it is
~ln 128 after an unmasked "(", far more when the bracket is masked too), so
"above its own average" rewarded exactly the unlearnable tokens. The learning
progress version moved the noise mass to ~0 in the same runs
(tests/masking/mapnet/test_targets.py).

The regression. log p is defined up to a constant per sequence (softmax), so
the proposal's log-probabilities at the masked positions are fitted to the log
targets after centring both over those positions:

    objective_b = (1/K) sum_{i in S_b} ((log p_i - mean_S log p) - (log t_i - mean_S log t))^2

Its minimum is p_i proportional to t_i on the positions seen. Targets are
floored at `masking.mapnet.target_floor` before the log so no position's mass goes to 0.
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
        self.decay, self.fast_decay = decay, decay ** FAST_DECAY_POWER
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
