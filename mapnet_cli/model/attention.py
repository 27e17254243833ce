"""What both encoder blocks (`bert.Block`, `modern.ModernBlock`) share around attention: the key mask, and the
query grid of the last block, which runs only at the masked positions (`forward_at`)."""

from __future__ import annotations

from typing import NamedTuple

import torch


def key_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """An encoder's `attention_mask` as SDPA takes it: (B, T) 1/True for real tokens becomes a bool
    (B, 1, 1, T) over keys; a ready bool mask broadcastable to (B, heads, T, T) stays; None stays None."""
    if attention_mask is None:
        return None
    mask = attention_mask.bool()
    return mask[:, None, None, :] if mask.dim() == 2 else mask


def query_rows_mask(
    attn_mask: torch.Tensor | None, flat: torch.Tensor, layout: QueryLayout, B: int, T: int
) -> torch.Tensor | None:
    """`attn_mask` for the (B, width) query grid of `layout`: a key mask (.., 1, T) serves every query as it is;
    a full (.., T, T) mask keeps the rows of the queries' own positions."""
    if attn_mask is None or attn_mask.shape[-2] == 1:
        return attn_mask
    rows, slot, width = layout
    attn_mask = attn_mask.reshape((1,) * (4 - attn_mask.dim()) + attn_mask.shape)  # broadcast from the right, as SDPA
    cols = torch.zeros(B, width, dtype=flat.dtype, device=flat.device).index_put((rows, slot), flat - rows * T)
    return attn_mask.expand(B, -1, T, T).gather(2, cols[:, None, :, None].expand(B, attn_mask.shape[1], width, T))


class QueryLayout(NamedTuple):
    """Where each of N masked positions sits in a (B, width) grid of queries (`Block.forward_at`)."""

    rows: torch.Tensor  # (N,) its sequence
    slot: torch.Tensor  # (N,) its place among that sequence's masked positions
    width: int  # the most masked positions in any one sequence


def query_layout(flat: torch.Tensor, B: int, T: int, width: int | None = None) -> QueryLayout:
    """The query grid for flat indices into B*T, grouped by sequence in order
    (what a (B, T) bool mask's `nonzero` gives; order within a sequence is free).

    `width` needs the widest row on the host: a device sync, which also checks
    the grouping (interleaved sequences would silently share query slots) —
    unless the caller knows it already: a training batch whose masks were drawn
    on the host passes its width and its row-major positions (`MicroBatch`), and
    the step reads nothing back from the device.
    `Encoder` computes the layout before its first block, next to the sync
    `nonzero` already made, rather than after the other blocks are queued on a
    GPU. Traced whole by torch.compile (`torch.compile(model)`), the grid pads
    to T instead: a host read would split the graph; more attention rows, the
    same matmuls. For B = 1 no data is read at all, so torch.func.vmap can run
    it (the variance tool).
    """
    rows = torch.div(flat, T, rounding_mode="floor")
    N = flat.numel()
    if B == 1:
        return QueryLayout(rows, torch.arange(N, device=flat.device), N)
    counts = torch.zeros(B, dtype=rows.dtype, device=rows.device).index_add_(0, rows, torch.ones_like(rows))
    slot = torch.arange(N, device=flat.device) - (counts.cumsum(0) - counts).index_select(0, rows)
    if torch.compiler.is_compiling():
        return QueryLayout(rows, slot, T)
    if width is not None:
        return QueryLayout(rows, slot, width)
    if N == 0:
        return QueryLayout(rows, slot, 0)
    width, interleaved = torch.stack([counts.max(), (rows.diff() < 0).any().to(counts.dtype)]).tolist()
    if interleaved:
        raise ValueError("positions must be a (B, T) bool mask or flat indices grouped by sequence in order")
    return QueryLayout(rows, slot, width)


__all__ = ["QueryLayout", "query_layout", "key_mask", "query_rows_mask"]
