"""The PMI n-gram vocabulary of PMI-Masking (Levine et al., ICLR 2021), built once from a corpus.

    mapnet pmi-vocab corpus/ --out corpus/pmi.tsv                  # the preprocessed corpus of `mapnet preprocess`
    mapnet pmi-vocab corpus/ --out shards/pmi.tsv --size 200000 --min-count 5
    mapnet pretrain shards/ --out runs/pmi --masking pmi

Library: `build_vocabulary(corpus, ...)` (streams it), `write_vocabulary` / `read_vocabulary` (the verified file),
`pmi_n`, Levine et al.'s eq. 3 over n-grams of words within a sentence, p(g) = c(g) / (number of |g|-grams):

    PMI_n(w1..wn) = log p(w1..wn) - max over segmentations into >= 2 contiguous parts of sum log p(part)

The vocabulary: n = 2..5, at least `min_count` occurrences, ranked per length, composed 50/25/12.5/12.5%. Counts
of 2..5-grams are held in bounded memory by Lossy Counting: a kept count is a lower bound off by at most the final
floor F (0 when nothing was pruned; in the file, docs/formats.md). The dynamic programme, the counting's guarantee,
its measured cost: docs/internals.md#maskingpmi_vocabpy.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import atomic
from ..errors import MapnetError

SCHEMA = "mapnet.pmi-vocab/1"
FILENAME = "pmi.tsv"
MAX_N = 5
SHARES = {2: 0.5, 3: 0.25, 4: 0.125, 5: 0.125}  # the paper's composition of the vocabulary


# ---------------------------------------------------------------- the measure
def pmi_n(words: Sequence, count: Callable[[tuple], int], totals: Mapping[int, int]) -> float | None:
    """PMI_n of the n-gram `words` (n >= 2): log p(w1..wn) - max over segmentations into >= 2 parts of
    sum log p(part), with p(g) = count(g) / totals[len(g)]. None if a part's count is unknown (0)."""
    n = len(words)
    if n < 2:
        raise ValueError("PMI_n needs at least two words")

    def logp(i: int, j: int) -> float | None:
        c = count(tuple(words[i:j]))
        return math.log(c / totals[j - i]) if c > 0 else None

    best = [0.0] + [-math.inf] * n
    for j in range(1, n + 1):
        for i in range(j):
            if i == 0 and j == n:
                continue  # the n-gram itself is not a segmentation into parts
            lp = logp(i, j)
            if lp is None:
                return None
            best[j] = max(best[j], best[i] + lp)
    whole = logp(0, n)
    return None if whole is None else whole - best[n]


# ---------------------------------------------------------------- bounded-memory counting
class NgramCounter:
    """Counts of word n-grams (2..max_n, as tuples of word ids) in at most ~max_entries entries
    (Lossy Counting with an adaptive floor, see the module docstring), unigrams exactly."""

    def __init__(self, max_entries: int, max_n: int = MAX_N):
        if max_entries < 2:
            raise MapnetError(f"--max-entries must be >= 2 (got {max_entries})")
        self.max_entries, self.max_n = max_entries, max_n
        self.words: dict[str, int] = {}
        self.unigrams: Counter = Counter()
        self.table: Counter = Counter()
        self.delta: dict[tuple, int] = {}  # floor at (re)insertion; absent = 0
        self.floor = 0
        self.prunes = 0
        self.totals = {k: 0 for k in range(1, max_n + 1)}
        self.sentences = 0

    def add_sentences(self, lines: Iterable[str]) -> None:
        local: Counter = Counter()
        unigrams = self.unigrams
        words = self.words
        for line in lines:
            ids = [words.setdefault(w, len(words)) for w in line.split()]
            m = len(ids)
            if not m:
                continue
            self.sentences += 1
            unigrams.update(ids)
            for k in range(1, self.max_n + 1):
                self.totals[k] += max(0, m - k + 1)
            for k in range(2, min(self.max_n, m) + 1):
                local.update(zip(*(ids[i:] for i in range(k))))
        self._merge(local)

    def _merge(self, local: Counter) -> None:
        if self.floor:  # entries new to the table may have been counted and dropped before: they carry the floor
            for key in local.keys() - self.table.keys():
                self.delta[key] = self.floor
        self.table.update(local)
        if len(self.table) > self.max_entries:
            self.prune()

    def prune(self) -> None:
        """Raise the floor to the smallest value that removes at least half the table; drop c + d <= floor."""
        keys = list(self.table)
        bound = np.fromiter((self.table[k] + self.delta.get(k, 0) for k in keys), np.int64, len(keys))
        keep = self.max_entries // 2
        floor = int(np.partition(bound, len(bound) - keep - 1)[len(bound) - keep - 1])
        self.floor = max(self.floor, floor)
        for k, b in zip(keys, bound.tolist()):
            if b <= self.floor:
                del self.table[k]
                self.delta.pop(k, None)
        self.prunes += 1

    def count(self, key: tuple) -> int:
        return self.unigrams.get(key[0], 0) if len(key) == 1 else self.table.get(key, 0)


@dataclass
class Vocabulary:
    entries: list[tuple[str, int, int, float]]  # (n-gram text, n, count, PMI_n), per length by falling PMI_n
    header: dict


