"""Real sentences as people type them, from ../shared/data: GLUE as released, Wikipedia, books, BLiMP.

Imported by name (`from real_text import ...`): pytest puts tests/ on sys.path. The same sample is what
experiments/export-text-parity/export_text_parity.py measures, so the README's figure and the tests read the same
sentences.

    sample = real_sentences(shared_data)         # 2,000 (source, sentence), fixed by the seed
    corpus = training_text(shared_data)          # ~1 MB of other raw paragraphs, for a real-text BPE
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

# Sentences per source in the 2,000-sentence sample.
SAMPLE = {"glue": 600, "wiki": 600, "books": 500, "blimp": 300}
GLUE = (
    ("CoLA", "train.tsv"),
    ("SST-2", "train.tsv"),
    ("MRPC", "train.tsv"),
    ("QNLI", "dev.tsv"),
    ("WNLI", "train.tsv"),
)
WIKI = ("AA_wiki_00", "AB_wiki_40", "AC_wiki_20", "AD_wiki_52")
BOOKS = (
    "gutenberg/austen-mansfield-park-pg141",
    "gutenberg/conrad-heart-of-darkness-pg219",
    "gutenberg/dickens-reprinted-pieces-pg872",
    "gutenberg/darwin-coral-reefs-pg2690",
    "books/carroll-alice",
    "books/melville-moby_dick",
    "books/bible-kjv",
)
# Training text for the fixture's BPE: other files than the sample's. AB_wiki_12 and AC_wiki_84 hold "ℤ", an
# upper-case letter that lower() leaves as it is: the symbol that made the old export guess "cased" (issue 36).
TRAIN_WIKI = ("AB_wiki_12", "AC_wiki_84")
TRAIN_BOOKS = ("gutenberg/joyce-dubliners-pg2814", "books/austen-emma")


def _read_gz(path: Path) -> str:
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.read()


def wiki_paragraphs(shared: Path, name: str) -> list[str]:
    """The text lines of one WikiExtractor file (no <doc> markup, no titles)."""
    lines = _read_gz(shared / "wiki-articles" / "enwiki-2015-wikiextractor" / f"{name}.txt.gz").split("\n")
    out, after_doc = [], False
    for line in lines:
        if line.startswith("<doc") or line.startswith("</doc"):
            after_doc = line.startswith("<doc")
            continue
        if after_doc:  # the title line
            after_doc = False
            continue
        if line.strip():
            out.append(line)
    return out


def book_paragraphs(shared: Path, name: str) -> list[str]:
    """Blank-line paragraphs of a book, its wrapped lines joined by spaces, the first and last tenth (licence,
    contents) left out."""
    paragraphs = [" ".join(p.split("\n")).strip() for p in _read_gz(shared / f"{name}.txt.gz").split("\n\n")]
    paragraphs = [p for p in paragraphs if p]
    tenth = len(paragraphs) // 10
    return paragraphs[tenth : len(paragraphs) - tenth]


def sentences_of(paragraphs: list[str]) -> list[str]:
    """spaCy's rule-based sentences, as preprocess splits them."""
    from mapnet_cli.data.textproc import import_spacy

    nlp = import_spacy().blank("en")
    nlp.add_pipe("sentencizer")
    return [s.text.strip() for doc in nlp.pipe(paragraphs) for s in doc.sents if s.text.strip()]


def glue_texts(shared: Path) -> list[str]:
    from mapnet_cli.evaluation.glue.tasks import read_split, task_spec

    out = []
    for task, name in GLUE:
        split = read_split(task_spec(task), shared / "glue" / task / name, task)
        out += split.text_a + (split.text_b or [])
    return out


def blimp_texts(shared: Path) -> list[str]:
    out = []
    for path in sorted((shared / "blimp").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines()[:40]:
            if line.strip() and line.lstrip().startswith("{"):
                row = json.loads(line)
                out += [row[k] for k in ("sentence_good", "sentence_bad") if k in row]
    return out


def real_sentences(shared: Path, seed: int = 0, sizes: dict | None = None) -> list[tuple[str, str]]:
    """(source, raw sentence) pairs, `sizes` per source (default SAMPLE), drawn with `seed`."""
    sizes = SAMPLE if sizes is None else sizes
    rng = random.Random(seed)
    pools = {
        "glue": lambda: glue_texts(shared),
        # A few paragraphs from many places beat many from one: 300 per file, then split.
        "wiki": lambda: sentences_of([p for n in WIKI for p in rng.sample(wiki_paragraphs(shared, n), 150)]),
        "books": lambda: sentences_of([p for n in BOOKS for p in rng.sample(book_paragraphs(shared, n), 150)]),
        "blimp": lambda: blimp_texts(shared),
    }
    out = []
    for source, n in sizes.items():
        pool = sorted(set(t for t in pools[source]() if t.strip()))
        out += [(source, t) for t in rng.sample(pool, min(n, len(pool)))]
    return out


def training_text(shared: Path) -> list[str]:
    """Raw paragraphs (~2 MB) from files the sample does not use."""
    return [p for n in TRAIN_WIKI for p in wiki_paragraphs(shared, n)] + [
        p for n in TRAIN_BOOKS for p in book_paragraphs(shared, n)
    ]
