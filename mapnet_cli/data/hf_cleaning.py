"""mapnet's cleaning (`cleaning.Cleaner`) as `tokenizers` normalizers and pre-tokenizers, for `mapnet export`.

    from mapnet_cli.data import hf_cleaning
    tok.normalizer = normalizers.Sequence([hf_cleaning.normalizer(settings.preprocess, "▁"), tok.normalizer])
    tok.pre_tokenizer = pre_tokenizers.Sequence([hf_cleaning.pre_tokenizer(settings.preprocess), tok.pre_tokenizer])

so that `AutoTokenizer.from_pretrained(export)("He said it.")` reads text as the run's pretraining did ("he said
it ."), with no sacremoses at hand. What is built is decided by the run's recorded `preprocess` settings
(normalize_punctuation, moses_tokenize, moses_lang, lowercase) and by sacremoses itself (its rule lists,
character classes and non-breaking prefixes for `moses_lang`), never by the vocabulary.

How a Moses rule becomes a `Replace` (look-arounds for its context, re.sub's consumption by parity, character
classes spelled out, the one step left to the pre-tokenizer): docs/internals.md#datahf_cleaningpy. Not exact in
four cases that no real sentence of 2,000 holds: docs/pretraining.md#export (each shown in
tests/data/test_hf_cleaning.py; experiments/export-text-parity/export_text_parity.py).
"""

from __future__ import annotations

import re
from functools import cache

from ..errors import MapnetError

PAD_KEEP = ".'`,-"  # PAD_NOT_ISALNUM leaves these (and alphanumerics and spaces) unpadded


# ---------------------------------------------------------------- character classes
@cache
def _all_chars() -> str:
    return "".join(chr(i) for i in range(0x110000) if not 0xD800 <= i < 0xE000)  # surrogates are not text


@cache
def python_class(pattern: str) -> frozenset[str]:
    """The characters a one-character Python regex (r"\\s", r"\\d") matches, found by asking `re` itself."""
    return frozenset(re.findall(pattern, _all_chars()))


@cache
def _all_chars_set() -> frozenset[str]:
    return frozenset(_all_chars())


@cache
def _changed_by_lower() -> frozenset[str]:
    chars = _all_chars()[1:]  # NUL is the separator; lower() leaves it
    return frozenset(c for c, low in zip(chars, _lower_each(chars)) if low != c)


def _lower_each(texts) -> list[str]:
    """[t.lower() for t in texts] in one call to lower() (texts without NUL; a million of them take 0.1 s)."""
    return "\0".join(texts).lower().split("\0")


def char_class(chars, negate: bool = False) -> str:
    """An Oniguruma class for exactly `chars`: ranges of code points, every non-alphanumeric one escaped."""
    points = sorted({ord(c) for c in chars})
    if not points:
        raise ValueError("empty character class")
    parts, start = [], points[0]
    for prev, cur in zip(points, points[1:] + [None]):
        if cur is not None and cur == prev + 1:
            continue
        parts.append(_one(start) if start == prev else f"{_one(start)}-{_one(prev)}")
        start = cur
    return ("[^" if negate else "[") + "".join(parts) + "]"


def _one(point: int) -> str:
    c = chr(point)
    return c if c.isalnum() and c.isprintable() and point < 0x10000 else f"\\x{{{point:X}}}"


def _any(*alternatives: str) -> str:
    return "(?:" + "|".join(a for a in alternatives if a) + ")"


class MosesClasses:
    """sacremoses' character sets for one language (as Python sets) and what PAD_NOT_ISALNUM pads."""

    def __init__(self, lang: str):
        from sacremoses import MosesTokenizer

        self.moses = MosesTokenizer(lang=lang)
        check_tokenizer_rules(self.moses)  # every translation of Moses' tokenisation starts here
        self.ws = python_class(r"\s")
        self.alnum, self.alpha = set(self.moses.IsAlnum), set(self.moses.IsAlpha)
        self.unpadded = self.alnum | self.ws | set(PAD_KEEP)  # every other character becomes a token of its own
        self.padded_set = _all_chars_set() - self.unpadded
        self.padded = char_class(self.unpadded, negate=True)
        # After padding, a padded character's neighbours see a space: to them it is no number (IsN holds 291
        # padded characters: "½", "²" ...). IsAlpha lies inside IsAlnum.
        self.num = set(self.moses.IsN) - self.padded_set
        self.lower = set(self.moses.IsLower)


@cache
def _moses_classes(lang: str) -> MosesClasses:
    return MosesClasses(lang)


