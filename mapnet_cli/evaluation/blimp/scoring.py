"""Sentence scores for BLiMP: pseudo-log-likelihood of a masked LM, and the unigram control's.

    scores = pll_scores(model, seqs, cls_id, sep_id, mask_id, word_start, method="pll")   # (n,) float64 per sentence
    scores = unigram_scores(log_p, seqs)

**PLL** (Salazar et al., ACL 2020), for tokens t_1..t_n fed as [CLS] t_1..t_n [SEP], one masked copy per token:

    PLL(t) = sum_i log p(t_i | t with position i replaced by [MASK])

**word-l2r** (Kauf & Ivanova, ACL 2023) also masks the pieces of t_i's word to the *right* of i, so each word is
scored left to right from its own start. **Unigram control**: the sum of the tokens' log unigram probabilities
from the training shards (`data/unigram.py`, add-1/2 smoothed); it sees no context, so a model has to beat it to
show it learned something about grammar. How the masked copies are batched and run for speed on a CPU, and
where a word starts: docs/internals.md#evaluationblimpscoringpy; what the scores mean:
docs/evaluation.md#zero-shot-grammar-at-every-checkpoint-mapnet-blimp.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

METHODS = ("pll", "word-l2r")


def word_starts(tokenizer) -> np.ndarray:
    """(V,) bool: does token id v begin a word? Metaspace BPE: the piece starts with "▁"; WordPiece: it
    does not start with "##". Special tokens count as words of their own."""
    from tokenizers import models

    vocab = tokenizer.get_vocab()
    out = np.zeros(max(vocab.values()) + 1, dtype=bool)
    wordpiece = isinstance(tokenizer.model, models.WordPiece)
    prefix = getattr(tokenizer.model, "continuing_subword_prefix", "##") if wordpiece else None
    for piece, i in vocab.items():
        out[i] = (not piece.startswith(prefix)) if wordpiece else piece.startswith("\u2581")
    for added in tokenizer.get_added_tokens_decoder().values():
        out[tokenizer.token_to_id(added.content)] = True
    return out


def masked_rows(
    seqs: list[np.ndarray], cls_id: int, sep_id: int, mask_id: int, word_start: np.ndarray, method: str
) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Every masked copy of every sentence, grouped by length L = n + 2:
    {L: (ids (R, L) int64, position (R,), target (R,), sentence (R,))}."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    by_len: dict[int, list[int]] = {}
    for k, t in enumerate(seqs):
        if len(t):
            by_len.setdefault(len(t) + 2, []).append(k)
    out = {}
    for L, members in sorted(by_len.items()):
        n = L - 2
        base = np.empty((len(members), L), dtype=np.int64)
        base[:, 0], base[:, -1] = cls_id, sep_id
        base[:, 1:-1] = np.stack([seqs[k] for k in members])
        rows = np.repeat(base, n, axis=0)  # (m * n, L): copy j of a sentence masks t_{j+1}
        pos = np.tile(np.arange(1, n + 1), len(members))
        sentence = np.repeat(np.asarray(members, dtype=np.int64), n)
        r = np.arange(len(rows))
        target = rows[r, pos].copy()
        masked = np.zeros(rows.shape, dtype=bool)
        masked[r, pos] = True
        if method == "word-l2r":
            # word id of every position: a running count of word starts ([CLS] and [SEP] are words of their own)
            starts = word_start[np.clip(base, 0, len(word_start) - 1)]
            starts[:, 0] = starts[:, -1] = True
            wid = np.repeat(np.cumsum(starts, axis=1), n, axis=0)
            later = np.arange(L)[None, :] > pos[:, None]
            masked |= later & (wid == wid[r, pos][:, None])
        rows[masked] = mask_id
        out[L] = (rows, pos, target, sentence)
    return out


def count_rows(seqs: list[np.ndarray]) -> int:
    """Masked copies `pll_scores` runs for these sentences (one per token)."""
    return int(sum(len(t) for t in seqs))


@torch.inference_mode()
def pll_scores(
    model,
    seqs: list[np.ndarray],
    cls_id: int,
    sep_id: int,
    mask_id: int,
    word_start: np.ndarray,
    method: str = "pll",
    max_tokens: int = 16384,
    device=None,
    progress: Callable[[int], None] = lambda _: None,
) -> np.ndarray:
    """(len(seqs),) float64: the PLL (or word-l2r PLL) of each token sequence (ids without specials) under
    `model` (a `BertForMLM`, put in eval mode here). `progress(rows)` after each batch of masked copies."""
    device = device or torch.device("cpu")
    model = model.to(device).eval()
    if any(len(t) + 2 > model.cfg.max_position for t in seqs):
        longest = max(len(t) for t in seqs) + 2
        raise ValueError(
            f"a sentence of {longest} tokens (specials included) exceeds max_position {model.cfg.max_position}"
        )
    scores = np.zeros(len(seqs), dtype=np.float64)
    embedding = model.encoder.tok_embeddings.weight
    for L, (rows, pos, target, sentence) in masked_rows(seqs, cls_id, sep_id, mask_id, word_start, method).items():
        step = max(1, max_tokens // L)
        for lo in range(0, len(rows), step):
            hi = min(lo + step, len(rows))
            ids = torch.from_numpy(rows[lo:hi]).to(device)
            at = torch.arange(hi - lo, device=device) * L + torch.from_numpy(pos[lo:hi]).to(device)
            h = model.encoder(ids, None, at=at, width=1)
            logp = torch.log_softmax(model.head(h, embedding).float(), dim=-1)
            picked = logp.gather(1, torch.from_numpy(target[lo:hi]).to(device)[:, None]).squeeze(1)
            np.add.at(scores, sentence[lo:hi], picked.double().cpu().numpy())
            progress(hi - lo)
    return scores


def unigram_scores(log_p: np.ndarray, seqs: list[np.ndarray]) -> np.ndarray:
    """(len(seqs),) float64: sum of log p(token) under the unigram distribution `log_p` (V,). Special
    tokens ([UNK] included) have no unigram probability there: they cost the rarest type's.

    The terms are summed in sorted order, so two sentences with the same tokens in another order get
    bit-identical scores: a tie, which counts as wrong. Summed in sentence order, float rounding would
    break such ties at random and hand a context-blind model half of BLiMP's word-order pairs."""
    finite = np.isfinite(log_p)
    floor = log_p[finite].min() if finite.any() else 0.0
    lp = np.where(finite, log_p, floor)
    return np.array([float(np.sort(lp[np.asarray(t, dtype=np.int64)]).sum()) for t in seqs], dtype=np.float64)


__all__ = ["METHODS", "word_starts", "masked_rows", "count_rows", "pll_scores", "unigram_scores"]
