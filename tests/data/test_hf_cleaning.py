"""The exported tokenizer reads text as mapnet's own pipeline does (issue 36).

mapnet's pipeline is `TextEncoder` (what finetune-glue, probe and the evaluators run: `cleaning.Cleaner`, then
the run's tokenizer); the export is `AutoTokenizer.from_pretrained(folder)` on what `export.write_tokenizer`
writes. Real text: tests/real_text.py.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest
from built_once import built_once
from real_text import real_sentences, training_text

from mapnet_cli.data import bpe, hf_cleaning
from mapnet_cli.data.cleaning import Cleaner
from mapnet_cli.evaluation.glue.encode import TextEncoder
from mapnet_cli.export import tokenizer_files, write_tokenizer
from mapnet_cli.settings import Settings

transformers = pytest.importorskip("transformers")

PAPER = Settings().preprocess  # normalise punctuation, Moses-tokenise, lower-case, en
VARIANTS = {
    "paper": PAPER,
    "cased": dataclasses.replace(PAPER, lowercase=False),
    "no-punctuation-normalisation": dataclasses.replace(PAPER, normalize_punctuation=False),
    "no-moses": dataclasses.replace(PAPER, normalize_punctuation=False, moses_tokenize=False, lowercase=False),
}


def export_folder(tokenizer: Path, settings, out: Path) -> Path:
    """The tokenizer files `mapnet export` writes (no model: AutoTokenizer needs none)."""
    import json

    out.mkdir(parents=True)
    write_tokenizer(tokenizer, out / "tokenizer.json", settings)
    for name, content in tokenizer_files(tokenizer, 512).items():
        (out / name).write_text(json.dumps(content))
    return out


def export_pieces(settings, text: str) -> list[str]:
    """What the exported normalizer + Moses splits make of `text`: the words the BPE model receives."""
    normalized = hf_cleaning.normalizer(settings, bpe.METASPACE).normalize_str(text)
    splits = hf_cleaning.pre_tokenizer(settings)
    return [p for p, _ in splits.pre_tokenize_str(normalized)] if splits else normalized.split()


@pytest.fixture(scope="session")
def sample(shared_data) -> list[tuple[str, str]]:
    return real_sentences(shared_data)


@pytest.fixture(scope="session")
def real_tokenizers(shared_data, tmp_path_factory) -> dict[str, Path]:
    """A 4,096-token BPE per variant, trained (as preprocess trains) on ~2 MB of real text cleaned that way.
    Built once per session (built_once: also across xdist workers); read-only."""

    def build(root: Path) -> dict[str, Path]:
        paragraphs = training_text(shared_data)
        out = {}
        for name, settings in VARIANTS.items():
            corpus = root / f"{name}.txt"
            corpus.write_text(
                "\n".join(line for line in Cleaner(settings)(paragraphs) if line) + "\n", encoding="utf-8"
            )
            out[name] = root / f"{name}.json"
            bpe.save_tokenizer(bpe.train_tokenizer([corpus], 4096, 2), out[name])
        return out

    return built_once(tmp_path_factory, "real-bpe", build)


@pytest.mark.slow
def test_the_fixture_vocabulary_reproduces_the_original_bug(real_tokenizers):
    """Issue 36: a lower-cased vocabulary holding "ℤ" (upper-case to str.isupper, unchanged by lower()) made the
    old export guess "cased" and turn every capital into [UNK]. The real-text fixture must hold such a symbol."""
    from tokenizers import Tokenizer

    vocab = Tokenizer.from_file(str(real_tokenizers["paper"])).get_vocab()
    odd = {ch for piece in vocab if not piece.startswith("[") for ch in piece if ch.isupper() and ch.lower() == ch}
    assert odd, "no upper-case symbol that lower() keeps: this vocabulary would not catch the old guess"
    assert not any(ch.isupper() and ch.lower() != ch for piece in vocab if not piece.startswith("[") for ch in piece)


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_export_gives_mapnets_ids_on_2000_real_sentences(variant, sample, real_tokenizers, tmp_path):
    """Acceptance (issue 36): >= 99% of 2,000 real sentences (GLUE as released, Wikipedia, books, BLiMP) get
    the same ids from AutoTokenizer.from_pretrained(export) as from mapnet's own pipeline, and no [UNK]
    appears where mapnet's has none. Measured: 2,000 of 2,000 in every variant, which is what this asserts (the
    README reports that figure), so a change that breaks even one sentence fails here."""
    settings, tokenizer = VARIANTS[variant], real_tokenizers[variant]
    texts = [text for _, text in sample]
    assert len(texts) == 2000
    ours = [ids.tolist() for ids in TextEncoder(tokenizer, settings, 512).tokenise(texts)]
    hf = transformers.AutoTokenizer.from_pretrained(str(export_folder(tokenizer, settings, tmp_path / "hf")))
    theirs = hf(texts, add_special_tokens=False)["input_ids"]
    same = [a == b for a, b in zip(ours, theirs)]
    differing = [(source, text) for (source, text), ok in zip(sample, same) if not ok]
    assert all(same), (f"{len(differing)} of {len(texts)} differ", differing[:5])
    unk = hf.unk_token_id
    assert not [t for t, a, b in zip(texts, ours, theirs) if unk in b and unk not in a]
    # Not vacuous: the export really splits, normalises (and lower-cases) the way Moses does.
    if settings.moses_tokenize:
        assert hf.tokenize('He said "no." Then') == hf.tokenize('He said " no . " Then')
    assert sum(any(ch.isupper() for ch in t) for t in texts) > 1000  # capitals: what the old export broke


# ---------------------------------------------------------------- the Moses rules, one by one
EXAMPLES = [
    'He said "no." Then he left.',
    "Mr. Smith paid $3,000.50 (No. 5) on Jan. 3.",
    "It's the U.S. Army's; isn't it?",
    "rock'n'roll",
    "Wait... what?! ...",
    "\u201cQuoted,\u201d she said \u2014 and \u2018that\u2019s\u2019 it.",
    "1\u00a0000\u00a0000 and 1\u00a02\u00a03 km",
    "ΟΔΟΣ ΟΔΟΣ. ΟΔΟΣ) Σ",
    "a,,b ,,, 5,,5 '' ' ' '",
    "e.g. i.e. etc. vs. x.",
    "\tTabs\r\nand\u2028lines\u00a0 ",
    "Its ℤ and ℝ+ are sets.",
    "She'd've done it 'cause 'tis so.",
    "\u2581marker",
    '"Hello", he said. "Bye".',
    "(a) [b] {c} <d> 3% 4 % x:y a;b",
    "end.'",
    "5'5'5 it''s '''",
]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_hand_picked_examples_split_as_moses_does(variant):
    settings = VARIANTS[variant]
    for text in EXAMPLES:
        assert export_pieces(settings, text) == Cleaner(settings)([text])[0].split(), text


@pytest.mark.parametrize("lang", ["en", "fr", "de", "cs"])
def test_random_strings_of_the_hard_characters_split_as_moses_does(lang):
    """Strings made of what the rules are about (quotes, apostrophes, commas, dots, prefixes, no-break spaces,
    final sigma, padded symbols): the export's words are Moses' words, re.sub's overlaps included."""
    settings = dataclasses.replace(PAPER, moses_lang=lang)
    words = ["a", "A", "Mr", "No", "pp", "U.S", "e.g", "he", "The", "5", "12", "3.5", "n't", "ΟΔΟΣ", "ℤ", "x", "Σ", "½"]
    marks = [
        ".",
        ",",
        "'",
        '"',
        "(",
        ")",
        "-",
        "…",
        "“",
        "”",
        "’",
        "‘",
        "`",
        "!",
        "?",
        ":",
        ";",
        "%",
        "\u00a0",
        " ",
        "  ",
        "..",
        "...",
        "\t",
        "▁",
        "´",
        "—",
        "–",
        "«",
        "»",
        "''",
        "``",
        "/",
        "&",
        "²",
    ]
    rng = random.Random(0)
    cleaner = Cleaner(settings)
    differing = []
    for _ in range(1500):
        text = "".join(rng.choice(words if rng.random() < 0.5 else marks) for _ in range(rng.randint(1, 12)))
        if export_pieces(settings, text) != cleaner([text])[0].split():
            differing.append(text)
    # (German and French quotes after two dot runs in a row differ: test_documented_differences...; too rare to
    # come up here.)
    assert not differing, differing[:5]


