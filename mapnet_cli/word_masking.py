"""Masking whole units: whole words, random spans (SpanBERT) and PMI n-grams (PMI-Masking).

    mapnet pretrain shards/ --out runs/ww --masking whole-word
    mapnet pretrain shards/ --out runs/span --masking span --set masking.span_p=0.2 --set masking.span_max_words=10
    mapnet pmi-vocab corpus/ --out corpus/pmi.tsv && mapnet pretrain shards/ --out runs/pmi --masking pmi

Word boundaries come from the tokenizer's vocabulary (`word_start_table`): with Metaspace (mapnet's
BPE) a token starting with "▁" starts a word, with WordPiece a token *not* starting with "##"
does, with a word-level tokenizer every token is a word. A token right after a special token
([CLS], [SEP], [PAD]) always starts a word, so no unit crosses a document boundary.

One budget rule for all three schemes (`budget_mask`). Each scheme cuts a sequence into *units*
of whole words — a word; a span of words; a PMI n-gram or a word — and gives each unit a random
key. Taking units in key order, tokens are counted until the budget K = round(mask_prob x eligible)
of uniform masking (`masking.mask_counts`, the same K) is reached; the word that crosses K is
kept iff that brings the count closer to K (ties: kept), and the first word is always kept. So
the masked count differs from K by at most half the crossing word (never a whole word), and only
the last unit may be cut — at a word boundary, keeping its left part, which is still a span of
whole words. (SpanBERT cuts its last span at the exact token; Google's whole-word masking skips
words that would overflow and so always masks <= K.)

Spans (`span_units`). SpanBERT draws a length l ~ Geo(p) clipped to l <= l_max words (p = 0.2,
l_max = 10: the renormalised truncation P(l) = p(1-p)^(l-1) / (1 - (1-p)^l_max), mean 3.8 words
as the paper says), picks a random start word, masks l whole words, and repeats until the budget.
mapnet draws the same lengths but lays them end to end from the first word of the sequence (a
random segmentation into spans) and takes the spans in random order — the same lengths and
uniformly placed spans, without a sequential rejection loop, so it vectorises over the batch. As in
SpanBERT, two chosen spans can be adjacent (they then read as one longer masked run); unlike
SpanBERT's, they never overlap. A span is also cut at a special token (a document boundary).

PMI units (`pmi_units`). Word n-grams (n = 2..5) of the PMI vocabulary (`mapnet pmi-vocab`) are
found in the sequence by 64-bit hashes of their token ids; the sequence is segmented greedily from
the left, longest vocabulary n-gram first, every other word its own unit (a mapnet choice: the
paper treats vocabulary n-grams as units without saying how overlapping occurrences are resolved).

Replacement (80/10/10). Whole-word: per token, as Google's whole-word BERT does. Span and PMI: per
unit, as SpanBERT does — one draw decides whether all of a unit's tokens become [MASK], random
tokens (each its own) or stay unchanged. `unit_replacement` draws exactly what
`masking.apply_replacement` draws (two uniforms per position), so the streams stay aligned.

Randomness: every draw comes from the row's keyed stream (`masking.SequenceRNG`), in the order
unit keys, then span lengths (span only), then the replacement; every operation is row-wise, so
1 x 8 and 2 x 4 processes and `--resume` give the same masks (tested).

Importance weighting does not combine with these schemes (refused by the settings): HT weights
need each position's inclusion probability, which under a token budget with units of random
length has no closed form, and the paper's per-sequence ratio compares K-token draws from a
proposal with uniform K-token draws, not unit masks. Each unit scheme is unweighted (weight 1):
it defines its own objective (predict a whole unit from the rest), so there is nothing to
correct back to uniform token masking, which would undo the point.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from . import pmi as pmi_mod
from .errors import MapnetError
from .masking import SequenceRNG, apply_replacement, eligible_positions, mask_counts, mix_seed, special_id_list
from .strategy import MicroBatch, UniformTraining, batch_tensors

_M64 = (1 << 64) - 1
METASPACE = "\u2581"


# ---------------------------------------------------------------- word boundaries
def word_start_table(tokenizer_path: str | Path, vocab_size: int) -> torch.Tensor:
    """(vocab_size,) bool: True where the token starts a word, read from a tokenizers tokenizer.json."""
    path = Path(tokenizer_path)
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
        model = spec["model"]
        vocab = model["vocab"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MapnetError(f"{path}: cannot read the tokenizer's vocabulary ({exc})") from None
    pieces = [None] * vocab_size
    for tok, i in (vocab.items() if isinstance(vocab, dict) else ((t, i) for i, (t, _) in enumerate(vocab))):
        if 0 <= i < vocab_size:
            pieces[i] = tok
    for t in spec.get("added_tokens") or []:
        if 0 <= t.get("id", -1) < vocab_size:
            pieces[t["id"]] = t["content"]

    def pre_tokenizers(node):
        if not node:
            return []
        return [node] + [p for sub in node.get("pretokenizers", []) for p in pre_tokenizers(sub)]

    kind = model.get("type")
    metaspace = [p for p in pre_tokenizers(spec.get("pre_tokenizer")) if p.get("type") == "Metaspace"]
    if kind == "WordPiece":
        prefix = model.get("continuing_subword_prefix") or "##"
        starts = [p is None or not p.startswith(prefix) for p in pieces]
    elif metaspace:
        mark = metaspace[0].get("replacement", METASPACE)
        starts = [p is None or p.startswith(mark) for p in pieces]
    elif kind == "WordLevel":
        starts = [True] * vocab_size
    else:
        raise MapnetError(f"{path}: cannot tell word boundaries for a {kind} tokenizer without Metaspace "
                          "(whole-word, span and pmi masking need Metaspace '▁' or WordPiece '##')")
    table = torch.tensor(starts, dtype=torch.bool)
    for t in spec.get("added_tokens") or []:  # special tokens are boundaries whatever they look like
        if 0 <= t.get("id", -1) < vocab_size:
            table[t["id"]] = True
    return table


def words_of(ids: torch.Tensor, eligible: torch.Tensor, starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(word index (B, T), -1 off `eligible`; word-start flags (B, T); run-start flags (B, T)).

    A run is a maximal stretch of eligible tokens; its first token starts a word whatever it is."""
    prev = torch.nn.functional.pad(eligible[:, :-1], (1, 0), value=False)
    run_start = eligible & ~prev
    is_start = eligible & (starts[ids] | run_start)
    word = torch.where(eligible, is_start.long().cumsum(1) - 1, torch.full_like(ids, -1, dtype=torch.long))
    return word, is_start, run_start


