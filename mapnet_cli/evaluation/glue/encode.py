"""GLUE text -> token ids, exactly as pretraining saw text.

Each text goes through the checkpoint's own cleaning (Moses punctuation normalisation, Moses tokenisation,
lower-casing, per its `preprocess` settings, through `data/cleaning.Cleaner`, the one cleaning path that
preprocessing and `mapnet export` share) and its own `tokenizer.json`. No sentence splitting: a GLUE field is one
sentence or a short passage, and Moses treats a multi-sentence line the same way it treats its sentences one by one.

Inputs are `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`. There are no token-type (segment) ids: the model has no
segment embeddings (pretraining never sees pairs), so `[SEP]` alone marks where `b` starts. Pairs longer than the
limit lose tokens from the longer side first ("longest first").

Cleaning is the slow part (sacremoses is pure Python), so cleaned, tokenised texts are cached per (texts,
cleaning settings, tokenizer) under the output folder; re-running a sweep, or another checkpoint with the same
tokenizer, skips it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...atomic import sha256_file
from ...data.bpe import special_ids
from ...data.cleaning import cleaning_settings
from ...errors import MapnetError

CACHE_VERSION = 2  # 2: moses_tokenize in the key; no "▁" -> "_" for a WordPiece tokenizer


@dataclass
class Encoded:
    """One split, encoded: variable-length id sequences (specials included) and targets."""

    entry: str
    ids: list[np.ndarray]  # int64 each
    lengths: np.ndarray  # int64 (n,)
    labels: np.ndarray
    truncated: int  # examples that lost tokens to the length limit

    def __len__(self) -> int:
        return len(self.ids)


class TextEncoder:
    """Cleaning + tokenizer of one checkpoint, with the pair layout and truncation."""

    def __init__(self, tokenizer_path: Path, preprocess_settings, max_len: int, cache_dir: Path | None = None):
        from tokenizers import Tokenizer

        try:
            self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as exc:  # tokenizers raises a bare Exception on a bad file
            raise MapnetError(f"cannot read tokenizer {tokenizer_path}: {exc}") from None
        ids = special_ids(self.tokenizer, tokenizer_path)
        self.cls_id, self.sep_id, self.pad_id = ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]
        self.settings = preprocess_settings
        self.max_len = max_len
        self.cache_dir = cache_dir
        self._cleaner = None
        self._tokenizer_sha = sha256_file(tokenizer_path)

    # ------------------------------------------------------------ cleaning + tokenising
    def _clean_all(self, texts: list[str]) -> list[str]:
        if self._cleaner is None:
            # Imported here: sacremoses loads slowly and only this path needs it.
            from ...data.cleaning import Cleaner, word_marker

            self._cleaner = Cleaner(self.settings, word_marker(self.tokenizer))
        return self._cleaner(texts)

    def _tokenise(self, texts: list[str]) -> list[np.ndarray]:
        cleaned = self._clean_all(texts)
        encs = self.tokenizer.encode_batch(cleaned, add_special_tokens=False)
        return [np.asarray(e.ids, dtype=np.int64) for e in encs]

    def _cache_key(self, texts: list[str]) -> str:
        h = hashlib.sha256()
        meta = {"v": CACHE_VERSION, "tok": self._tokenizer_sha, "clean": cleaning_settings(self.settings)}
        h.update(json.dumps(meta, sort_keys=True).encode())
        for t in texts:
            h.update(t.encode("utf-8"))
            h.update(b"\x00")
        return h.hexdigest()[:24]

    def tokenise(self, texts: list[str]) -> list[np.ndarray]:
        """Cleaned token ids of each text (no specials), through the cache when there is one."""
        if self.cache_dir is None:
            return self._tokenise(texts)
        path = self.cache_dir / f"tokens-{self._cache_key(texts)}.npz"
        if path.is_file():
            try:
                with np.load(path) as z:
                    flat, offsets = z["flat"], z["offsets"]
                if len(offsets) == len(texts) + 1:
                    return [flat[offsets[i] : offsets[i + 1]] for i in range(len(texts))]
            except (OSError, ValueError, KeyError):
                pass  # a damaged cache file is rebuilt below, never trusted
        seqs = self._tokenise(texts)
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(s) for s in seqs])
        flat = np.concatenate(seqs) if seqs else np.zeros(0, dtype=np.int64)
        from ...atomic import atomic_file

        with atomic_file(path, "wb") as fh:
            np.savez(fh, flat=flat, offsets=offsets)
        return seqs

    # ------------------------------------------------------------ layout
    def pair(self, a: np.ndarray, b: np.ndarray | None) -> tuple[np.ndarray, bool]:
        """[CLS] a [SEP] (b [SEP]), cut longest-first to max_len; returns (ids, truncated)."""
        if b is None:
            budget = self.max_len - 2
            cut = len(a) > budget
            return np.concatenate(([self.cls_id], a[:budget], [self.sep_id])), cut
        budget = self.max_len - 3
        la, lb = len(a), len(b)
        cut = la + lb > budget
        if cut:
            # Removing one token at a time from the longer side ends here: the shorter keeps
            # min(its length, half the budget), the longer takes the rest.
            short = min(min(la, lb), budget // 2)
            if la >= lb:
                lb, la = short, budget - short
            else:
                la, lb = short, budget - short
        return np.concatenate(([self.cls_id], a[:la], [self.sep_id], b[:lb], [self.sep_id])), cut

    def encode(self, entry: str, text_a: list[str], text_b: list[str] | None, labels: np.ndarray) -> Encoded:
        ta = self.tokenise(text_a)
        tb = self.tokenise(text_b) if text_b is not None else [None] * len(ta)
        ids, truncated = [], 0
        for a, b in zip(ta, tb):
            seq, cut = self.pair(a, b)
            ids.append(seq)
            truncated += cut
        lengths = np.fromiter((len(s) for s in ids), dtype=np.int64, count=len(ids))
        return Encoded(entry, ids, lengths, labels, truncated)
