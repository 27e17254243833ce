"""Which sequences a step trains on, and how a rank splits them into micro-batches.

Data order. Epoch e visits the training sequences in the permutation seeded by train.seed + e; the run is one
stream through the epochs, and a step takes the next `train.batch_size` sequences of it. The data position
(sequences consumed) is saved in every checkpoint.

Splitting. The global batch's slots are cut into equal contiguous parts, one per rank, and each part into
micro-batches. Masks come from per-sequence streams keyed by (seed, step, slot) (`masking.uniform.SequenceRNG`),
so neither the data nor the masks depend on how the batch is split.

Sequence-length warm-up (`train.short_seq.len`, `train.short_seq.steps`): for the first steps each sequence of T
tokens is cut into f = T / L pieces of L tokens, each a sequence of its own at positions 0 ... L - 1 (the same
tokens per step); piece j of the sequence in global slot s takes slot j x batch_size + s
(`masking.uniform.piece_slots`), so exact resume and 1 x 8 = 2 x 4 hold. Why it lets an encoder leave the unigram
plateau, and the evidence: docs/internals.md#trainbatchespy.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import torch

from ..masking.strategy import MicroBatch, UniformTraining
from ..masking.uniform import piece_slots


class DataOrder:
    """Sequence indices at stream positions: epoch e is permutation(seed + e)."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed, self._cache = n, seed, (None, None)

    def _perm(self, epoch: int) -> np.ndarray:
        if self._cache[0] != epoch:  # a permutation of millions costs ~0.1 s: once per epoch
            self._cache = (epoch, np.random.default_rng(self.seed + epoch).permutation(self.n))
        return self._cache[1]

    def take(self, position: int, count: int) -> np.ndarray:
        out = []
        while count:
            epoch, offset = divmod(position, self.n)
            part = self._perm(epoch)[offset : offset + count]
            out.append(part)
            position, count = position + len(part), count - len(part)
        return np.concatenate(out) if out else np.empty(0, np.int64)


def rank_micro_slots(batch_size: int, world: int, rank: int, micro: int) -> list[range]:
    """The global-batch slots each of this rank's micro-batches holds."""
    per_rank = batch_size // world
    start = rank * per_rank
    return [range(s, min(s + micro, start + per_rank)) for s in range(start, start + per_rank, micro)]


def pieces(ids: np.ndarray, slots: Sequence[int], factor: int, batch_size: int) -> tuple[np.ndarray, list[int]]:
    """Cut each row of `ids` (b, T) into `factor` pieces of T / factor tokens: (b x factor, T / factor)
    rows, each sequence's pieces together in order, and their slots (`masking.uniform.piece_slots`)."""
    b, T = ids.shape
    if T % factor:
        raise ValueError(f"{T}-token sequences do not cut into {factor} equal pieces")
    return ids.reshape(b * factor, T // factor), piece_slots(slots, factor, batch_size)


def make_batch(
    ids: np.ndarray,
    keys: Sequence[int],
    special_ids: dict,
    vocab_size: int,
    masking,
    device: torch.device,
    slots: range | None = None,
) -> MicroBatch:
    """Uniform masks + 80/10/10 replacement for `ids`, each row from its own keyed stream (the uniform
    strategy's micro-batch; benchmarks and tests build batches without a run)."""
    data = SimpleNamespace(special_ids=special_ids, vocab_size=vocab_size)
    strategy = UniformTraining(SimpleNamespace(masking=masking), None, data)
    return strategy.micro_batch(ids, 0, slots, keys, device)


__all__ = ["DataOrder", "rank_micro_slots", "pieces", "make_batch"]