def _start_position(flags: torch.Tensor) -> torch.Tensor:
    """Per position: the position of the last True in `flags` at or before it (0 if none)."""
    T = flags.shape[1]
    pos = torch.arange(T, device=flags.device).expand_as(flags)
    return torch.where(flags, pos, torch.zeros_like(pos)).cummax(1).values


# ---------------------------------------------------------------- the budget
def budget_mask(word: torch.Tensor, unit_start: torch.Tensor, keys: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The mask (B, T) of the units taken in key order until the token budget k (B,) (module docstring).

    `unit_start` marks the first token of each unit (units are contiguous runs of whole words,
    and every eligible run starts one); `keys` (B, T) are random, read at unit starts."""
    B, T = word.shape
    elig = word >= 0
    unit_key = keys.gather(1, _start_position(unit_start)).masked_fill(~elig, math.inf)
    order = torch.argsort(unit_key, dim=1, stable=True)  # (unit key, position): units in key order, tokens left to right
    rank_sorted = elig.gather(1, order).long().cumsum(1)
    rank = torch.empty_like(rank_sorted).scatter_(1, order, rank_sorted)  # 1-based place of each token in the order
    w = word.clamp(min=0)
    big = torch.full((B, T), T + 1, dtype=torch.long, device=word.device)
    first = big.scatter_reduce(1, w, torch.where(elig, rank, big), "amin").gather(1, w)
    last = torch.zeros_like(big).scatter_reduce(1, w, torch.where(elig, rank, 0), "amax").gather(1, w)
    kk = k[:, None]
    take = (last <= kk) | ((first <= kk) & (last - kk <= kk - first + 1)) | (first == 1)
    return take & elig


# ---------------------------------------------------------------- units
def span_length_probs(p: float, max_words: int) -> torch.Tensor:
    """P(l) for l = 1..max_words: the geometric p(1-p)^(l-1), truncated and renormalised (SpanBERT)."""
    l = torch.arange(1, max_words + 1, dtype=torch.float64)
    w = p * (1 - p) ** (l - 1)
    return w / w.sum()


def span_lengths(u: torch.Tensor, p: float, max_words: int) -> torch.Tensor:
    """Span lengths in words, one per uniform in `u`, by the inverse CDF of `span_length_probs`."""
    cdf = span_length_probs(p, max_words).cumsum(0).to(u.device)
    cdf[-1] = 1.0
    return torch.searchsorted(cdf, u.double().contiguous(), right=True).clamp(max=max_words - 1) + 1


def span_units(word: torch.Tensor, is_start: torch.Tensor, run_start: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Unit starts (B, T) of a segmentation of each row's words into consecutive spans of `lengths`
    (B, T) words (laid from word 0), also cut where an eligible run starts."""
    B, T = word.shape
    ends = lengths.cumsum(1).clamp(max=T)
    starts_w = torch.zeros(B, T + 1, dtype=torch.bool, device=word.device)
    starts_w[:, 0] = True
    starts_w.scatter_(1, ends, True)
    return (is_start & starts_w.gather(1, word.clamp(min=0))) | run_start


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

    def to(self, device) -> "NgramHasher":
        self.val, self.pw = self.val.to(device), self.pw.to(device)
        return self

    def words(self, ids: torch.Tensor, word: torch.Tensor, is_start: torch.Tensor) -> torch.Tensor:
        """(B, T) hash of word w of each row at [:, w] (0 past the last word)."""
        B, T = ids.shape
        offset = torch.arange(T, device=ids.device).expand(B, T) - _start_position(is_start)
        contrib = torch.where(word >= 0, self.val[ids] * self.pw[offset], torch.zeros((), dtype=torch.long, device=ids.device))
        return torch.zeros(B, T + 1, dtype=torch.long, device=ids.device).scatter_add_(
            1, torch.where(word >= 0, word, T), contrib)[:, :T]

    def windows(self, word_hash: torch.Tensor, n: int) -> torch.Tensor:
        """(B, W) hash of the n words starting at each word (garbage where fewer than n follow)."""
        B, W = word_hash.shape
        padded = torch.nn.functional.pad(word_hash, (0, n))
        out = torch.full((B, W), _signed(n * self.r), dtype=torch.long, device=word_hash.device)
        for j in range(n):
            out = out + padded[:, j:j + W] * self.q[j]
        return out


class PmiMatcher:
    """The PMI vocabulary as sorted n-gram hashes per length, encoded with the shards' tokenizer."""

    def __init__(self, entries: Sequence[str], tokenizer_path: Path, special_ids: dict, starts: torch.Tensor,
                 vocab_size: int):
        from .data.shard_writer import load_tokenizer

        tok = load_tokenizer(tokenizer_path)  # as `shard` encodes: no padding, no truncation, specials as text
        self.hasher = NgramHasher(vocab_size)
        self.starts = starts
        specials = set(special_id_list(special_ids))
        rows = [e.ids for e in tok.encode_batch(list(entries), add_special_tokens=False)] if entries else []
        rows = [r for r in rows if r and not specials.intersection(r)]  # an n-gram with [UNK] never matches
        by_n: dict[int, list[torch.Tensor]] = {}
        for start in range(0, len(rows), 65536):
            part = rows[start:start + 65536]
            width = max(map(len, part))
            ids = torch.full((len(part), width), special_ids["pad"], dtype=torch.long)
            for i, r in enumerate(part):
                ids[i, :len(r)] = torch.tensor(r)
            eligible = eligible_positions(ids, special_ids)
            word, is_start, _ = words_of(ids, eligible, starts)
            n_words = word.max(1).values + 1
            wh = self.hasher.words(ids, word, is_start)
            for n in sorted(set(n_words.tolist())):
                if 2 <= n <= len(self.hasher.q):
                    by_n.setdefault(n, []).append(self.hasher.windows(wh, n)[n_words == n, 0])
        self.tables = {n: torch.cat(v).unique() for n, v in by_n.items()}  # unique() sorts
        self.entries = sum(len(t) for t in self.tables.values())

    def to(self, device) -> "PmiMatcher":
        self.hasher.to(device)
        self.starts = self.starts.to(device)
        self.tables = {n: t.to(device) for n, t in self.tables.items()}
        return self

    def longest(self, ids: torch.Tensor, word: torch.Tensor, is_start: torch.Tensor, run_start: torch.Tensor) -> torch.Tensor:
        """(B, T): per word w, the length in words of the longest vocabulary n-gram starting at w (1: none)."""
        B, T = ids.shape
        wh = self.hasher.words(ids, word, is_start)
        n_words = (word.max(1).values + 1)[:, None]
        # Run of each word: n-grams never cross a special token.
        run = torch.zeros(B, T + 1, dtype=torch.long, device=ids.device).scatter_(
            1, torch.where(word >= 0, word, T), run_start.long().cumsum(1))[:, :T]
        w = torch.arange(T, device=ids.device).expand(B, T)
        best = torch.ones(B, T, dtype=torch.long, device=ids.device)
        for n in sorted(self.tables):
            inside = w + n - 1 < n_words
            same = run == torch.nn.functional.pad(run, (0, n - 1))[:, n - 1:n - 1 + T]
            hit = inside & same & torch.isin(self.hasher.windows(wh, n), self.tables[n])
            best = torch.where(hit, torch.full_like(best, n), best)
        return best


def greedy_chain(longest: torch.Tensor) -> torch.Tensor:
    """(B, W) bool: the words where units start when each row is cut greedily from word 0, a unit at
    w spanning longest[w] words. Pointer doubling: log2(W) gathers, no loop over words."""
    B, W = longest.shape
    nxt = torch.cat([(torch.arange(W, device=longest.device) + longest).clamp(max=W),
                     torch.full((B, 1), W, dtype=torch.long, device=longest.device)], 1)
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


# ---------------------------------------------------------------- replacement
def unit_replacement(input_ids: torch.Tensor, mask: torch.Tensor, unit_start: torch.Tensor | None, vocab_size: int,
                     special_ids: dict, replace_mask: float = 0.8, replace_random: float = 0.1,
                     generator: SequenceRNG | torch.Generator | None = None) -> torch.Tensor:
    """80/10/10 decided once per unit (the draw at the unit's first token; per token when `unit_start`
    is None, exactly `masking.apply_replacement`). Random tokens are drawn per token."""
    choice_at = _start_position(unit_start) if unit_start is not None else None
    return apply_replacement(input_ids, mask, vocab_size, special_ids, replace_mask, replace_random, generator,
                             choice_at=choice_at)


# ---------------------------------------------------------------- the strategies
class WholeWordTraining(UniformTraining):
    """`masking.strategy = "whole-word"`: whole words up to the uniform token budget, 80/10/10 per token."""

    per_unit_replacement = False

    def __init__(self, settings, model, data, info=None):
        super().__init__(settings, model, data)
        self.starts = word_start_table(data.tokenizer_path, data.vocab_size)

    def units(self, targets, word, is_start, run_start, rng, device) -> torch.Tensor:
        return is_start

    def masks(self, targets: torch.Tensor, rng: SequenceRNG) -> tuple[torch.Tensor, torch.Tensor]:
        """(mask, unit starts) for a batch of original ids, drawing from `rng` (keys first)."""
        m = self.settings.masking
        if self.starts.device != targets.device:  # once, not a copy per micro-batch
            self.starts = self.starts.to(targets.device)
        eligible = eligible_positions(targets, self.special_ids)
        word, is_start, run_start = words_of(targets, eligible, self.starts)
        keys = rng.uniform(targets.shape[1], targets.device)
        unit_start = self.units(targets, word, is_start, run_start, rng, targets.device)
        mask = budget_mask(word, unit_start, keys, mask_counts(eligible.sum(1), m.mask_prob))
        return mask, unit_start

    def micro_batch(self, ids, step, slots, keys, device) -> MicroBatch:
        m = self.settings.masking
        targets, attn, tokens = batch_tensors(ids, self.special_ids, device)
        rng = SequenceRNG(keys)
        mask, unit_start = self.masks(targets, rng)
        inputs = unit_replacement(targets, mask, unit_start if self.per_unit_replacement else None, self.vocab_size,
                                  self.special_ids, m.replace_mask, m.replace_random, rng)
        return MicroBatch(inputs, targets, mask, attn, tokens, slots=slots, keys=list(keys))


class SpanTraining(WholeWordTraining):
    """`masking.strategy = "span"`: SpanBERT's random spans of whole words, 80/10/10 per span."""

    per_unit_replacement = True

    def units(self, targets, word, is_start, run_start, rng, device) -> torch.Tensor:
        m = self.settings.masking
        lengths = span_lengths(rng.uniform(targets.shape[1], device), m.span_p, m.span_max_words)
        return span_units(word, is_start, run_start, lengths)


def find_pmi_vocab(masking, shard_dir: Path, manifest: dict) -> Path:
    """masking.pmi_vocab if set; else pmi.tsv in the shard folder; else in the corpus the shards were made from."""
    if masking.pmi_vocab:
        return Path(masking.pmi_vocab)
    candidates = [Path(shard_dir) / pmi_mod.FILENAME]
    source = (manifest.get("source") or {}).get("path")
    if source:
        candidates.append(Path(source) / pmi_mod.FILENAME)
    for c in candidates:
        if c.is_file():
            return c
    raise MapnetError(f"--masking pmi needs a PMI vocabulary: none at {' or '.join(map(str, candidates))}; "
                      "make one with `mapnet pmi-vocab CORPUS --out FILE` and put it there or set masking.pmi_vocab=FILE")


class PmiTraining(WholeWordTraining):
    """`masking.strategy = "pmi"`: PMI vocabulary n-grams where present, whole words otherwise, 80/10/10 per unit."""

    per_unit_replacement = True

    def __init__(self, settings, model, data, info=None):
        super().__init__(settings, model, data)
        self.vocab_path = find_pmi_vocab(settings.masking, data.dir, getattr(data, "manifest", {}))
        vocab = pmi_mod.read_vocabulary(self.vocab_path)
        from .atomic import sha256_file

        self.vocab_sha256 = sha256_file(self.vocab_path)
        self.matcher = PmiMatcher([e[0] for e in vocab.entries], data.tokenizer_path, data.special_ids,
                                  self.starts, data.vocab_size)
        self.vocab_entries = len(vocab.entries)

    def units(self, targets, word, is_start, run_start, rng, device) -> torch.Tensor:
        if self.matcher.starts.device != device:
            self.matcher.to(device)
        return pmi_units(self.matcher, targets, word, is_start, run_start)

    def run_info(self) -> dict:
        return {"pmi_vocab": {"path": str(Path(self.vocab_path).resolve()), "sha256": self.vocab_sha256,
                              "entries": self.vocab_entries, "matchable_entries": self.matcher.entries}}

    def checkpoint_extra(self) -> dict:
        return {"pmi_vocab_sha256": self.vocab_sha256}

    def check_resume(self, meta: dict, ckpt) -> None:
        recorded = meta.get("pmi_vocab_sha256")
        if recorded != self.vocab_sha256:
            raise MapnetError(f"--resume: {ckpt} was trained with another PMI vocabulary (sha256 {str(recorded)[:12]}…, "
                              f"now {self.vocab_sha256[:12]}… at {self.vocab_path}); put the original back to continue exactly")


UNIT_STRATEGIES = {"whole-word": WholeWordTraining, "span": SpanTraining, "pmi": PmiTraining}

__all__ = ["word_start_table", "words_of", "budget_mask", "span_length_probs", "span_lengths", "span_units",
           "NgramHasher", "PmiMatcher", "greedy_chain", "pmi_units", "unit_replacement", "WholeWordTraining",
           "SpanTraining", "PmiTraining", "find_pmi_vocab", "UNIT_STRATEGIES"]
