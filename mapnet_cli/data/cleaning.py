"""Raw text -> the line a mapnet tokenizer reads: the one cleaning path.

    from mapnet_cli.data.cleaning import Cleaner
    Cleaner(settings.preprocess)(['He said "no." Then left.'])   # ['he said " no . " then left .']

In order, each as the run's `preprocess` settings say: Moses punctuation normalisation (sacremoses
`MosesPunctNormalizer`, `normalize_punctuation`), Moses tokenisation (`MosesTokenizer(moses_lang)`, `escape=False`,
`moses_tokenize`), lower-casing (`lowercase`), the tokenizer's word marker made "_" (below) and whitespace
collapsed to single spaces.

Everything that turns text into ids comes through here: `preprocess` (`TextProcessor`: normalise a piece, split
it into sentences, `line` each), and `finetune-glue`, `probe` and every evaluator that reads text
(`evaluation/glue/encode.TextEncoder`). `mapnet export` writes the same steps as `tokenizers` normalizers
(`hf_cleaning.py`), tested against this module on real text.
"""

from __future__ import annotations

from .bpe import METASPACE  # mapnet's BPE word-boundary marker, "▁"

# The preprocess settings that decide how text is cleaned: they belong to a corpus (`shard` records them
# in its settings.toml), and every reader of that corpus's models (a run, its export, its evaluators) must
# use the corpus's values, never defaults of its own.
CLEANING = ("normalize_punctuation", "moses_tokenize", "moses_lang", "lowercase")


def cleaning_settings(preprocess_settings) -> dict:
    """{setting: value} of the CLEANING settings of a `preprocess` section."""
    return {k: getattr(preprocess_settings, k) for k in CLEANING}


def word_marker(tokenizer) -> str | None:
    """The character `tokenizer` (a tokenizers.Tokenizer) writes for a space, if it has one (Metaspace: "▁").

    Cleaning turns that character into "_" when it is literally in the text: left as it is, it would read as
    a word boundary and not survive decode(encode(line)). A WordPiece (BERT) tokenizer has no such marker and
    its own pre-tokenizer decides what "▁" is, so cleaning leaves it (`--init-from` reads text as BERT does)."""
    from tokenizers import pre_tokenizers

    pre = tokenizer.pre_tokenizer
    return pre.replacement if isinstance(pre, pre_tokenizers.Metaspace) else None


class Cleaner:
    """One run's cleaning (its `preprocess` settings and its tokenizer's word marker), sacremoses built once."""

    def __init__(self, settings, marker: str | None = METASPACE):
        from sacremoses import MosesPunctNormalizer, MosesTokenizer

        self.settings = settings
        self.marker = marker
        self.normalizer = MosesPunctNormalizer(lang=settings.moses_lang) if settings.normalize_punctuation else None
        self.moses = fast_moses(MosesTokenizer)(lang=settings.moses_lang) if settings.moses_tokenize else None

    def __call__(self, texts: list[str]) -> list[str]:
        """Each raw text (a sentence, or a GLUE field) -> its cleaned line."""
        return [self.line(self.normalize(t)) for t in texts]

    def normalize(self, text: str) -> str:
        """Moses punctuation normalisation, when the settings ask for it. preprocess normalises a whole piece
        before splitting it into sentences (one regex pass instead of one per sentence)."""
        return self.normalizer.normalize(text) if self.normalizer is not None else text

    def line(self, sentence: str) -> str:
        """One normalised sentence -> Moses tokens (or its own words) joined by single spaces, lower-cased if asked.

        Without `moses_tokenize` (`preprocess --bert-text`) the sentence keeps its own spacing: a WordPiece
        tokenizer's pre-tokenizer splits punctuation itself, as in BERT's pretraining."""
        # Tokenise before lower-casing: Moses' non-breaking prefixes ("Mr.", "U.S.") are case-sensitive.
        line = self.moses.tokenize(sentence, return_str=True, escape=False) if self.moses is not None else sentence
        if self.settings.lowercase:
            line = line.lower()
        if self.marker:
            line = line.replace(self.marker, "_")
        # split/join removes every kind of whitespace (\r, \t, U+2028): one output line per sentence.
        return " ".join(line.split())


def fast_moses(base):
    """MosesTokenizer with its character-class tests on prebuilt sets (same results).

    sacremoses rebuilds a 10k-character set on every `isanyalpha`/`islower` call.
    """

    class FastMosesTokenizer(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            # From the instance: zh/ja/ko add their scripts to IsAlpha in __init__.
            self._alpha = frozenset(self.IsAlpha)
            self._lower = frozenset(self.IsLower)

        def islower(self, text):
            return self._lower.issuperset(text)

        def isanyalpha(self, text):
            return not self._alpha.isdisjoint(text)

    return FastMosesTokenizer


__all__ = ["Cleaner", "METASPACE", "word_marker", "fast_moses"]