def rank(counter: NgramCounter, size: int, min_count: int) -> tuple[list[tuple[str, int, int, float]], dict]:
    """The vocabulary: per length n = 2..max_n the top share x size candidates by PMI_n (count >= min_count)."""
    names = np.empty(len(counter.words), dtype=object)
    for w, i in counter.words.items():
        names[i] = w
    by_len: dict[int, list] = {k: [] for k in range(2, counter.max_n + 1)}
    unscored = 0
    for key, c in counter.table.items():
        if c < min_count:
            continue
        score = pmi_n(key, counter.count, counter.totals)
        if score is None:
            unscored += 1
            continue
        by_len[len(key)].append((score, c, key))
    entries = []
    quota = {k: int(round(size * SHARES.get(k, 0.0))) for k in by_len}
    for k, cands in by_len.items():
        cands.sort(key=lambda t: (-t[0], -t[1], t[2]))  # ties broken by count, then ids: deterministic
        for score, c, key in cands[: quota[k]]:
            entries.append((" ".join(names[i] for i in key), k, c, score))
    stats = {
        "candidates": {str(k): len(v) for k, v in by_len.items()},
        "entries_by_length": {str(k): min(len(v), quota[k]) for k, v in by_len.items()},
        "unscored_pruned_parts": unscored,
    }
    return entries, stats


def build_vocabulary(
    corpus,
    *,
    size: int = 800_000,
    min_count: int = 10,
    max_entries: int = 4_000_000,
    progress: Callable[[int], None] = lambda n: None,
) -> Vocabulary:
    """Stream a preprocessed corpus (`data.preprocessed.Preprocessed`) once and rank its n-grams."""
    if size < 1:
        raise MapnetError(f"--size must be >= 1 (got {size})")
    if min_count < 1:
        raise MapnetError(f"--min-count must be >= 1 (got {min_count})")
    start = time.perf_counter()
    counter = NgramCounter(max_entries)
    for chunk in corpus.chunks():
        counter.add_sentences(chunk.lines)
        progress(chunk.nbytes)
    if counter.totals[1] == 0:
        raise MapnetError(f"{corpus.path} holds no words")
    entries, stats = rank(counter, size, min_count)
    header = {
        "corpus": {"path": str(Path(corpus.path).resolve()), "manifest_sha256": corpus.manifest_sha256},
        "measure": "PMI_n (Levine et al. 2021, eq. 3); p(g) = count(g) / number of |g|-gram occurrences",
        "size": size,
        "min_count": min_count,
        "max_n": counter.max_n,
        "max_entries": max_entries,
        "shares": {str(k): v for k, v in SHARES.items()},
        "sentences": counter.sentences,
        "words": counter.totals[1],
        "word_types": len(counter.words),
        "prune_floor": counter.floor,
        "prunes": counter.prunes,
        "exact_counts": counter.floor == 0,
        **stats,
        "entries": len(entries),
        "seconds": round(time.perf_counter() - start, 3),
    }
    return Vocabulary(entries, header)


# ---------------------------------------------------------------- the file
def _body(entries: Sequence[tuple[str, int, int, float]]) -> bytes:
    return "".join(f"{g}\t{n}\t{c}\t{s:.6f}\n" for g, n, c, s in entries).encode("utf-8")


def write_vocabulary(vocab: Vocabulary, path: str | Path) -> str:
    """Write the vocabulary atomically; returns the file's sha256 (what run.json records)."""
    body = _body(vocab.entries)
    header = {**vocab.header, "body_sha256": hashlib.sha256(body).hexdigest()}
    with atomic.atomic_file(path, "wb", encoding=None) as fh:
        fh.write(f"# {SCHEMA}\n# {json.dumps(header, sort_keys=True)}\n".encode())
        fh.write(body)
    return atomic.sha256_file(path)


def read_vocabulary(path: str | Path) -> Vocabulary:
    """Read and verify a vocabulary file; a damaged, truncated or edited one is refused in one line."""
    path = Path(path)
    if not path.is_file():
        raise MapnetError(f"PMI vocabulary not found: {path} (make it with `mapnet pmi-vocab CORPUS --out {path}`)")
    data = path.read_bytes()
    first, _, rest = data.partition(b"\n")
    second, _, body = rest.partition(b"\n")
    if first.decode("utf-8", "replace") != f"# {SCHEMA}":
        raise MapnetError(f"{path} is not a PMI vocabulary (first line is not '# {SCHEMA}')")
    try:
        header = json.loads(second.decode("utf-8")[2:])
        expected = header["body_sha256"]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise MapnetError(f"{path}: damaged PMI vocabulary header") from None
    if hashlib.sha256(body).hexdigest() != expected:
        raise MapnetError(
            f"{path} does not match its body_sha256 (damaged, truncated or edited); rebuild it with mapnet pmi-vocab"
        )
    entries = []
    for line in body.decode("utf-8").splitlines():
        g, n, c, s = line.split("\t")
        entries.append((g, int(n), int(c), float(s)))
    return Vocabulary(entries, header)


__all__ = [
    "SCHEMA",
    "FILENAME",
    "SHARES",
    "pmi_n",
    "NgramCounter",
    "Vocabulary",
    "rank",
    "build_vocabulary",
    "write_vocabulary",
    "read_vocabulary",
]
