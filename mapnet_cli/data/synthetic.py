"""The embedded synthetic corpus: an English-like toy language whose tokens differ
in difficulty by construction.

    mapnet preprocess synthetic: --out prep/        # or: --config data_recipes/tiny.toml
    mapnet shard prep/ --out shards/                 # writes token_kinds.json

Every word type belongs to exactly one kind (determined, long_range, noise, other), so a token's kind can be
looked up from its id (`word_kinds()`, turned into `token_kinds.json` by shard). What each kind is, the grammar
and an example of each: docs/data.md#the-embedded-synthetic-corpus-synthetic-data_recipestinytoml.

The lexicon is fixed (built from its own constant seed), so kinds never depend
on `synthetic.seed`; the seed only drives which sentences are generated.
"""

from __future__ import annotations

import random
import re
from bisect import bisect
from collections.abc import Iterator
from functools import lru_cache
from itertools import accumulate

from ..settings import SyntheticSettings

KINDS = ("determined", "long_range", "noise", "other")

GRAMMAR = """\
document  := sentence(key = A) sentence* sentence(key = pair(A)) sentence*
             (A opens the document; its partner B = pair(A) comes >= 2 sentences later)
sentence  := clause [", and" | ", but" clause] "."
clause    := Det [Adj] Noun_c Part_c Verb [Det [Adj] Noun] [Noise] [Prep (Det [Adj] Noun | key)]
Noise     := "(" noise-word ")"                          (probability 0.35 per clause)
Part_c    := the particle of the subject noun's class c  (4 classes: ka, mo, ri, tu)

kind        word types                                              example
determined  particles ka mo ri tu; brackets ( )                    "the bodan KA ..." "(zib)"
long_range  64 key words A, 64 partner words B, A[i] <-> B[i]       "... near VELUMA." ... "... with TOSARIN."
noise       128 three-letter words, uniform and independent          "( ZIB )"
other       determiners, adjectives, nouns, verbs, prepositions,
            conjunctions, "." and ","                               "the", "bodan", "near", "."
"""

DETERMINERS = ("the", "a", "this", "that", "every", "some")
PREPOSITIONS = ("near", "with", "under", "over", "behind", "beside", "beyond", "toward")
CONJUNCTIONS = ("and", "but")
PARTICLES = ("ka", "mo", "ri", "tu")  # particle of noun class 0..3
NOUN_CLASSES = len(PARTICLES)
SIZES = {"noun": 400, "verb": 200, "adj": 120, "key_a": 64, "key_b": 64, "noise": 128}
NOISE_PROB = 0.35
ADJ_PROB = 0.3
OBJECT_PROB = 0.6
PP_PROB = 0.4
COMPOUND_PROB = 0.15
LEXICON_SEED = 20200519  # fixed: the language never changes with synthetic.seed

_ONSETS = "b d f g k l m n p r s t v z".split() + ["br", "dr", "gr", "pl", "st", "tr"]
_VOWELS = "a e i o u".split()
_CODAS = ["", "", "", "n", "r", "l", "s"]


@lru_cache(maxsize=1)
def _lexicon() -> dict[str, list[str]]:
    """Syllable-built word lists per part of speech, all distinct, built once."""
    rng = random.Random(LEXICON_SEED)
    reserved = set(DETERMINERS + PREPOSITIONS + CONJUNCTIONS + PARTICLES)
    seen: set[str] = set(reserved)

    def word(syllables: int) -> str:
        while True:
            w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
            if w not in seen:
                seen.add(w)
                return w

    def noise_word() -> str:  # consonant-vowel-consonant: short and distinct from 2+ syllable words
        while True:
            w = rng.choice("bdfgkmnptvz") + rng.choice(_VOWELS) + rng.choice("bdgkmnptvxz")
            if w not in seen:
                seen.add(w)
                return w

    lex = {pos: [word(rng.choice((2, 2, 3))) for _ in range(n)] for pos, n in SIZES.items() if pos != "noise"}
    lex["noise"] = [noise_word() for _ in range(SIZES["noise"])]
    return lex


