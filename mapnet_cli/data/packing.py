"""Pack a stream of token units (sentences) into fixed-length [CLS]-led blocks.

Every block is `[CLS]` + a contiguous run of the token stream (at most L-1 tokens) + `[PAD]`s, and the runs tile
the stream in order. So packing reduces to choosing *boundaries* in the stream; the copy into blocks is then one
vectorised gather. The two policies differ only in the boundaries:

- "fill": every L-1 tokens. A sentence that does not fit continues in the
  next block; only the stream's final block is padded.
- "whole_sentences" (RoBERTa FULL-SENTENCES): a block ends at the last
  sentence end that fits; a sentence longer than a block is cut every L-1
  tokens and its remainder starts the next block, which later sentences join.

Units arrive chunk by chunk; the last block of each chunk is held back
(`Packer.pending`) because the next chunk may still fill it. Memory is one
chunk plus at most L-1 carried tokens.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np


def whole_sentence_boundaries(ends: list[int], total: int, body: int) -> list[int]:
    """Block end positions for whole-sentence packing of a stream of `total` tokens.

    `ends` are the stream positions where units end (ascending, last == total).
    Greedy: from block start p, end at the furthest unit end <= p+body, or
    cut at p+body when the unit under p is longer than a block. One bisect
    per block, not per sentence.
    """
    out, p = [], 0
    while p < total:
        j = bisect_right(ends, p + body)
        q = ends[j - 1] if j and ends[j - 1] > p else min(p + body, total)
        out.append(q)
        p = q
    return out


def fill_boundaries(total: int, body: int) -> list[int]:
    return list(range(body, total, body)) + [total] if total else []


def gather_blocks(
    stream: np.ndarray, starts: np.ndarray, stops: np.ndarray, seq_len: int, cls_id: int, pad_id: int, dtype
) -> np.ndarray:
    """[n, seq_len] blocks: [CLS] + stream[starts[i]:stops[i]] + [PAD]s."""
    n = len(starts)
    out = np.full((n, seq_len), pad_id, dtype=dtype)
    out[:, 0] = cls_id
    if n:
        cols = np.arange(seq_len - 1)
        lens = stops - starts
        keep = cols[None, :] < lens[:, None]
        src = starts[:, None] + cols[None, :]
        out[:, 1:][keep] = stream[src[keep]]
    return out


class Packer:
    """Stateful packer for one split. `add` returns finished blocks; `finish` flushes the rest."""

    def __init__(self, seq_len: int, mode: str, cls_id: int, pad_id: int, dtype):
        if mode not in ("fill", "whole_sentences"):
            raise ValueError(f"unknown packing mode {mode!r}")
        self.seq_len, self.body, self.mode = seq_len, seq_len - 1, mode
        self.cls_id, self.pad_id, self.dtype = cls_id, pad_id, dtype
        self.pending = np.empty(0, dtype=dtype)  # tokens of the held-back block
        self.pending_ends: list[int] = []  # unit ends inside it (whole_sentences only)

    def add(self, tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Append units (`tokens` = their concatenation, `lengths` = tokens per unit)."""
        if not len(lengths):
            return np.empty((0, self.seq_len), dtype=self.dtype)
        stream = np.concatenate([self.pending, tokens.astype(self.dtype, copy=False)])
        offset = len(self.pending)
        if self.mode == "fill":
            bounds = fill_boundaries(len(stream), self.body)
        else:
            ends = self.pending_ends + (offset + np.cumsum(lengths)).tolist()
            bounds = whole_sentence_boundaries(ends, len(stream), self.body)
        # Hold back the last block: the next chunk may still extend it.
        all_starts = [0] + bounds[:-1]
        last_start = all_starts[-1]
        blocks = gather_blocks(
            stream,
            np.array(all_starts[:-1], dtype=np.int64),
            np.array(bounds[:-1], dtype=np.int64),
            self.seq_len,
            self.cls_id,
            self.pad_id,
            self.dtype,
        )
        self.pending = stream[last_start:].copy()
        if self.mode == "whole_sentences":
            self.pending_ends = [e - last_start for e in ends[bisect_right(ends, last_start) :]]
        return blocks

    def finish(self) -> np.ndarray:
        """Flush the held-back tokens (one padded block, or none)."""
        if self.mode == "fill":
            bounds = fill_boundaries(len(self.pending), self.body)
        else:
            bounds = whole_sentence_boundaries(self.pending_ends, len(self.pending), self.body)
        starts = np.array(([0] + bounds)[: len(bounds)], dtype=np.int64)
        blocks = gather_blocks(
            self.pending, starts, np.array(bounds, dtype=np.int64), self.seq_len, self.cls_id, self.pad_id, self.dtype
        )
        self.pending, self.pending_ends = self.pending[:0], []
        return blocks
