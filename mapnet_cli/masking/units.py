"""Masking whole units: whole words and random spans (SpanBERT); PMI n-grams (PMI-Masking) in pmi_units.py.

    mapnet pretrain shards/ --out runs/ww --masking whole-word
    mapnet pretrain shards/ --out runs/span --masking span --set masking.span.p=0.2 --set masking.span.max_words=10
    mapnet pmi-vocab corpus/ --out corpus/pmi.tsv && mapnet pretrain shards/ --out runs/pmi --masking pmi

Word boundaries come from the tokenizer's vocabulary (`word_start_table`; a token right after a special token always
starts a word, so no unit crosses a document boundary). One budget rule for all three schemes (`budget_mask`): units
of whole words, taken in random key order until uniform masking's K = round(mask_prob x eligible) tokens; the word
that crosses K is kept iff that brings the count closer to K, so the count is within half a word of K and only the
last unit may be cut, at a word boundary. Spans (`span_units`) have SpanBERT's lengths, l ~ Geo(p) truncated at
l_max words, P(l) = p(1-p)^(l-1) / (1 - (1-p)^l_max), laid end to end as a random segmentation and taken in random
order. The 80/10/10 replacement is per token for whole words and per unit for spans and PMI units; every draw comes
from the row's keyed stream, so any split and `--resume` give the same masks. Importance weights are refused: no
closed-form inclusion probability, and each scheme is its own objective. In full: docs/internals.md#maskingunitspy.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from ..errors import MapnetError
from .strategy import MicroBatch, UniformTraining, batch_tensors
from .uniform import SequenceRNG, apply_replacement, eligible_positions, mask_counts

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
    for tok, i in vocab.items() if isinstance(vocab, dict) else ((t, i) for i, (t, _) in enumerate(vocab)):
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
        raise MapnetError(
            f"{path}: cannot tell word boundaries for a {kind} tokenizer without Metaspace "
            "(whole-word, span and pmi masking need Metaspace '▁' or WordPiece '##')"
        )
    table = torch.tensor(starts, dtype=torch.bool)
    for t in spec.get("added_tokens") or []:  # special tokens are boundaries whatever they look like
        if 0 <= t.get("id", -1) < vocab_size:
            table[t["id"]] = True
    return table


def words_of(
    ids: torch.Tensor, eligible: torch.Tensor, starts: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(word index (B, T), -1 off `eligible`; word-start flags (B, T); run-start flags (B, T)).

    A run is a maximal stretch of eligible tokens; its first token starts a word whatever it is."""
    prev = torch.nn.functional.pad(eligible[:, :-1], (1, 0), value=False)
    run_start = eligible & ~prev
    is_start = eligible & (starts[ids] | run_start)
    word = torch.where(eligible, is_start.long().cumsum(1) - 1, torch.full_like(ids, -1, dtype=torch.long))
    return word, is_start, run_start


def start_position(flags: torch.Tensor) -> torch.Tensor:
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
    unit_key = keys.gather(1, start_position(unit_start)).masked_fill(~elig, math.inf)
    order = torch.argsort(
        unit_key, dim=1, stable=True
    )  # (unit key, position): units in key order, tokens left to right
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


def span_units(
    word: torch.Tensor, is_start: torch.Tensor, run_start: torch.Tensor, lengths: torch.Tensor
) -> torch.Tensor:
    """Unit starts (B, T) of a segmentation of each row's words into consecutive spans of `lengths`
    (B, T) words (laid from word 0), also cut where an eligible run starts."""
    B, T = word.shape
    ends = lengths.cumsum(1).clamp(max=T)
    starts_w = torch.zeros(B, T + 1, dtype=torch.bool, device=word.device)
    starts_w[:, 0] = True
    starts_w.scatter_(1, ends, True)
    return (is_start & starts_w.gather(1, word.clamp(min=0))) | run_start


# ---------------------------------------------------------------- replacement
def unit_replacement(
    input_ids: torch.Tensor,
    mask: torch.Tensor,
    unit_start: torch.Tensor | None,
    vocab_size: int,
    special_ids: dict,
    replace_mask: float = 0.8,
    replace_random: float = 0.1,
    generator: SequenceRNG | torch.Generator | None = None,
) -> torch.Tensor:
    """80/10/10 decided once per unit (the draw at the unit's first token; per token when `unit_start`
    is None, exactly `uniform.apply_replacement`). Random tokens are drawn per token."""
    choice_at = start_position(unit_start) if unit_start is not None else None
    return apply_replacement(
        input_ids, mask, vocab_size, special_ids, replace_mask, replace_random, generator, choice_at=choice_at
    )


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
        inputs = unit_replacement(
            targets,
            mask,
            unit_start if self.per_unit_replacement else None,
            self.vocab_size,
            self.special_ids,
            m.replace_mask,
            m.replace_random,
            rng,
        )
        return MicroBatch(inputs, targets, mask, attn, tokens, slots=slots, keys=list(keys))


class SpanTraining(WholeWordTraining):
    """`masking.strategy = "span"`: SpanBERT's random spans of whole words, 80/10/10 per span."""

    per_unit_replacement = True

    def units(self, targets, word, is_start, run_start, rng, device) -> torch.Tensor:
        m = self.settings.masking
        lengths = span_lengths(rng.uniform(targets.shape[1], device), m.span.p, m.span.max_words)
        return span_units(word, is_start, run_start, lengths)


__all__ = [
    "word_start_table",
    "words_of",
    "start_position",
    "budget_mask",
    "span_length_probs",
    "span_lengths",
    "span_units",
    "unit_replacement",
    "WholeWordTraining",
    "SpanTraining",
]
