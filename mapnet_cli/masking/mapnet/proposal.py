"""The mask proposal network (MAP-Net): a half-width Transformer that scores every position.

    proposal = ProposalNetwork(ProposalConfig.from_settings(s.model, s.masking),
                               model.encoder.tok_embeddings)       # shared, not copied
    log_p = proposal(input_ids, attention_mask, eligible)          # (B, T), -inf off `eligible`

Paper, section 4: "we set its size to 1/2 of the encoder ... a 12-layer Transformer with H = 384 and A = 6", and
"Both the MAP-Net and the encoder use token embeddings as the input and we share these parameters between the two
models." The blocks are the encoder's own `Block` class (post-LN, GELU), so the two networks differ only in width.

The shared token embedding is *held*, not registered as a submodule: the proposal's `parameters()` and
`state_dict()` hold MAP-Net's own weights only. The encoder owns the embedding (and moves it between devices); an
optimizer built from `model.parameters()` + `proposal.parameters()` sees it once, and gradient from both networks
accumulates in its one `.grad`. A checkpoint stores MAP-Net under a `mapnet.` prefix without a second copy of the
embedding; on load the proposal is rebuilt around the loaded encoder's embedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...errors import MapnetError
from ...settings import MaskingSettings, ModelSettings


@dataclass(frozen=True)
class ProposalConfig:
    layers: int
    hidden: int
    heads: int
    intermediate: int
    max_position: int
    embed_dim: int  # width of the shared token embedding (the encoder's hidden)
    dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    init_std: float = 0.02

    @classmethod
    def from_settings(cls, model: ModelSettings, masking: MaskingSettings) -> ProposalConfig:
        """0 in masking.mapnet.layers/hidden/heads means the paper's scaling: same depth, half width, half heads.

        Dropout is MAP-Net's own (`masking.mapnet.dropout`, default 0), not the encoder's: the
        paper does not say, and with dropout the masks would be drawn from a noised
        distribution that neither eq. 10's log p nor `inspect-masks` (eval mode) sees the same
        way; attention dropout also forces SDPA's unfused path on CPU (a MAP-Net step cost
        ≈1.45× a uniform one at `mini`, T = 512, with dropout, ≈1.2× without).
        """
        layers = masking.mapnet.layers or model.layers
        hidden = masking.mapnet.hidden or max(1, model.hidden // 2)
        heads = masking.mapnet.heads or max(1, model.heads // 2)
        if hidden % heads:
            raise MapnetError(
                f"MAP-Net width {hidden} is not divisible by its {heads} heads "
                "(set masking.mapnet.hidden / masking.mapnet.heads)"
            )
        return cls(
            layers=layers,
            hidden=hidden,
            heads=heads,
            intermediate=4 * hidden,
            max_position=model.max_position,
            embed_dim=model.hidden,
            dropout=masking.mapnet.dropout,
            attention_dropout=masking.mapnet.dropout,
            layer_norm_eps=model.layer_norm_eps,
            init_std=model.init_std,
        )

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class ProposalNetwork(nn.Module):
    """Scores positions; `forward` returns log-softmax over each sequence's eligible positions."""

    def __init__(self, cfg: ProposalConfig, tok_embeddings: nn.Embedding):
        super().__init__()
        from ...model.bert import Block  # the encoder's block: one implementation for both networks

        if tok_embeddings.embedding_dim != cfg.embed_dim:
            raise ValueError(f"shared embedding width {tok_embeddings.embedding_dim} != cfg.embed_dim {cfg.embed_dim}")
        self.cfg = cfg
        # A tuple is not registered by nn.Module: see the module docstring for why.
        self._shared = (tok_embeddings,)
        # Project only when widths differ (the paper's sizes always differ: 768 -> 384).
        self.embed_proj = nn.Linear(cfg.embed_dim, cfg.hidden) if cfg.embed_dim != cfg.hidden else nn.Identity()
        self.pos_embeddings = nn.Embedding(cfg.max_position, cfg.hidden)
        self.embed_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.embed_dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(
            Block(cfg.hidden, cfg.heads, cfg.intermediate, cfg.dropout, cfg.attention_dropout, cfg.layer_norm_eps)
            for _ in range(cfg.layers)
        )
        self.score = nn.Linear(cfg.hidden, 1)
        self.reset_parameters()

    @property
    def tok_embeddings(self) -> nn.Embedding:
        """The shared token embedding (owned by the encoder)."""
        return self._shared[0]

    def reset_parameters(self) -> None:
        std = self.cfg.init_std
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, std=std)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        # A zero score head makes the initial proposal exactly uniform: MAP-Net starts as
        # RandMask, every importance weight starts at 1, and the head still receives gradient
        # (d score / d w = the hidden state), so learning starts at the first step.
        nn.init.zeros_(self.score.weight)
        nn.init.zeros_(self.score.bias)

    def scores(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Raw score per position, (B, T), float32. `attention_mask` (B, T), True/1 = real token; None = no padding."""
        _, t = input_ids.shape
        if t > self.cfg.max_position:
            raise MapnetError(f"sequence length {t} exceeds MAP-Net's {self.cfg.max_position} positions")
        x = self.embed_proj(self.tok_embeddings(input_ids))
        x = x + self.pos_embeddings(torch.arange(t, device=input_ids.device))[None]
        x = self.embed_dropout(self.embed_norm(x))
        # Keys that may be attended to; None lets SDPA pick its fastest kernel.
        attn = None if attention_mask is None else attention_mask.bool()[:, None, None, :]
        for block in self.blocks:
            x = block(x, attn)
        return self.score(x).squeeze(-1).float()

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, eligible: torch.Tensor
    ) -> torch.Tensor:
        """log p_prop(position) over `eligible` positions (not special, not pad); -inf elsewhere.

        A row with no eligible position is all -inf (it will get K = 0).
        """
        s = self.scores(input_ids, attention_mask)
        s = s.masked_fill(~eligible, float("-inf"))
        empty = ~eligible.any(dim=1, keepdim=True)
        # log_softmax of an all -inf row is NaN: compute on zeros there, then put -inf back.
        log_p = torch.log_softmax(s.masked_fill(empty, 0.0), dim=-1)
        return log_p.masked_fill(~eligible, float("-inf"))


def proposal_state_dict(proposal: ProposalNetwork, prefix: str = "mapnet.") -> dict[str, torch.Tensor]:
    """MAP-Net's own weights under `prefix`, for the checkpoint's model.safetensors (no shared embedding)."""
    return {prefix + k: v for k, v in proposal.state_dict().items()}


def load_proposal_state_dict(
    proposal: ProposalNetwork, tensors: dict[str, torch.Tensor], prefix: str = "mapnet."
) -> None:
    """Load the `prefix`ed entries of `tensors` into `proposal`, strictly (missing or extra keys are errors)."""
    own = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
    result = proposal.load_state_dict(own, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise MapnetError(
            f"MAP-Net weights do not match the network (missing: {result.missing_keys[:3]}, "
            f"unexpected: {result.unexpected_keys[:3]})"
        )


def has_proposal_weights(tensors_or_keys, prefix: str = "mapnet.") -> bool:
    return any(str(k).startswith(prefix) for k in tensors_or_keys)


__all__ = [
    "ProposalConfig",
    "ProposalNetwork",
    "proposal_state_dict",
    "load_proposal_state_dict",
    "has_proposal_weights",
]
