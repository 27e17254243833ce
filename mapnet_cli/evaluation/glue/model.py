"""A classification / regression head on the pretrained encoder.

    model = SequenceClassifier(encoder, num_outputs=3, dropout=0.1)
    logits = model(input_ids, attention_mask)          # (B, 3); (B, 1) for STS-B

BERT's recipe: the [CLS] hidden state goes through a pooler (dense + tanh),
dropout, and a linear layer. The pretrained model has no pooler (no
next-sentence task trained one), so the pooler starts fresh, like the
output layer, from N(0, init_std) with zero biases.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SequenceClassifier(nn.Module):
    def __init__(self, encoder: nn.Module, num_outputs: int, dropout: float, init_std: float = 0.02):
        super().__init__()
        hidden = encoder.cfg.hidden
        self.encoder = encoder
        self.pooler = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, num_outputs)
        for layer in (self.pooler, self.out):
            nn.init.normal_(layer.weight, std=init_std)
            nn.init.zeros_(layer.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.encoder(input_ids, attention_mask)[:, 0]
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
