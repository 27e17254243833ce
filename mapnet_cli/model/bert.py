"""A BERT encoder for masked-language-model pretraining, in plain PyTorch.

    from mapnet_cli.model.bert import BertConfig, BertForMLM
    cfg = BertConfig(vocab_size=32768, layers=4, hidden=256, heads=4, intermediate=1024)
    out = BertForMLM(cfg).mlm_losses(inputs, attention_mask, mask, targets)   # masked positions only

Post-LN BERT (Devlin et al.): learned positions, embedding LayerNorm and dropout, GELU feed-forward of width 4H, an
MLM head (dense + GELU + LayerNorm) tied to the token embedding; no token-type embeddings (pretraining has no
sentence pairs; export writes zero rows, so the logits stay identical) and no pooler. `norm="pre"` (`model.norm`) is
pre-LN with a final LayerNorm (Xiong et al. 2020; Hugging Face's `RobertaPreLayerNormForMaskedLM`), `block="modern"`
(`model.block`) ModernBERT's block (`modern.py`); this file keeps the config, the MLM head and the losses both share
(`build_encoder`). Fast because attention goes through `F.scaled_dot_product_attention`, Q, K and V come from one
fused matmul, and the head and most of the last block (`Block.forward_at`) run ONLY at the masked positions — exact,
since nothing reads the rest. Why each, in full: docs/internals.md#modelbertpy. This file knows nothing of ranks or
process groups (see `distributed.py`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .attention import QueryLayout, key_mask, query_layout, query_rows_mask
from .modern import ModernEncoder
from .widths import default_intermediate


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    layers: int = 12
    hidden: int = 768
    heads: int = 12
    intermediate: int = 3072
    max_position: int = 512
    dropout: float = 0.1
    attention_dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    init_std: float = 0.02
    pad_id: int = 0
    norm: str = "post"  # "post" (BERT) or "pre" (LayerNorm before each sublayer, plus a final one)
    block: str = "bert"  # "bert" (this file's Block) or "modern" (modern.py: RoPE, GeGLU, no biases; pre-LN)
    rope_theta: float = 10_000.0  # the modern block's rotary base

    @classmethod
    def from_settings(cls, model_settings, vocab_size: int, pad_id: int) -> BertConfig:
        """Build from the `model` settings section; the vocabulary comes from the data."""
        m = model_settings
        return cls(
            vocab_size=vocab_size,
            layers=m.layers,
            hidden=m.hidden,
            heads=m.heads,
            intermediate=m.intermediate or default_intermediate(m.hidden, m.block),
            max_position=m.max_position,
            dropout=m.dropout,
            attention_dropout=m.attention_dropout,
            layer_norm_eps=m.layer_norm_eps,
            init_std=m.init_std,
            pad_id=pad_id,
            norm=m.norm,
            block=m.block,
            rope_theta=m.rope_theta,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> BertConfig:
        return cls(**d)


BLOCKS = ("bert", "modern")


NORMS = ("post", "pre")


class Block(nn.Module):
    """One Transformer encoder block, post-LN: x = LN(x + Attn(x)); x = LN(x + FFN(x)),
    or pre-LN (`norm="pre"`): x = x + Attn(LN(x)); x = x + FFN(LN(x)). The two
    LayerNorms keep their names either way (`attn_norm`, `ffn_norm`).

    `attn_mask`: bool, broadcastable to (B, heads, T, T), True = may attend; or
    None (no padding), which lets SDPA pick its fastest kernel.
    """

    def __init__(
        self,
        hidden: int,
        heads: int,
        intermediate: int,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        norm: str = "post",
    ):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
        if norm not in NORMS:
            raise ValueError(f"norm must be one of {NORMS} (got {norm!r})")
        self.heads, self.pre_norm = heads, norm == "pre"
        self.attention_dropout = attention_dropout
        # One matmul for Q, K and V; rows are [Q; K; V], each split into heads
        # in order, which is exactly HF's query/key/value layout stacked.
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_norm = nn.LayerNorm(hidden, eps=layer_norm_eps)
        self.ffn_in = nn.Linear(hidden, intermediate)
        self.ffn_out = nn.Linear(intermediate, hidden)
        self.ffn_norm = nn.LayerNorm(hidden, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        at: torch.Tensor | None = None,
        layout: QueryLayout | None = None,
    ) -> torch.Tensor:
        """(B, T, H) -> (B, T, H); with `at` (flat indices into B*T) the output at
        those positions only, (N, H) (`forward_at`). Both go through here, so
        `block.compile()` (`train.compile`) covers both."""
        if at is not None:
            return self.forward_at(x, attn_mask, at, layout)
        B, T, H = x.shape
        q, k, v = (
            self.qkv(self._attn_input(x)).view(B, T, 3, self.heads, H // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        )
        a = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.attention_dropout if self.training else 0.0
        )
        return self._finish(x, a.transpose(1, 2).reshape(B, T, H))

    def _attn_input(self, x: torch.Tensor) -> torch.Tensor:
        """What Q, K and V are computed from: x (post-LN) or LN(x) (pre-LN)."""
        return self.attn_norm(x) if self.pre_norm else x

    def _finish(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """The residual around the attention output `a`, then the feed-forward, each with its LayerNorm
        where the layout puts it; position-wise."""
        if self.pre_norm:
            x = x + self.dropout(self.attn_out(a))
            return x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x)))))
        x = self.attn_norm(x + self.dropout(self.attn_out(a)))
        return self.ffn_norm(x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(x)))))

    def forward_at(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None, flat: torch.Tensor, layout: QueryLayout | None = None
    ) -> torch.Tensor:
        """The block's output at `flat` only: (N, H) for N flat indices into B*T
        (grouped by sequence, see `query_layout`).

        Keys and values still come from every position, but the query
        projection, the attention rows, the output projection and the
        feed-forward run only at `flat`. In the last layer that is exact —
        nothing downstream reads any other position — and it skips about 70%
        of that layer's matmuls at 15% masking. Queries are laid out (B, W, H),
        W the most positions any one sequence has, so SDPA keeps its batched
        kernels; the slots past a sequence's own count are zeros and dropped.
        `layout` is `query_layout(flat, B, T)`, computed here when not given.
        """
        B, T, H = x.shape
        if flat.numel() == 0:
            # Nothing to predict: run the block anyway so every parameter stays in the
            # graph (DDP expects a gradient, zero here, for each).
            return x.new_zeros(0, H) + 0 * self(x, attn_mask).sum()
        layout = layout if layout is not None else query_layout(flat, B, T)
        rows, slot, width = layout
        x_at = x.flatten(0, 1).index_select(0, flat)  # the residual stream at `flat`
        xin = self._attn_input(x)  # pre-LN: the LayerNorm runs everywhere, K and V need it
        w, b = self.qkv.weight, self.qkv.bias  # rows [Q; K; V]
        q_at = F.linear(xin.flatten(0, 1).index_select(0, flat) if self.pre_norm else x_at, w[:H], b[:H])
        k, v = F.linear(xin, w[H:], b[H:]).view(B, T, 2, self.heads, H // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        q = q_at.new_zeros(B, width, H).index_put((rows, slot), q_at)
        q = q.view(B, width, self.heads, H // self.heads).transpose(1, 2)
        a = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=query_rows_mask(attn_mask, flat, layout, B, T),
            dropout_p=self.attention_dropout if self.training else 0.0,
        )
        return self._finish(x_at, a.transpose(1, 2).reshape(B, width, H)[rows, slot])


class Encoder(nn.Module):
    """Token + learned position embeddings, LayerNorm, dropout, then the blocks (and, pre-LN, a final LayerNorm)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)  # shared with the MLM head and MAP-Net
        self.pos_embeddings = nn.Embedding(cfg.max_position, cfg.hidden)
        self.emb_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.emb_dropout = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(
            Block(
                cfg.hidden,
                cfg.heads,
                cfg.intermediate,
                cfg.dropout,
                cfg.attention_dropout,
                cfg.layer_norm_eps,
                cfg.norm,
            )
            for _ in range(cfg.layers)
        )
        # Pre-LN blocks leave the residual stream unnormalised; the head expects normalised states.
        self.final_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps) if cfg.norm == "pre" else None

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        at: torch.Tensor | None = None,
        width: int | None = None,
    ) -> torch.Tensor:
        """input_ids (B, T) -> hidden states (B, T, H); with `at` (flat indices
        into B*T, grouped by sequence) the last layer's states at those positions
        only, (N, H) — what an MLM loss needs, for less work (`Block.forward_at`).
        `width`: the most positions of `at` in one sequence, when the caller knows it (no device read).

        `attention_mask`: (B, T) with 1/True for real tokens (keys that may be
        attended), a ready bool mask broadcastable to (B, heads, T, T), or None.
        """
        B, T = input_ids.shape
        if T > self.cfg.max_position:
            raise ValueError(f"sequence length {T} exceeds max_position {self.cfg.max_position}")
        layout = (
            query_layout(at, B, T, width) if at is not None and len(self.blocks) else None
        )  # before any block is queued
        x = self.tok_embeddings(input_ids) + self.pos_embeddings.weight[:T]
        x = self.emb_dropout(self.emb_norm(x))
        mask = key_mask(attention_mask)
        last = len(self.blocks) - 1 if at is not None else len(self.blocks)
        for block in self.blocks[:last]:
            x = block(x, mask)
        if at is not None:
            # No blocks: the embeddings are the states.
            x = x.flatten(0, 1).index_select(0, at) if last < 0 else self.blocks[last](x, mask, at, layout)
        return x if self.final_norm is None else self.final_norm(x)