# ---------------------------------------------------------------- building blocks
def _replace(pattern: str, content: str):
    from tokenizers import Regex, normalizers

    return normalizers.Replace(Regex(pattern), content)


def _between(left: set, sep: str, right: set, replacement: str, padded: frozenset = frozenset()):
    """re.sub(f"([left]){sep}([right])", f"\\1{replacement}\\2") as a Replace of `sep` alone.

    re.sub consumes the right-hand character, so in "a'b'c" (EN4) the second "'" has no unconsumed left
    neighbour and stays: along a chain e0 sep e1 sep e2 ... of single characters every other sep matches,
    counted from the chain's start. The look-behind counts that parity; e0 starts the chain when nothing
    before it could have consumed it. A `padded` character, which has Moses' spaces around it, breaks a
    chain. `sep` must be neither a left nor a right character (EN_SPECIFIC_1's is one:
    `_apostrophe_between_non_letters`)."""
    if sep in left or sep in right:
        raise ValueError(f"{sep!r} may be its own neighbour: chains through it are not counted here")
    both, s = (left & right) - padded, re.escape(sep)
    only_left = (left - right) | (left & padded)
    starts = []
    if both:
        unconsumed = _any(r"\A", char_class({sep}, negate=True), rf"\A{s}", f"{char_class(left, negate=True)}{s}")
        starts.append(unconsumed + char_class(both))
    if only_left:
        starts.append(char_class(only_left))  # never a right-hand character, so never consumed
    pairs = f"(?:{s}{char_class(both)}{s}{char_class(both)})*" if both else ""
    return _replace(f"(?<={_any(*starts)}{pairs}){s}(?={char_class(right)})", replacement)


def _apostrophe_between_non_letters(c: MosesClasses):
    """re.sub(r"([^IsAlpha])'([^IsAlpha])", r"\\1 ' \\2") (EN_SPECIFIC_1), exactly, as a Replace of "'".

    "'" is itself a non-letter, so a run of non-letters ("' '", "''") is one chain: re.sub, scanning it
    from the left, takes every "'" that has a non-letter on both sides and is not within two characters of
    the last one it took (it consumed them). The look-behind parses the run from its start that way: its
    first character, then free stretches of other non-letters, each "'" followed by the two characters it
    blocks. In Moses' text a padded character has a space on each side, which shifts the count: a blocked
    stretch that meets one ends there."""
    n, o, p = char_class(c.alpha, negate=True), char_class(c.alpha | {"'"}, negate=True), c.padded
    n_np = char_class(c.unpadded - c.alpha)  # a non-letter Moses does not pad
    blocked, run_start = _any(p, f"{n_np}{p}", f"{n_np}{n_np}"), _any(r"\A", char_class(c.alpha))
    return _replace(f"(?<={run_start}{n}(?:{o}*'{blocked})*{o}*)'(?={n})", " ' ")


# ---------------------------------------------------------------- Moses punctuation normalisation
def punctuation_rules(lang: str) -> list:
    """sacremoses' MosesPunctNormalizer(lang) substitutions, in its order."""
    from sacremoses import MosesPunctNormalizer

    digit = python_class(r"\d")
    d = char_class(digit)
    # The rules with groups, each as Replaces with the same effect. No two matches of these can overlap,
    # except where said.
    grouped = {
        r"\) ([.!:?;,])": [(r"(?<=\)) (?=[.!:?;,])", "")],
        r"(\d) %": [(f"(?<={d}) (?=%)", "")],
        # Overlaps ("a‘b‘c") leave a ‘, which the next rules but one turn into ' all the same.
        "([a-zA-Z])\u2018([a-zA-Z])": [("(?<=[a-zA-Z])\u2018(?=[a-zA-Z])", "'")],
        "([a-zA-Z])\u2019([a-zA-Z])": [("(?<=[a-zA-Z])\u2019(?=[a-zA-Z])", "'")],
        # '"' before a run of commas/periods moves after it: the run's last character gets a '"' after it,
        # then the quote before the run goes.
        r'"([,.]+)': [(r'(?<="[,.]*),(?![,.])', ',"'), (r'(?<="[,.]*)\.(?![,.])', '."'), (r'"(?=[,.])', "")],
        # ... and the other way for de/es/fr: before the dots, when something other than "<" follows
        # (overlaps, a quote right after such a quote's next character, are not followed).
        r'(\.+)"(\s*[^<])': [(r'(?<!\.)\.(?=\.*"[^<])', '".'), (r'(?<=\.)"(?=[^<])', "")],
    }
    rules = []
    for pattern, sub in MosesPunctNormalizer(lang=lang).substitutions:
        if pattern in grouped:
            rules += [_replace(onig, content) for onig, content in grouped[pattern]]
        elif pattern == "(\\d)\u00a0(\\d)":  # a no-break space between digits: "." (en) or "," (de, fr, ...)
            rules.append(_between(digit, "\u00a0", digit, sub.removeprefix("\\g<1>").removesuffix("\\g<2>")))
        elif re.compile(pattern).groups == 0 and "\\" not in sub:
            rules.append(_replace(pattern, sub))  # a literal or " +": the same in Oniguruma
        else:
            raise MapnetError(
                f"sacremoses' punctuation rule {pattern!r} -> {sub!r} (moses_lang {lang!r}) has no "
                "tokenizers equivalent here; the export cannot reproduce the run's cleaning"
            )
    return rules