@lru_cache(maxsize=1)
def _pos() -> dict[str, tuple[str, int]]:
    """word -> (part of speech, noun class or key index)."""
    lex = _lexicon()
    out: dict[str, tuple[str, int]] = {}
    for pos, words in lex.items():
        for i, w in enumerate(words):
            out[w] = (pos, i % NOUN_CLASSES if pos == "noun" else i)
    out.update({w: ("det", 0) for w in DETERMINERS})
    out.update({w: ("prep", 0) for w in PREPOSITIONS})
    out.update({w: ("conj", 0) for w in CONJUNCTIONS})
    out.update({w: ("particle", c) for c, w in enumerate(PARTICLES)})
    out.update({"(": ("open", 0), ")": ("close", 0), ".": ("punct", 0), ",": ("punct", 0)})
    return out


_KIND_OF_POS = {
    "particle": "determined",
    "open": "determined",
    "close": "determined",
    "key_a": "long_range",
    "key_b": "long_range",
    "noise": "noise",
}


def word_kinds() -> dict[str, str]:
    """{word: kind} for every word type of the language (after lower-casing and Moses tokenisation)."""
    return {w: _KIND_OF_POS.get(pos, "other") for w, (pos, _) in _pos().items()}


def key_pairs() -> dict[str, str]:
    """The bijection A -> B between opening key words and their later partners."""
    lex = _lexicon()
    return dict(zip(lex["key_a"], lex["key_b"]))


def noun_class(word: str) -> int:
    pos, cls = _pos()[word]
    if pos != "noun":
        raise ValueError(f"{word!r} is not a noun")
    return cls


def _zipf_sampler(words: list[str]):
    """Draw ordinary words Zipf-like (rank r has weight 1/(r+2.7)), as in natural text."""
    cum = list(accumulate(1.0 / (r + 2.7) for r in range(len(words))))
    total = cum[-1]

    def draw(rng: random.Random) -> str:
        return words[bisect(cum, rng.random() * total)]

    return draw


class _Generator:
    def __init__(self, seed: int):
        lex = _lexicon()
        self.rng = random.Random(seed)
        self.noun = _zipf_sampler(lex["noun"])
        self.verb = _zipf_sampler(lex["verb"])
        self.adj = _zipf_sampler(lex["adj"])
        self.noise = lex["noise"]
        self.keys_a, self.keys_b = lex["key_a"], lex["key_b"]
        self.pos = _pos()

    def noun_phrase(self, out: list[str]) -> str:
        r = self.rng
        out.append(r.choice(DETERMINERS))
        if r.random() < ADJ_PROB:
            out.append(self.adj(r))
        noun = self.noun(r)
        out.append(noun)
        return noun

    def clause(self, out: list[str], key: str | None) -> None:
        r = self.rng
        subject = self.noun_phrase(out)
        out.append(PARTICLES[self.pos[subject][1]])
        out.append(self.verb(r))
        if r.random() < OBJECT_PROB:
            self.noun_phrase(out)
        if r.random() < NOISE_PROB:
            out.append("(" + r.choice(self.noise) + ")")  # rendered attached, Moses splits it
        if key is not None:
            out += [r.choice(PREPOSITIONS), key]
        elif r.random() < PP_PROB:
            out.append(r.choice(PREPOSITIONS))
            self.noun_phrase(out)

    def sentence(self, key: str | None) -> str:
        r = self.rng
        words: list[str] = []
        compound = r.random() < COMPOUND_PROB
        key_first = key is not None and (not compound or r.random() < 0.5)
        self.clause(words, key if key_first else None)
        if compound:
            words[-1] += ","
            words.append(r.choice(CONJUNCTIONS))
            self.clause(words, None if key_first else key)
        words[0] = words[0].capitalize()
        return " ".join(words) + "."

    def document(self, n_sentences: int) -> str:
        r = self.rng
        i = r.randrange(len(self.keys_a))
        partner_at = r.randrange(2, n_sentences)  # >= 2 sentences after the key: long range only
        keys = {0: self.keys_a[i], partner_at: self.keys_b[i]}
        return " ".join(self.sentence(keys.get(s)) for s in range(n_sentences))


