"""The modern encoder block (`model.block = "modern"`): ModernBERT's (Warner et al. 2024), in plain PyTorch.

    mapnet pretrain shards/ --out runs/modern --preset mini --set model.block=modern   # fast recipe: pre-LN

Three changes to the pre-LN BERT block, each as ModernBERT makes it: rotary position embeddings (RoPE, Su et al.;
the rotate-half pairing of dimension i with i + d/2), a GeGLU feed-forward (Shazeer 2020: `ffn_in` makes 2 x
intermediate features, [input; gate], and the block keeps GELU(input) * gate) and no bias terms in any linear layer
or LayerNorm (the MLM head's vocabulary bias stays, as ModernBERT's decoder keeps it). ModernBERT's layout
(embedding LayerNorm; pre-LN blocks, the first without its attention LayerNorm; a final LayerNorm), its dropout
places, and attention global in every layer (its 128-token local layers would be global at mapnet's 128-token
sequences anyway). `mapnet export` writes it as `ModernBertForMaskedLM` (`hf_modern_layout.py`). The block in full:
docs/pretraining.md#the-modern-encoder-block.

The interface is `bert.Encoder`'s, so the MLM head, MAP-Net, checkpoints, BLiMP and GLUE take either: the last block
runs only at the masked positions (`ModernBlock.forward_at`), with each query rotated by its own position.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .attention import QueryLayout, key_mask, query_layout, query_rows_mask


def rope_tables(length: int, head_dim: int, theta: float, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (length, head_dim) in float32: position p, frequency theta^(-2i/d), the d/2 frequencies
    repeated once ([f; f]) to pair dimension i with i + d/2. Computed as transformers' ModernBERT does, so the
    exported model's logits are the same to the last bits."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float, device=device) / head_dim))
    freqs = torch.arange(length, dtype=torch.float, device=device)[:, None] * inv_freq
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (..., d) rotated by the angles of `cos`/`sin` (broadcast against x): the pair (x_i, x_{i+d/2}) turns
    into (x_i cos - x_{i+d/2} sin, x_{i+d/2} cos + x_i sin). In float32, back in x's dtype."""
    half = x.shape[-1] // 2
    xf = x.float()
    return (xf * cos + torch.cat((-xf[..., half:], xf[..., :half]), dim=-1) * sin).to(x.dtype)