# ---------------------------------------------------------------- Moses tokenisation
# The MosesTokenizer rules `tokenize_rules` and `pre_tokenizer` translate, as sacremoses 0.2.0 (tested) has
# them: (pattern, substitution), the character classes as fields ({alnum}: IsAlnum, {alpha}: IsAlpha, {isn}:
# IsN, filled from the installed sacremoses, whose class contents are read at run time anyway).
TRANSLATED_RULES = {
    "DEDUPLICATE_SPACE": (r"\s+", r" "),
    "ASCII_JUNK": (r"[\000-\037]", r""),
    "PAD_NOT_ISALNUM": (r"([^{alnum}\s\.'\`\,\-])", r" \1 "),
    "COMMA_SEPARATE_1": (r"([^{isn}])[,]", r"\1 , "),
    "COMMA_SEPARATE_2": (r"[,]([^{isn}])", r" , \1"),
    "COMMA_SEPARATE_3": (r"([{isn}])[,]$", r"\1 , "),
    "EN_SPECIFIC_1": (r"([^{alpha}])[']([^{alpha}])", r"\1 ' \2"),
    "EN_SPECIFIC_2": (r"([^{alpha}{isn}])[']([{alpha}])", r"\1 ' \2"),
    "EN_SPECIFIC_3": (r"([{alpha}])[']([^{alpha}])", r"\1 ' \2"),
    "EN_SPECIFIC_4": (r"([{alpha}])[']([{alpha}])", r"\1 '\2"),
    "EN_SPECIFIC_5": (r"([{isn}])[']([s])", r"\1 '\2"),
    "FR_IT_SPECIFIC_1": (r"([^{alpha}])[']([^{alpha}])", r"\1 ' \2"),
    "FR_IT_SPECIFIC_2": (r"([^{alpha}])[']([{alpha}])", r"\1 ' \2"),
    "FR_IT_SPECIFIC_3": (r"([{alpha}])[']([^{alpha}])", r"\1 ' \2"),
    "FR_IT_SPECIFIC_4": (r"([{alpha}])[']([{alpha}])", r"\1' \2"),
    "NON_SPECIFIC_APOSTROPHE": (r"\'", r" ' "),
    "TRAILING_DOT_APOSTROPHE": (r"\.' ?$", r" . ' "),
}
TRANSLATED_LISTS = {
    "ENGLISH_SPECIFIC_APOSTROPHE": [f"EN_SPECIFIC_{i}" for i in range(1, 6)],
    "FR_IT_SPECIFIC_APOSTROPHE": [f"FR_IT_SPECIFIC_{i}" for i in range(1, 5)],
}


def check_tokenizer_rules(moses) -> None:
    """Refuse, in one line, a sacremoses whose MosesTokenizer rules are not the ones translated here, as
    `punctuation_rules` refuses a punctuation rule it does not know: a silently different export is worse than
    none. What is not data (tokenize()'s order, its multi-dot and non-breaking-prefix procedures) is compared
    with sacremoses on real text by tests/data/test_hf_cleaning.py."""
    from importlib.metadata import version

    cls = type(moses)
    classes = {"alnum": cls.IsAlnum, "alpha": cls.IsAlpha, "isn": cls.IsN}
    changed = []
    for name, (pattern, sub) in TRANSLATED_RULES.items():
        rule = getattr(cls, name, None)
        try:
            same = rule[0].pattern == pattern.format(**classes) and rule[1] == sub
        except (TypeError, IndexError, AttributeError):
            same = False
        if not same:
            changed.append(name)
    for name, members in TRANSLATED_LISTS.items():
        if getattr(cls, name, None) != [getattr(cls, m, None) for m in members]:
            changed.append(name)
    if changed:
        raise MapnetError(
            f"sacremoses {version('sacremoses')}: MosesTokenizer rule(s) {', '.join(changed)} differ from "
            "those mapnet's export translates (tested with sacremoses 0.2.0); the export "
            "cannot reproduce the run's cleaning: install sacremoses 0.2.0"
        )


