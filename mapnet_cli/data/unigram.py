"""Token-type counts of a shard split, and the MLM *unigram plateau* they define.

    counts = token_counts(reader)                 # every type, specials included (frequency masking)
    log_p = unigram_log_probs(reader)             # log p(type) over the maskable (non-special) types
    unigram_entropy(reader)                       # H(p) in nats: the plateau's height on the training text
    unigram_level(log_p, targets)                 # -mean log p(target): the plateau's height on a held-out set

A freshly initialised MLM first predicts each token's frequency everywhere, ignoring the context; until it
leaves that plateau no masking comparison or downstream check can mean anything, so every loss mapnet reports
comes with this level beside it (docs/pretraining.md#outputs-held-out-evaluation-and-the-unigram-level).
The distribution: counts of the non-special types over up to `max_sequences` training sequences, plus one half
(Jeffreys) per type. Its plug-in entropy of N sampled tokens is low by about (types - 1) / 2N nats.
Why it matters, the figures and the choices: docs/internals.md#dataunigrampy.
"""

from __future__ import annotations

import numpy as np

SAMPLE_SEQUENCES = 100_000


def sample_rows(n: int, max_sequences: int) -> np.ndarray:
    """Up to `max_sequences` of `n` row indices, evenly spread (all of them when n is small)."""
    return np.arange(n) if n <= max_sequences else np.linspace(0, n - 1, max_sequences).round().astype(np.int64)


def token_counts(reader, max_sequences: int = 20_000) -> np.ndarray:
    """Token-type counts over up to `max_sequences` training sequences spread evenly over the split
    (a deterministic sample: the same shards give the same counts on every rank and every resume)."""
    rows = sample_rows(len(reader), max_sequences)
    counts = np.zeros(reader.vocab_size, dtype=np.int64)
    for start in range(0, len(rows), 4096):
        counts += np.bincount(
            reader.take(rows[start : start + 4096]).ravel().astype(np.int64), minlength=reader.vocab_size
        )
    return counts


def unigram_log_probs(reader, max_sequences: int = SAMPLE_SEQUENCES) -> np.ndarray:
    """log p(type) (V,) of the maskable types (add-1/2 smoothed), -inf for the special tokens."""
    counts = token_counts(reader, max_sequences).astype(np.float64)
    maskable = np.ones(reader.vocab_size, dtype=bool)
    maskable[list(reader.special_ids.values())] = False
    smoothed = np.where(maskable, counts + 0.5, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(smoothed / smoothed.sum())


def entropy(log_p: np.ndarray) -> float:
    """H(p) in nats of a distribution given by its logs (-inf entries count 0)."""
    finite = np.isfinite(log_p)
    return float(-(np.exp(log_p[finite]) * log_p[finite]).sum())


def unigram_entropy(reader, max_sequences: int = SAMPLE_SEQUENCES) -> float:
    """Entropy of the training tokens' unigram distribution, in nats: the plateau on the training text."""
    return entropy(unigram_log_probs(reader, max_sequences))


def unigram_level(log_p: np.ndarray, targets: np.ndarray) -> float:
    """Cross-entropy of `targets` (token ids, e.g. an evaluation set's masked tokens) under `log_p`:
    the loss a context-blind frequency model gets on exactly these questions."""
    return float(-log_p[np.asarray(targets, dtype=np.int64)].mean()) if len(targets) else float("nan")


__all__ = [
    "SAMPLE_SEQUENCES",
    "sample_rows",
    "token_counts",
    "unigram_log_probs",
    "entropy",
    "unigram_entropy",
    "unigram_level",
]
