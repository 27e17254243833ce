"""Masking PMI n-grams (PMI-Masking, Levine et al. 2021): `masking.strategy = "pmi"`.

    mapnet pmi-vocab corpus/ --out corpus/pmi.tsv && mapnet pretrain shards/ --out runs/pmi --masking pmi

Units (`pmi_units`). Word n-grams (n = 2..5) of the PMI vocabulary (`mapnet pmi-vocab`) are
found in the sequence by 64-bit hashes of their token ids; the sequence is segmented greedily from
the left, longest vocabulary n-gram first, every other word its own unit (a mapnet choice: the
paper treats vocabulary n-grams as units without saying how overlapping occurrences are resolved).

The vocabulary comes from `pmi_vocab.py`; the word boundaries, the token budget and the
replacement are those of the other unit schemes (`units.py`, whose docstring states the rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from ..errors import MapnetError
from . import pmi_vocab
from .uniform import eligible_positions, mix_seed, special_id_list
from .units import WholeWordTraining, start_position, words_of

_M64 = (1 << 64) - 1


def _odd_constants(count: int, tag: int) -> list[int]:
    return [(mix_seed(tag, i) | 1) for i in range(count)]


def _signed(x: int) -> int:
    x &= _M64
    return x - (1 << 64) if x >= 1 << 63 else x


class NgramHasher:
    """64-bit hashes of word n-grams from token ids, the same for a vocabulary entry and for its
    occurrence in a batch: word hash = sum_k val[id_k] P^k over the word's tokens (k = offset in the
    word), n-gram hash = sum_j word_j Q_j + n R, all mod 2^64 (int64 arithmetic wraps). Collisions
    are ~(entries x windows) / 2^64."""

    def __init__(self, vocab_size: int, max_tokens: int = 4096, max_n: int = 16):
        self.val = torch.tensor([_signed(mix_seed(7919, i)) for i in range(vocab_size)], dtype=torch.long)
        P = _odd_constants(1, 104729)[0]
        self.pw = torch.tensor([_signed(pow(P, k, 1 << 64)) for k in range(max_tokens)], dtype=torch.long)
        self.q = [_signed(c) for c in _odd_constants(max_n, 1299709)]
        self.r = _signed(_odd_constants(1, 15485863)[0])

    def to(self, device) -> NgramHasher:
        self.val, self.pw = self.val.to(device), self.pw.to(device)
        return self

    def words(self, ids: torch.Tensor, word: torch.Tensor, is_start: torch.Tensor) -> torch.Tensor:
        """(B, T) hash of word w of each row at [:, w] (0 past the last word)."""
        B, T = ids.shape
        offset = torch.arange(T, device=ids.device).expand(B, T) - start_position(is_start)
        contrib = torch.where(
            word >= 0, self.val[ids] * self.pw[offset], torch.zeros((), dtype=torch.long, device=ids.device)
        )
        return torch.zeros(B, T + 1, dtype=torch.long, device=ids.device).scatter_add_(
            1, torch.where(word >= 0, word, T), contrib
        )[:, :T]

    def windows(self, word_hash: torch.Tensor, n: int) -> torch.Tensor:
        """(B, W) hash of the n words starting at each word (garbage where fewer than n follow)."""
        B, W = word_hash.shape
        padded = torch.nn.functional.pad(word_hash, (0, n))
        out = torch.full((B, W), _signed(n * self.r), dtype=torch.long, device=word_hash.device)
        for j in range(n):
            out = out + padded[:, j : j + W] * self.q[j]
        return out


class PmiMatcher:
    """The PMI vocabulary as sorted n-gram hashes per length, encoded with the shards' tokenizer."""

    def __init__(
        self, entries: Sequence[str], tokenizer_path: Path, special_ids: dict, starts: torch.Tensor, vocab_size: int
    ):
        from ..data.shard_writer import load_tokenizer

        tok = load_tokenizer(tokenizer_path)  # as `shard` encodes: no padding, no truncation, specials as text
        self.hasher = NgramHasher(vocab_size)
        self.starts = starts
        specials = set(special_id_list(special_ids))
        rows = [e.ids for e in tok.encode_batch(list(entries), add_special_tokens=False)] if entries else []
        rows = [r for r in rows if r and not specials.intersection(r)]  # an n-gram with [UNK] never matches
        by_n: dict[int, list[torch.Tensor]] = {}
        for start in range(0, len(rows), 65536):
            part = rows[start : start + 65536]
            width = max(map(len, part))
            ids = torch.full((len(part), width), special_ids["pad"], dtype=torch.long)
            for i, r in enumerate(part):
                ids[i, : len(r)] = torch.tensor(r)
            eligible = eligible_positions(ids, special_ids)
            word, is_start, _ = words_of(ids, eligible, starts)
            n_words = word.max(1).values + 1
            wh = self.hasher.words(ids, word, is_start)
            for n in sorted(set(n_words.tolist())):
                if 2 <= n <= len(self.hasher.q):
                    by_n.setdefault(n, []).append(self.hasher.windows(wh, n)[n_words == n, 0])
        self.tables = {n: torch.cat(v).unique() for n, v in by_n.items()}  # unique() sorts
        self.entries = sum(len(t) for t in self.tables.values())

    def to(self, device) -> PmiMatcher:
        self.hasher.to(device)
        self.starts = self.starts.to(device)
        self.tables = {n: t.to(device) for n, t in self.tables.items()}
        return self

    def longest(
        self, ids: torch.Tensor, word: torch.Tensor, is_start: torch.Tensor, run_start: torch.Tensor
    ) -> torch.Tensor:
        """(B, T): per word w, the length in words of the longest vocabulary n-gram starting at w (1: none)."""
        B, T = ids.shape
        wh = self.hasher.words(ids, word, is_start)
        n_words = (word.max(1).values + 1)[:, None]
        # Run of each word: n-grams never cross a special token.
        run = torch.zeros(B, T + 1, dtype=torch.long, device=ids.device).scatter_(
            1, torch.where(word >= 0, word, T), run_start.long().cumsum(1)
        )[:, :T]
        w = torch.arange(T, device=ids.device).expand(B, T)
        best = torch.ones(B, T, dtype=torch.long, device=ids.device)
        for n in sorted(self.tables):
            inside = w + n - 1 < n_words
            same = run == torch.nn.functional.pad(run, (0, n - 1))[:, n - 1 : n - 1 + T]
            hit = inside & same & torch.isin(self.hasher.windows(wh, n), self.tables[n])
            best = torch.where(hit, torch.full_like(best, n), best)
        return best


