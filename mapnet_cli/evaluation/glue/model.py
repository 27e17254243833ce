"""A classification / regression head on the pretrained encoder.

    model = SequenceClassifier(encoder, num_outputs=3, dropout=0.1)
    logits = model(input_ids, attention_mask)          # (B, 3); (B, 1) for STS-B

BERT's recipe (`pooling="cls"`): the [CLS] hidden state goes through a pooler
(dense + tanh), dropout, and a linear layer. The pretrained model has no pooler
(no next-sentence task trained one), so the pooler starts fresh, like the
output layer, from N(0, init_std) with zero biases.

`pooling="mean"`: the pooler reads the mean of the last layer's states over the
real tokens (specials included, padding not) instead of the [CLS] state. MLM
never scores [CLS] (it is never masked and no sentence task reads it), so its
final state is whatever the layers make of it; the mean carries every token's
contextual state, which is what MLM did train (Sentence-BERT's pooling).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SequenceClassifier(nn.Module):
    def __init__(
        self, encoder: nn.Module, num_outputs: int, dropout: float, init_std: float = 0.02, pooling: str = "cls"
    ):
        super().__init__()
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be cls or mean (got {pooling!r})")
        hidden = encoder.cfg.hidden
        self.encoder = encoder
        self.pooling = pooling
        self.pooler = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, num_outputs)
        for layer in (self.pooler, self.out):
            nn.init.normal_(layer.weight, std=init_std)
            nn.init.zeros_(layer.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        states = self.encoder(input_ids, attention_mask)
        if self.pooling == "cls":
            h = states[:, 0]
        elif attention_mask is None:  # no padding in this batch
            h = states.mean(1)
        else:
            real = attention_mask.to(states.dtype)[..., None]
            h = (states * real).sum(1) / real.sum(1).clamp(min=1)
        return self.out(self.dropout(torch.tanh(self.pooler(h))))


def task_loss(logits: torch.Tensor, targets: torch.Tensor, regression: bool) -> torch.Tensor:
    """Cross-entropy over classes, or MSE on the single output (STS-B); in fp32 under autocast."""
    logits = logits.float()
    if regression:
        return F.mse_loss(logits.squeeze(-1), targets.float())
    return F.cross_entropy(logits, targets)


def no_decay(name: str, param: nn.Parameter) -> bool:
    """Biases and LayerNorm weights are not decayed (BERT / RoBERTa fine-tuning)."""
    return param.ndim < 2