def generate_documents(settings: SyntheticSettings) -> Iterator[str]:
    """Yield `settings.documents` raw-text documents; the same seed gives the same text."""
    gen = _Generator(settings.seed)
    lo, hi = settings.sentences_per_document
    for _ in range(settings.documents):
        yield gen.document(gen.rng.randint(lo, hi))


_TOKEN = re.compile(r"[a-z]+|[().,]")


def tokenize(document_text: str) -> list[str]:
    """The tokens preprocess produces from a document (lower-cased, punctuation split off)."""
    return _TOKEN.findall(document_text.lower())


def sentences(document_text: str) -> list[str]:
    """The sentences preprocess makes of a generated document, as it writes them: its tokens (`tokenize`), cut after
    each full stop, joined by spaces. Equal to what spaCy's sentences and Moses make of it under `cleans_like_this`'s
    settings (tests/data/test_synthetic.py compares the two on a corpus), and many times faster."""
    out, sentence = [], []
    for token in tokenize(document_text):
        sentence.append(token)
        if token == ".":
            out.append(" ".join(sentence))
            sentence = []
    return out + ([" ".join(sentence)] if sentence else [])


def cleans_like_this(pre) -> bool:
    """Whether preprocess's cleaning (`pre`: the preprocess settings) makes of a generated document exactly its
    `sentences`: lower-cased, punctuation normalised and split off by Moses (English), no sentence cut short."""
    return (
        pre.lowercase
        and pre.normalize_punctuation
        and pre.moses_tokenize
        and pre.moses_lang == "en"
        and pre.max_sentence_chars >= 1000  # a generated sentence is at most a few hundred characters
    )


def annotate(document_text: str) -> list[tuple[str, str]]:
    """(token, kind) per occurrence, decided from each token's *role* in the parse.

    Independent of the type table on purpose: tests compare the two, so a
    generator bug (a particle after the wrong noun, a B word without its A)
    shows up as a disagreement. Unknown tokens raise ValueError.
    """
    tokens = tokenize(document_text)
    pos = _pos()
    unknown = sorted({t for t in tokens if t not in pos})
    if unknown:
        raise ValueError(f"not a synthetic document: unknown tokens {unknown[:5]}")
    sentence_of, s = [], 0
    for t in tokens:
        sentence_of.append(s)
        s += t == "."
    where: dict[str, list[int]] = {}
    for i, t in enumerate(tokens):
        where.setdefault(t, []).append(sentence_of[i])
    pairs = key_pairs()
    back = {b: a for a, b in pairs.items()}
    out = []
    for i, t in enumerate(tokens):
        p, c = pos[t]
        prev = tokens[i - 1] if i else ""
        kind = "other"
        if p == "particle":
            if pos[prev][0] == "noun" and pos[prev][1] == c and pos[tokens[i + 1]][0] == "verb":
                kind = "determined"
        elif p == "open":
            if tokens[i + 2 : i + 3] == [")"] and pos[tokens[i + 1]][0] == "noise":
                kind = "determined"
        elif p == "close":
            if i >= 2 and tokens[i - 2] == "(" and pos[prev][0] == "noise":
                kind = "determined"
        elif p == "noise":
            if prev == "(" and tokens[i + 1 : i + 2] == [")"]:
                kind = "noise"
        elif p == "key_a":
            if any(s2 >= sentence_of[i] + 2 for s2 in where.get(pairs[t], ())):
                kind = "long_range"
        elif p == "key_b":
            if any(s2 <= sentence_of[i] - 2 for s2 in where.get(back[t], ())):
                kind = "long_range"
        out.append((t, kind))
    return out


__all__ = ["generate_documents", "word_kinds", "annotate", "key_pairs", "noun_class", "tokenize", "GRAMMAR", "KINDS"]