def test_documented_differences_are_still_differences():
    """hf_cleaning's docstring lists what the export does not reproduce; each is shown here, so the list stays
    true (a fix makes this fail and the docstring gets shorter)."""
    cases = [
        ("a DOTMULTI b", PAPER),  # sacremoses' placeholder for "..." in the text
        ("İstanbul", PAPER),  # lower-cased to i + U+0307, which Moses pads
        ("x\u13a0\u13a1 y", PAPER),  # Cherokee: lower-case form outside IsAlnum
        ("\u1c89", PAPER),  # Unicode 16: Rust lower-cases it, Python does not
        ('The.\u201d."5', dataclasses.replace(PAPER, moses_lang="de")),  # quotes after two dot runs
    ]
    for text, settings in cases:
        assert export_pieces(settings, text) != Cleaner(settings)([text])[0].split(), text


def test_no_cleaning_settings_leave_the_text_to_the_tokenizer():
    """--bert-text settings: only whitespace is collapsed, and "▁" stays for a WordPiece tokenizer (no marker)."""
    bert_text = dataclasses.replace(PAPER, normalize_punctuation=False, moses_tokenize=False, lowercase=False)
    assert hf_cleaning.pre_tokenizer(bert_text) is None
    text = "He said:\t\u201cit's\u2581 fine.\u201d "
    assert hf_cleaning.normalizer(bert_text, None).normalize_str(text) == Cleaner(bert_text, None)([text])[0]
    assert Cleaner(bert_text, None)([text])[0] == "He said: \u201cit's\u2581 fine.\u201d"


