"""The synthetic language: deterministic, and its token kinds are what they claim to be."""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mapnet_cli.data import synthetic
from mapnet_cli.settings import PreprocessSettings, SyntheticSettings


def docs(n: int, seed: int = 0) -> list[str]:
    return list(synthetic.generate_documents(SyntheticSettings(documents=n, seed=seed)))


def chi2_critical(df: int, p: float = 1e-3) -> float:
    """Upper p-quantile of chi-square(df) by Wilson-Hilferty (accurate to ~1% for df >= 10)."""
    z = {1e-3: 3.090, 1e-2: 2.326}[p]
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def chi2_independence(table: np.ndarray) -> tuple[float, int]:
    table = table[table.sum(1) > 0][:, table.sum(0) > 0]
    expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / table.sum()
    return float(((table - expected) ** 2 / expected).sum()), (table.shape[0] - 1) * (table.shape[1] - 1)


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return docs(1500, seed=5)


def test_deterministic_per_seed_and_different_across_seeds():
    assert docs(30, seed=1) == docs(30, seed=1)
    assert docs(30, seed=1) != docs(30, seed=2)
    assert docs(5, seed=1) == docs(30, seed=1)[:5]  # a prefix does not depend on the corpus size


def test_lexicon_small_lower_case_and_one_kind_per_type():
    kinds = synthetic.word_kinds()
    assert len(kinds) <= 2500
    assert set(kinds.values()) == set(synthetic.KINDS)
    words = [w for w in kinds if w not in "().,"]
    assert all(re.fullmatch(r"[a-z]+", w) for w in words)
    pairs = synthetic.key_pairs()
    assert len(set(pairs.values())) == len(pairs) == 64  # a bijection
    assert all(kinds[a] == kinds[b] == "long_range" for a, b in pairs.items())
    for kind in synthetic.KINDS:
        assert kind in synthetic.GRAMMAR


def test_type_table_agrees_with_per_occurrence_annotation(corpus):
    kinds = synthetic.word_kinds()
    seen = Counter()
    for text in corpus:
        for token, kind in synthetic.annotate(text):
            assert kinds[token] == kind, (token, kind, text)
            seen[kind] += 1
    # Every kind is well represented (noise and long-range are the rare ones, by design).
    total = sum(seen.values())
    assert seen["determined"] / total > 0.1 and seen["noise"] / total > 0.02 and seen["long_range"] / total > 0.01


def test_particles_follow_a_noun_of_their_class(corpus):
    for text in corpus:
        tokens = synthetic.tokenize(text)
        for i, t in enumerate(tokens):
            if t in synthetic.PARTICLES:
                assert synthetic.noun_class(tokens[i - 1]) == synthetic.PARTICLES.index(t)


def test_brackets_enclose_exactly_one_noise_word(corpus):
    kinds = synthetic.word_kinds()
    for text in corpus:
        tokens = synthetic.tokenize(text)
        for i, t in enumerate(tokens):
            if t == "(":
                assert kinds[tokens[i + 1]] == "noise" and tokens[i + 2] == ")"
            if kinds[t] == "noise":
                assert tokens[i - 1] == "(" and tokens[i + 1] == ")"


def test_each_partner_follows_its_key_at_long_range(corpus):
    pairs = synthetic.key_pairs()
    back = {b: a for a, b in pairs.items()}
    for text in corpus:
        sentences = [s.split() for s in " ".join(synthetic.tokenize(text)).split(" .") if s.strip()]
        keys = [(i, w) for i, s in enumerate(sentences) for w in s if w in pairs]
        partners = [(i, w) for i, s in enumerate(sentences) for w in s if w in back]
        assert len(keys) == 1 and keys[0][0] == 0  # the document opens with its key
        assert len(partners) == 1
        (j, b), (_, a) = partners[0], keys[0]
        assert back[b] == a and j >= 2


def test_noise_is_uniform_and_independent_of_neighbours(corpus):
    noise = sorted(w for w, k in synthetic.word_kinds().items() if k == "noise")
    index = {w: i for i, w in enumerate(noise)}
    counts = np.zeros(len(noise))
    before = np.zeros((8, 8))  # noise bucket x bucket of the word before "("
    successive = np.zeros((8, 8))  # bucket of a noise word x bucket of the next one in the document
    for text in corpus:
        tokens = synthetic.tokenize(text)
        last = None
        for i, t in enumerate(tokens):
            if t in index:
                k = index[t]
                counts[k] += 1
                before[k % 8, zlib.crc32(tokens[i - 2].encode()) % 8] += 1
                if last is not None:
                    successive[last % 8, k % 8] += 1
                last = k
    expected = counts.sum() / len(noise)
    assert expected > 30  # enough for the chi-square approximation
    assert ((counts - expected) ** 2 / expected).sum() < chi2_critical(len(noise) - 1)
    for table in (before, successive):
        stat, df = chi2_independence(table)
        assert stat < chi2_critical(df), (stat, df)