def tokenize_rules(c: MosesClasses) -> list:
    """sacremoses' MosesTokenizer(lang).tokenize(text, escape=False), less the padding `pre_tokenizer` does.

    The comma and apostrophe rules look at one neighbouring character, which is not alphanumeric either way
    (Moses' padding space, or the padded character itself); only the final-period rule asks where a token
    starts or ends (`final_period`)."""
    from tokenizers import normalizers

    # Classes of everything but a small set are written negated: spelling out a million characters is slow.
    num, not_num = char_class(c.num), char_class(c.num, negate=True)
    alpha, not_alpha = char_class(c.alpha), char_class(c.alpha, negate=True)
    if c.moses.lang in ("en", "fr", "it"):
        apart = _apostrophe_between_non_letters(c)  # EN_SPECIFIC_1 / FR_IT_SPECIFIC_1
        letters_apart = _between(c.alpha, "'", c.alpha, " '" if c.moses.lang == "en" else "' ", c.padded_set)
    run_start = _any(r"\A", num)
    comma_before = f"{char_class(c.num | {','}, negate=True)}(?:,,)*|{run_start},(?:,,)*"
    rules = [
        _replace(f"{char_class(c.ws)}+", " "),  # DEDUPLICATE_SPACE
        _replace("[\\x{0}-\\x{1F}]", ""),  # ASCII_JUNK
        normalizers.Strip(),
        # COMMA_SEPARATE_1 consumes the character before the comma: in a run of commas every other one.
        _replace(f"(?<={comma_before}),", " , "),
        # COMMA_SEPARATE_2 consumes the one after: every other comma of a run, from its start.
        _replace(f"(?<=(?:\\A|[^,])(?:,,)*),(?={not_num})", " , "),
        _replace(f"(?<={num}),\\z", " , "),  # COMMA_SEPARATE_3
    ]
    if c.moses.lang == "en":
        rules += [
            apart,
            _replace(f"(?<={char_class(c.alpha | c.num, negate=True)})'(?={alpha})", " ' "),
            _replace(f"(?<={alpha})'(?={not_alpha})", " ' "),
            letters_apart,
            _replace(f"(?<={num})'(?=s)", " '"),
        ]
    elif c.moses.lang in ("fr", "it"):
        rules += [
            apart,
            _replace(f"(?<={not_alpha})'(?={alpha})", " ' "),
            _replace(f"(?<={alpha})'(?={not_alpha})", " ' "),
            letters_apart,
        ]
    else:
        rules.append(_replace("'", " ' "))
    rules += [
        _replace(final_period(c), " ."),
        _replace(" {2,}", " "),
        normalizers.Strip(),
        _replace(r"(?<!\.)\.' ?\z", " . ' "),
    ]  # TRAILING_DOT_APOSTROPHE; a run of dots is its own token
    return rules


def final_period(c: MosesClasses) -> str:
    """handles_nonbreaking_prefixes as one pattern: the "." that ends a token is split off unless

    (1) the rest of the token holds a "." and a letter ("U.S."), (2) the rest is a non-breaking prefix
    ("Mr."), (3) the next token starts with a lower-case letter, or (4) the rest is a numeric-only prefix
    ("No.") and the next token starts with a digit. A token starts after a space, a padded character or a
    run of dots (`pre_tokenizer` splits those); a run of dots is a token of its own and never split."""
    start = _any(r"\A", " ", c.padded, r"\.\.")
    numeric = sorted(c.moses.NUMERIC_ONLY_PREFIXES)
    prefixes = sorted(p for p in c.moses.NONBREAKING_PREFIXES if p not in numeric and " " not in p)
    alts = lambda words: "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))  # noqa: E731
    in_token = c.alnum | set(PAD_KEEP)
    no_dot, no_letter = char_class(in_token - {"."}), char_class(in_token - c.alpha)
    pattern = (
        f"(?<={start}{_any(no_dot + '+', no_letter + '+')})"
        + r"(?<!\.)"
        + (f"(?<!{start}{_any(alts(prefixes))})" if prefixes else "")
        + f"\\.(?= |\\z|{c.padded})"
        + f"(?! *{char_class(c.lower)})"
    )
    if numeric:
        pattern += f"(?!(?<={start}{_any(alts(numeric))}\\.) *[0-9])"
    return pattern