def test_an_unknown_moses_rule_is_refused(monkeypatch):
    from sacremoses import MosesPunctNormalizer

    from mapnet_cli.errors import MapnetError

    monkeypatch.setattr(MosesPunctNormalizer, "EXTRA_WHITESPACE", [(r"(a)(b)", r"\2\1")])
    with pytest.raises(MapnetError, match="no tokenizers equivalent"):
        hf_cleaning.punctuation_rules("en")


@pytest.mark.parametrize(
    "rule", ["COMMA_SEPARATE_2", "EN_SPECIFIC_4", "PAD_NOT_ISALNUM", "ENGLISH_SPECIFIC_APOSTROPHE"]
)
def test_a_changed_moses_tokenizer_rule_is_refused_by_name(rule, monkeypatch, tmp_path):
    """tokenize_rules translates MosesTokenizer's rules by hand: a sacremoses whose rules differ (here one rule
    changed, or the English apostrophe list without EN_SPECIFIC_5) is refused in one line naming the rule, by
    the export too, never translated as if it were the tested one."""
    import re

    from sacremoses import MosesTokenizer

    from mapnet_cli.errors import MapnetError

    hf_cleaning.MosesClasses("en")  # the installed sacremoses passes
    changed = (
        MosesTokenizer.ENGLISH_SPECIFIC_APOSTROPHE[:-1]
        if rule == "ENGLISH_SPECIFIC_APOSTROPHE"
        else (re.compile(getattr(MosesTokenizer, rule)[0].pattern + "?"), getattr(MosesTokenizer, rule)[1])
    )
    monkeypatch.setattr(MosesTokenizer, rule, changed)
    with pytest.raises(
        MapnetError, match=rf"^sacremoses [0-9.]+: MosesTokenizer rule\(s\) (.*, )?{rule}(, .*)? differ from those"
    ):
        hf_cleaning.MosesClasses("en")
    # Through `mapnet export`'s writer, past the caches of a process that built the rules before.
    monkeypatch.setattr(hf_cleaning, "_moses_classes", hf_cleaning._moses_classes.__wrapped__)
    monkeypatch.setattr(hf_cleaning, "_normalizer", hf_cleaning._normalizer.__wrapped__)
    tokenizer = tmp_path / "tok.json"
    bpe.save_tokenizer(bpe.train_tokenizer([_text(tmp_path)], 300, 1), tokenizer)
    with pytest.raises(MapnetError, match=rule):
        write_tokenizer(tokenizer, tmp_path / "tokenizer.json", PAPER)
    assert not (tmp_path / "tokenizer.json").exists()


def _text(tmp_path: Path) -> Path:
    (tmp_path / "text.txt").write_text("It's a cat. And a dog, a cat!\n", encoding="utf-8")
    return tmp_path / "text.txt"