def build_encoder(cfg: BertConfig) -> nn.Module:
    """The encoder of `cfg.block`: this file's `Encoder`, or the modern block's (`modern.ModernEncoder`)."""
    if cfg.block not in BLOCKS:
        raise ValueError(f"block must be one of {BLOCKS} (got {cfg.block!r})")
    return ModernEncoder(cfg) if cfg.block == "modern" else Encoder(cfg)


class MLMHead(nn.Module):
    """dense + GELU + LayerNorm, then the tied vocabulary projection plus a bias (the modern block's head:
    no bias in the dense layer and the LayerNorm, the vocabulary bias kept, as ModernBERT's)."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        biased = cfg.block == "bert"
        self.dense = nn.Linear(cfg.hidden, cfg.hidden, bias=biased)
        self.norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps, bias=biased)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, h: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(F.gelu(self.dense(h))), embedding, self.bias)


class MLMOutput(NamedTuple):
    """Losses of one masked batch. `token_losses` and `sequence_losses` carry
    gradients; callers that only score (MAP-Net's ℓ_k) must `.detach()` them."""

    token_losses: torch.Tensor  # (N,) cross-entropy at each masked position, row-major order
    rows: torch.Tensor  # (N,) the sequence each masked position belongs to
    sequence_losses: torch.Tensor  # (B,) mean of the token losses of each sequence (0 where nothing is masked)
    logits: torch.Tensor  # (N, V) at the masked positions only
    labels: torch.Tensor  # (N,) the original tokens at the masked positions


class BertForMLM(nn.Module):
    """Encoder + MLM head. The head runs only where `positions` says."""

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = build_encoder(cfg)
        self.head = MLMHead(cfg)
        self.apply(self._init)

    def _init(self, module: nn.Module) -> None:
        # BERT's init: N(0, 0.02) weights, zero biases, LayerNorm (1, 0).
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=self.cfg.init_std)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            if module.bias is not None:  # the modern block's have none
                nn.init.zeros_(module.bias)
        elif isinstance(module, MLMHead):
            nn.init.zeros_(module.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        targets: torch.Tensor | None = None,
        width: int | None = None,
    ):
        """Logits (N, V) at `positions` — a (B, T) bool mask, or flat indices
        into B*T grouped by sequence in order — or (B, T, V) everywhere when
        `positions` is None (slow; for inspection and the export check). The
        last block and the head run only at `positions`. With `targets` (the original ids,
        (B, T)) it returns the `MLMOutput` losses instead; going through
        forward keeps DistributedDataParallel's hooks in the path. `width` (flat `positions` only):
        the most positions in one sequence, known on the host, so nothing is read back from the device."""
        if positions is None:
            return self.head(self.encoder(input_ids, attention_mask), self.encoder.tok_embeddings.weight)
        flat = positions.flatten().nonzero().squeeze(1) if positions.dtype == torch.bool else positions
        logits = self.head(
            self.encoder(input_ids, attention_mask, at=flat, width=width), self.encoder.tok_embeddings.weight
        )
        if targets is None:
            return logits
        B, T = input_ids.shape
        labels = targets.flatten().index_select(0, flat)
        token_losses = F.cross_entropy(logits.float(), labels, reduction="none")
        rows = torch.div(flat, T, rounding_mode="floor")
        sums = torch.zeros(B, dtype=token_losses.dtype, device=token_losses.device).index_add_(0, rows, token_losses)
        counts = torch.zeros(B, dtype=rows.dtype, device=rows.device).index_add_(0, rows, torch.ones_like(rows))
        return MLMOutput(token_losses, rows, sums / counts.clamp(min=1), logits, labels)

    def mlm_losses(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, mask: torch.Tensor, targets: torch.Tensor
    ) -> MLMOutput:
        """Cross-entropy at the masked positions of `input_ids` (the corrupted
        sequence) against `targets` (the original one), per position and per
        sequence. The per-sequence loss is the mean over that sequence's masked
        positions — the paper's l(theta; x^M, x), which MAP-Net weights per
        sequence. (Under DDP call the wrapper: `ddp(ids, attn, mask, targets=targets)`.)"""
        return self(input_ids, attention_mask, mask, targets=targets)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def flops_per_token(cfg: BertConfig, seq_len: int, mask_fraction: float) -> float:
    """Training FLOPs per input token (forward + backward = 3x forward, 2 per
    multiply-add) of the work this model needs: the block matmuls and
    attention scores; in the last block only K and V at every position, the
    rest at the masked fraction (`Block.forward_at`); the head at the masked
    fraction. Used for MFU on GPUs. Work it skips is not counted."""
    H, L = cfg.hidden, cfg.layers
    kv = 2 * 2 * H * H
    ffn = (3 if cfg.block == "modern" else 2) * H * cfg.intermediate  # GeGLU: input, gate and output matrices
    per_query = 2 * (2 * H * H + ffn) + 2 * 2 * seq_len * H  # Q, out, FFN, scores
    head = 2 * (H * H + H * cfg.vocab_size)
    if L == 0:
        return 3.0 * mask_fraction * head
    return 3.0 * ((L - 1) * (kv + per_query) + kv + mask_fraction * (per_query + head))


__all__ = [
    "BertConfig",
    "BLOCKS",
    "default_intermediate",
    "QueryLayout",
    "query_layout",
    "Block",
    "Encoder",
    "build_encoder",
    "MLMHead",
    "MLMOutput",
    "BertForMLM",
    "flops_per_token",
]
