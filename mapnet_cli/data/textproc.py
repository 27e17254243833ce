"""Text pieces -> cleaned sentences: spaCy sentence split, then the run's cleaning (`cleaning.Cleaner`).

One `TextProcessor` per process (spaCy and sacremoses are slow to load and
hold compiled regexes); `process(pieces)` turns a batch of text pieces into,
for each piece, its list of output lines (tokens joined by single spaces).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ..settings import PreprocessSettings
from .cleaning import METASPACE, Cleaner


@dataclass
class PieceResult:
    sentences: list[str]
    sentences_cut: int = 0


def cut_at_whitespace(text: str, limit: int) -> list[str]:
    """Split `text` into pieces of at most `limit` characters, at whitespace where there is any.

    Every piece starts and ends with a non-space: a run of spaces longer than `limit` (padding, ASCII
    art) would otherwise come out as a piece of nothing but spaces.
    """
    out = []
    text = text.lstrip()
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit + 1)
        if cut <= 0:
            cut = limit  # one enormous "word": cutting it is the only bounded choice
        out.append(text[:cut].rstrip())  # not empty: text starts with a non-space
        text = text[cut:].lstrip()
    if text:
        out.append(text)
    return out


def import_spacy():
    """Import spaCy without letting thinc import torch.

    thinc imports torch when it is installed (here it is, for pretraining): ~3 s
    and ~500 MB per worker process, for a sentencizer that never uses it. A
    `None` entry in sys.modules makes `import torch` fail, which thinc handles.
    """
    if "torch" in sys.modules or "spacy" in sys.modules:
        import spacy

        return spacy
    sys.modules["torch"] = None
    try:
        import spacy
    finally:
        del sys.modules["torch"]  # later code in this process may still import torch
    return spacy


class TextProcessor:
    """spaCy blank English with only the rule-based sentencizer, plus the run's `cleaning.Cleaner`."""

    def __init__(self, settings: PreprocessSettings, marker: str | None = METASPACE):
        self.settings = settings
        self.cleaner = Cleaner(settings, marker)
        self._nlp = None

    @property
    def nlp(self):
        """The sentence splitter, built on first use."""
        if self._nlp is None:
            # blank("en") has only the tokenizer; the sentencizer splits on punctuation rules.
            # No tagger/parser: they are slow and the paper needs sentences only.
            nlp = import_spacy().blank("en")
            nlp.add_pipe("sentencizer")
            nlp.max_length = max(nlp.max_length, self.settings.max_chunk_chars + 1)
            self._nlp = nlp
        return self._nlp

    def process(self, pieces: list[str]) -> list[PieceResult]:
        # Normalising the whole piece first is one regex pass instead of one per sentence.
        pieces = [self.cleaner.normalize(p) for p in pieces]
        results = []
        for piece, doc in zip(pieces, self.nlp.pipe(pieces, batch_size=64)):
            result = PieceResult([])
            for text in _sentence_texts(piece, doc):
                if not text:
                    continue
                parts = cut_at_whitespace(text, self.settings.max_sentence_chars)
                result.sentences_cut += len(parts) - 1
                for part in parts:
                    line = self.cleaner.line(part)
                    if line:
                        result.sentences.append(line)
            results.append(result)
        return results


def _sentence_texts(piece: str, doc) -> list[str]:
    """Sentence strings of a processed piece, sliced by character offsets.

    Reading `doc.to_array` avoids building a Python Token per word, which was
    ~40% of the time when iterating `doc.sents` and `.text`.
    """
    arr = doc.to_array(["SENT_START", "IDX"])
    starts = [int(i) for i in arr[arr[:, 0] == 1, 1]] if len(arr) else []
    bounds = starts[1:] + [len(piece)]
    out = []
    for lo, hi in zip(starts, bounds):
        text = piece[lo:hi].strip()
        if text:
            out.append(text)
    return out