def greedy_chain(longest: torch.Tensor) -> torch.Tensor:
    """(B, W) bool: the words where units start when each row is cut greedily from word 0, a unit at
    w spanning longest[w] words. Pointer doubling: log2(W) gathers, no loop over words."""
    B, W = longest.shape
    nxt = torch.cat(
        [
            (torch.arange(W, device=longest.device) + longest).clamp(max=W),
            torch.full((B, 1), W, dtype=torch.long, device=longest.device),
        ],
        1,
    )
    chain = torch.zeros(B, 1, dtype=torch.long, device=longest.device)
    jump = nxt
    while chain.shape[1] < W + 1:  # chain holds the first 2^k units' starts; jump = next^(2^k)
        chain = torch.cat([chain, jump.gather(1, chain)], 1)
        jump = jump.gather(1, jump)
    on = torch.zeros(B, W + 1, dtype=torch.bool, device=longest.device).scatter_(1, chain, True)
    return on[:, :W]


def pmi_units(matcher: PmiMatcher, ids, word, is_start, run_start) -> torch.Tensor:
    """Unit starts (B, T): greedy longest-match segmentation into vocabulary n-grams and words."""
    starts_w = greedy_chain(matcher.longest(ids, word, is_start, run_start))
    return (is_start & starts_w.gather(1, word.clamp(min=0))) | run_start


def find_pmi_vocab(masking, shard_dir: Path, manifest: dict) -> Path:
    """masking.pmi.vocab if set; else pmi.tsv in the shard folder; else in the corpus the shards were made from."""
    if masking.pmi.vocab:
        return Path(masking.pmi.vocab)
    candidates = [Path(shard_dir) / pmi_vocab.FILENAME]
    source = (manifest.get("source") or {}).get("path")
    if source:
        candidates.append(Path(source) / pmi_vocab.FILENAME)
    for c in candidates:
        if c.is_file():
            return c
    raise MapnetError(
        f"PMI masking needs a PMI vocabulary: none at {' or '.join(map(str, candidates))}; "
        "make one with `mapnet pmi-vocab CORPUS --out FILE` and put it there or set masking.pmi.vocab=FILE"
    )


class PmiTraining(WholeWordTraining):
    """`masking.strategy = "pmi"`: PMI vocabulary n-grams where present, whole words otherwise, 80/10/10 per unit."""

    per_unit_replacement = True

    def __init__(self, settings, model, data, info=None):
        super().__init__(settings, model, data)
        self.vocab_path = find_pmi_vocab(settings.masking, data.dir, getattr(data, "manifest", {}))
        vocab = pmi_vocab.read_vocabulary(self.vocab_path)
        from ..atomic import sha256_file

        self.vocab_sha256 = sha256_file(self.vocab_path)
        self.matcher = PmiMatcher(
            [e[0] for e in vocab.entries], data.tokenizer_path, data.special_ids, self.starts, data.vocab_size
        )
        self.vocab_entries = len(vocab.entries)

    def units(self, targets, word, is_start, run_start, rng, device) -> torch.Tensor:
        if self.matcher.starts.device != device:
            self.matcher.to(device)
        return pmi_units(self.matcher, targets, word, is_start, run_start)

    def run_info(self) -> dict:
        return {
            "pmi_vocab": {
                "path": str(Path(self.vocab_path).resolve()),
                "sha256": self.vocab_sha256,
                "entries": self.vocab_entries,
                "matchable_entries": self.matcher.entries,
            }
        }

    def checkpoint_extra(self) -> dict:
        return {"pmi_vocab_sha256": self.vocab_sha256}

    def check_resume(self, meta: dict, ckpt) -> None:
        # `checkpoint_extra` always writes it; .get so a damaged config.json is this one-line error, not a KeyError
        recorded = meta.get("pmi_vocab_sha256")
        if recorded != self.vocab_sha256:
            raise MapnetError(
                f"--resume: {ckpt} was trained with another PMI vocabulary (sha256 {str(recorded)[:12]}…, "
                f"now {self.vocab_sha256[:12]}… at {self.vocab_path}); put the original back to continue exactly"
            )


__all__ = ["NgramHasher", "PmiMatcher", "greedy_chain", "pmi_units", "find_pmi_vocab", "PmiTraining"]