def test_chi_square_check_can_fail():
    """The independence check above would catch a noise word that copies its neighbour."""
    table = np.eye(8) * 100 + 5
    stat, df = chi2_independence(table)
    assert stat > chi2_critical(df)


def test_text_survives_preprocessing_into_known_tokens():
    """After Moses normalisation, tokenisation and lower-casing every token is a word type."""
    from mapnet_cli.data.textproc import TextProcessor

    kinds = synthetic.word_kinds()
    texts = docs(80, seed=3)
    results = TextProcessor(PreprocessSettings()).process(texts)
    for text, result in zip(texts, results):
        tokens = " ".join(result.sentences).split()
        assert tokens == synthetic.tokenize(text)
        assert all(t in kinds for t in tokens)
        assert len(result.sentences) == text.count(".")  # one output line per generated sentence


def test_default_corpus_size():
    s = SyntheticSettings()
    n_docs = n_sentences = n_bytes = n_tokens = 0
    lo, hi = s.sentences_per_document
    for text in synthetic.generate_documents(s):
        n_docs += 1
        k = text.count(".")
        assert lo <= k <= hi
        n_sentences += k
        n_bytes += len(text)
        n_tokens += len(synthetic.tokenize(text))
    assert n_docs == 6000
    assert abs(n_sentences / n_docs - (lo + hi) / 2) < 0.2
    # ~100 tokens per document: ~600k tokens, ~3.2 MB -- minutes of tiny-BERT pretraining on a CPU.
    assert 550_000 < n_tokens < 700_000 and 2.8e6 < n_bytes < 3.6e6


def test_tiny_recipe_resolves_and_shows():
    from typer.testing import CliRunner

    from mapnet_cli.cli import app
    from mapnet_cli.data.recipes import load_recipe
    from mapnet_cli.settings import resolve

    recipe = Path(__file__).resolve().parents[2] / "data_recipes" / "tiny.toml"
    assert load_recipe(recipe).inputs == ("synthetic:",)
    s = resolve(recipe, extra_sections=("recipe",))
    assert (s.shard.max_seq_len, s.shard.valid_fraction, s.preprocess.vocab_size, s.model.preset) == (
        128,
        0.05,
        4096,
        "tiny",
    )
    assert s.model.layers == 2 and s.train.steps <= 1000 and s.optim.warmup.steps < s.train.steps
    shown = CliRunner().invoke(app, ["config", "show", "--config", str(recipe)])
    assert shown.exit_code == 0 and "vocab_size = 4096" in shown.output


def test_the_generated_sentences_are_what_spacy_and_moses_make_of_the_text():
    """synthetic.sentences (what preprocess writes for the generated corpus, without spaCy or Moses) is the cleaning
    pipeline's output line for line, under the settings cleans_like_this accepts; other settings are refused."""
    from mapnet_cli.data.textproc import TextProcessor

    texts = docs(400, seed=11)
    pre = PreprocessSettings()
    assert synthetic.cleans_like_this(pre)
    assert [synthetic.sentences(t) for t in texts] == [r.sentences for r in TextProcessor(pre).process(texts)]
    for changed in ({"lowercase": False}, {"moses_tokenize": False}, {"normalize_punctuation": False},
                    {"moses_lang": "de"}, {"max_sentence_chars": 100}):  # fmt: skip
        assert not synthetic.cleans_like_this(PreprocessSettings(**changed)), changed


def test_preprocess_of_the_generated_corpus_writes_the_same_bytes_with_or_without_the_cleaning_pipeline(
    tmp_path, monkeypatch
):
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.settings import resolve

    settings = resolve(assignments=["synthetic.documents=300", "preprocess.vocab_size=600"])
    run_preprocess(["synthetic:"], tmp_path / "fast", settings)
    monkeypatch.setattr(synthetic, "cleans_like_this", lambda pre: False)  # through spaCy and Moses
    run_preprocess(["synthetic:"], tmp_path / "piped", settings)
    for name in ("sentences/part-00000.txt", "tokenizer.json", "word_kinds.json"):
        assert (tmp_path / "fast" / name).read_bytes() == (tmp_path / "piped" / name).read_bytes(), name
    fast, piped = ((tmp_path / d / "manifest.json").read_text() for d in ("fast", "piped"))
    strip = lambda text: re.sub(r'"(seconds|sentence_seconds|[a-z_]*_seconds|created|workers)": [^,\n]*', "", text)  # noqa: E731
    assert strip(fast) == strip(piped)