# ---------------------------------------------------------------- lower-casing
@cache
def _final_sigma_sets() -> tuple[frozenset[str], frozenset[str]]:
    """(cased, case-ignorable) as `str.lower()` decides Σ's final form, read from `str.lower()` itself.

    Python writes ς for Σ when a cased letter comes before it (case-ignorable characters skipped) and none
    after it; only characters that are cased and not case-ignorable count as cased there."""
    chars = _all_chars()[1:]  # NUL: neither (a control character), and the separator below
    # Each "1xΣ" / "AxΣ" lower-cased on its own: NUL between them stops Python's look either way.
    after_digit = _lower_each(f"1{ch}\u03a3" for ch in chars)
    after_letter = _lower_each(f"A{ch}\u03a3" for ch in chars)
    cased = {ch for ch, low in zip(chars, after_digit) if low[-1] == "\u03c2"}
    ignorable = {ch for ch, low in zip(chars, after_letter) if low[-1] == "\u03c2"} - cased
    return frozenset(cased), frozenset(ignorable)


def lowercase_rules(c: MosesClasses | None) -> list:
    """str.lower(): Σ's final form first (tokenizers' Lowercase has none), then Lowercase.

    Python lower-cases after Moses has padded (`c`, when the text was Moses-tokenised): a padded character,
    or a run of dots, stands between spaces there, so it ends the context as a space would."""
    from tokenizers import normalizers

    cased, ignorable = _final_sigma_sets()
    if c is None:
        cased_, context = char_class(cased), f"{char_class(ignorable)}*"
    else:  # single dots may be skipped, not a run of them
        padded = c.padded_set
        skipped = char_class(ignorable - padded - {"."})
        cased_, context = char_class(cased - padded), f"{skipped}*(?:\\.{skipped}+)*\\.?"
    return [_replace(f"(?<={cased_}{context})\u03a3(?!{context}{cased_})", "\u03c2"), normalizers.Lowercase()]


# ---------------------------------------------------------------- the whole path
def normalizer(settings, marker: str | None):
    """`cleaning.Cleaner(settings, marker)` as one tokenizers normalizer (a Sequence), all but Moses'
    padding, which `pre_tokenizer` does."""
    return _normalizer(
        settings.normalize_punctuation, settings.moses_tokenize, settings.moses_lang, settings.lowercase, marker
    )


@cache  # building the classes takes seconds; a process builds each cleaning once
def _normalizer(
    normalize_punctuation: bool, moses_tokenize: bool, moses_lang: str, lowercase: bool, marker: str | None
):
    from tokenizers import normalizers

    c = _moses_classes(moses_lang) if moses_tokenize else None
    steps = []
    if normalize_punctuation:
        steps += punctuation_rules(moses_lang)
    if c is not None:
        steps += tokenize_rules(c)
    if lowercase:
        steps += lowercase_rules(c)
    if marker:
        steps.append(normalizers.Replace(marker, "_"))
    whitespace = char_class(python_class(r"\s"))
    steps += [_replace(f"{whitespace}+", " "), normalizers.Strip()]  # " ".join(line.split())
    return normalizers.Sequence(steps)


def pre_tokenizer(settings):
    """Moses' padding as splits, to run before the tokenizer's own pre-tokenizer; None without moses_tokenize.

    Words are split at spaces first (a piece must not start or end with one, or Metaspace would make a lone
    "▁" of it), then every padded character and every run of dots is isolated. With lower-casing the padded
    set is read on lower-case characters (this runs after the normalizer): a character splits when it is
    one Moses pads."""
    if not settings.moses_tokenize:
        return None
    return _pre_tokenizer(settings.moses_lang, settings.lowercase)


@cache
def _pre_tokenizer(moses_lang: str, lowercase: bool):
    from tokenizers import Regex, pre_tokenizers

    c = _moses_classes(moses_lang)
    padded = char_class(c.unpadded | _changed_by_lower(), negate=True) if lowercase else c.padded
    return pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(f"\\.{{2,}}|{padded}"), "isolated")]
    )


__all__ = [
    "normalizer",
    "pre_tokenizer",
    "punctuation_rules",
    "tokenize_rules",
    "check_tokenizer_rules",
    "final_period",
    "lowercase_rules",
    "char_class",
    "python_class",
    "MosesClasses",
]