class ModernBlock(nn.Module):
    """x = x + Attn(LN(x)) with rotary queries and keys; x = x + GeGLU(LN(x)); no biases.
    `first`: the block right after the embeddings' LayerNorm, which has no attention LayerNorm."""

    def __init__(
        self,
        hidden: int,
        heads: int,
        intermediate: int,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        layer_norm_eps: float = 1e-5,
        first: bool = False,
    ):
        super().__init__()
        if hidden % heads or (hidden // heads) % 2:
            raise ValueError(f"hidden ({hidden}) must split into heads ({heads}) of an even width (rotary pairs)")
        self.heads, self.attention_dropout = heads, attention_dropout
        self.attn_norm = nn.Identity() if first else nn.LayerNorm(hidden, eps=layer_norm_eps, bias=False)
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)  # rows [Q; K; V]: ModernBERT's Wqkv
        self.attn_out = nn.Linear(hidden, hidden, bias=False)
        self.ffn_norm = nn.LayerNorm(hidden, eps=layer_norm_eps, bias=False)
        self.ffn_in = nn.Linear(hidden, 2 * intermediate, bias=False)  # rows [input; gate]
        self.ffn_out = nn.Linear(intermediate, hidden, bias=False)
        self.attn_drop = nn.Dropout(attention_dropout)
        self.ffn_drop = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None,
        rope: tuple[torch.Tensor, torch.Tensor],
        at: torch.Tensor | None = None,
        layout: QueryLayout | None = None,
    ) -> torch.Tensor:
        """(B, T, H) -> (B, T, H); `rope`: (cos, sin) of positions 0..T-1; with `at`, the output at those flat
        positions only, (N, H) (`forward_at`). `attn_mask` as `bert.Block` takes it."""
        if at is not None:
            return self.forward_at(x, attn_mask, rope, at, layout)
        B, T, H = x.shape
        d = H // self.heads
        q, k, v = self.qkv(self.attn_norm(x)).view(B, T, 3, self.heads, d).permute(2, 0, 3, 1, 4).unbind(0)
        cos, sin = rope
        a = F.scaled_dot_product_attention(
            rotate(q, cos, sin),
            rotate(k, cos, sin),
            v,
            attn_mask=attn_mask,
            dropout_p=self.attention_dropout if self.training else 0.0,
        )
        return self._finish(x, a.transpose(1, 2).reshape(B, T, H))

    def _finish(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """The residual around the attention output `a`, then the GeGLU feed-forward's; position-wise."""
        x = x + self.attn_drop(self.attn_out(a))
        inputs, gate = self.ffn_in(self.ffn_norm(x)).chunk(2, dim=-1)
        return x + self.ffn_out(self.ffn_drop(F.gelu(inputs) * gate))

    def forward_at(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None,
        rope: tuple[torch.Tensor, torch.Tensor],
        flat: torch.Tensor,
        layout: QueryLayout | None = None,
    ) -> torch.Tensor:
        """The block's output at `flat` only, (N, H), as `bert.Block.forward_at`: keys and values everywhere,
        queries, attention rows, output projection and feed-forward at `flat`; each query rotated by the
        position it sits at."""
        B, T, H = x.shape
        if flat.numel() == 0:  # every parameter stays in the graph (DDP expects a gradient for each)
            return x.new_zeros(0, H) + 0 * self(x, attn_mask, rope).sum()
        layout = layout if layout is not None else query_layout(flat, B, T)
        rows, slot, width = layout
        d = H // self.heads
        xin = self.attn_norm(x)
        w = self.qkv.weight  # rows [Q; K; V]
        k, v = F.linear(xin, w[H:]).view(B, T, 2, self.heads, d).permute(2, 0, 3, 1, 4).unbind(0)
        cos, sin = rope
        at_pos = flat - rows * T
        q_at = F.linear(xin.flatten(0, 1).index_select(0, flat), w[:H]).view(-1, self.heads, d)
        q_at = rotate(q_at, cos[at_pos, None], sin[at_pos, None]).reshape(-1, H)
        q = q_at.new_zeros(B, width, H).index_put((rows, slot), q_at).view(B, width, self.heads, d).transpose(1, 2)
        a = F.scaled_dot_product_attention(
            q,
            rotate(k, cos, sin),
            v,
            attn_mask=query_rows_mask(attn_mask, flat, layout, B, T),
            dropout_p=self.attention_dropout if self.training else 0.0,
        )
        return self._finish(x.flatten(0, 1).index_select(0, flat), a.transpose(1, 2).reshape(B, width, H)[rows, slot])


class ModernEncoder(nn.Module):
    """Token embeddings, LayerNorm, dropout, the blocks, a final LayerNorm; positions enter through RoPE only.
    Same interface as `bert.Encoder` (`cfg`, `tok_embeddings`, `blocks`, forward)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)  # shared with the MLM head and MAP-Net
        self.emb_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps, bias=False)
        self.emb_dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(
            ModernBlock(
                cfg.hidden,
                cfg.heads,
                cfg.intermediate,
                cfg.dropout,
                cfg.attention_dropout,
                cfg.layer_norm_eps,
                first=i == 0,
            )
            for i in range(cfg.layers)
        )
        self.final_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps, bias=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        at: torch.Tensor | None = None,
        width: int | None = None,
    ) -> torch.Tensor:
        """As `bert.Encoder.forward`: (B, T, H), or with `at` the last layer's states at those flat positions."""
        B, T = input_ids.shape
        if T > self.cfg.max_position:
            raise ValueError(f"sequence length {T} exceeds max_position {self.cfg.max_position}")
        layout = (
            query_layout(at, B, T, width) if at is not None and len(self.blocks) else None
        )  # before any block is queued
        x = self.emb_dropout(self.emb_norm(self.tok_embeddings(input_ids)))
        rope = rope_tables(T, self.cfg.hidden // self.cfg.heads, self.cfg.rope_theta, x.device)
        mask = key_mask(attention_mask)
        last = len(self.blocks) - 1 if at is not None else len(self.blocks)
        for block in self.blocks[:last]:
            x = block(x, mask, rope)
        if at is not None:
            x = x.flatten(0, 1).index_select(0, at) if last < 0 else self.blocks[last](x, mask, rope, at, layout)
        return self.final_norm(x)


__all__ = ["rope_tables", "rotate", "ModernBlock", "ModernEncoder"]
