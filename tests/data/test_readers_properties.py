"""Properties of the corpus readers (hypothesis): any bytes, in any text format, give well-formed pieces
and document ends, or one MapnetError line.

Well-formed: every piece is non-blank text of at most preprocess.max_chunk_chars characters, with no line
break, encodable as UTF-8 (it is hashed and handed to spaCy), and belongs to a document that ends.
"""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

from hypothesis import example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from mapnet_cli.data import inputs
from mapnet_cli.data import readers as R
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve

LIMIT = 1000  # the smallest preprocess.max_chunk_chars allowed: long lines are cut often
FORMATS = ["auto", "text", "wikiextractor", "wikitext", "jsonl"]
# What real corpora are made of, and what breaks readers: markers of every format, JSON right and
# wrong (a lone surrogate escape, nesting deeper than the recursion limit), tabs, quotes, NULs,
# lines longer than a piece, runs of spaces.
LINES = st.sampled_from(
    [
        "",
        " ",
        "word",
        "Two words here.",
        "\t",
        '"',
        "'",
        "\x00",
        "\u2028",
        "\x0b",
        "\x0c",
        "\x85",
        '<doc id="1" url="u" title="T">',
        "</doc>",
        " = Title = ",
        " = = Heading = = ",
        "1 @,@ 000 @-@ x",
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***",
        "*** END OF THE PROJECT GUTENBERG EBOOK X ***",
        '{"text": "a document"}',
        '{"text": ""}',
        '{"text": 1}',
        '{"other": "x"}',
        "[1, 2]",
        "{",
        "null",
        '{"text": "a \\ud800 lone surrogate"}',
        '{"text": "\\ud83d\\ude00 a pair"}',
        '{"text": "line\\nbreak\\r\\n"}',
        "[" * 3000,
        "x" * 2500,
        " " * 2500,
        ("word " * 400).strip(),
    ]
)


@st.composite
def corpus_bytes(draw) -> bytes:
    lines = draw(st.lists(LINES | st.text(max_size=30), max_size=25))
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = end.join(lines) + draw(st.sampled_from(["", end]))
    data = text.encode("utf-8")
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\x80", b"\xef\xbb\xbf"])) + data[at:]
    return data


def read_all(data: bytes, fmt: str, separator: str, name: str) -> list:
    settings = resolve(
        overrides={
            "preprocess": {
                "input_format": fmt,
                "doc_separator": separator,
                "max_chunk_chars": LIMIT,
                "strip_gutenberg": True,
            }
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        try:
            (inp,) = inputs.discover([path], settings.preprocess)
            return list(R.InputReader(inp, settings, inputs.ReadStats()))
        except MapnetError as exc:
            assert str(exc) and "\n" not in str(exc)
            return []


def check(items: list) -> None:
    open_doc = False
    for item in items:
        if item is None:
            open_doc = False
            continue
        assert isinstance(item, str) and item.strip(), repr(item[:50])
        assert len(item) <= LIMIT and "\n" not in item and "\r" not in item, repr(item[:50])
        item.encode("utf-8")  # no lone surrogates
        open_doc = True
    assert not open_doc, "every piece belongs to a document that ends"


@hsettings(max_examples=80, deadline=None)
@given(st.binary(max_size=400), st.sampled_from(FORMATS), st.sampled_from(["blank_line", "line", "file"]))
def test_property_any_bytes_are_pieces_or_one_line(data, fmt, separator):
    check(read_all(data, fmt, separator, "input.txt"))


@hsettings(max_examples=100, deadline=None)
@given(
    corpus_bytes(),
    st.sampled_from(FORMATS),
    st.sampled_from(["blank_line", "line", "file"]),
    st.sampled_from(["input.txt", "input.jsonl", "input.txt.gz", "input.jsonl.gz", "corrupt.txt.gz"]),
)
@example(b'{"text": "a \\ud800 b"}\n', "jsonl", "blank_line", "input.jsonl")
@example(b"[" * 100_000 + b"\n", "jsonl", "blank_line", "input.jsonl")
@example(b" " * 2500 + b"\n", "text", "blank_line", "input.txt")
@example(b" " * 2500 + b"\nword", "auto", "blank_line", "input.txt")  # spaces past the cut: no blank piece
def test_property_corpus_like_text_is_pieces_or_one_line(data, fmt, separator, name):
    if name.endswith(".gz") and not name.startswith("corrupt"):
        data = gzip.compress(data)
    elif name.startswith("corrupt"):
        data = gzip.compress(data)[: max(1, len(data) // 2)]  # truncated
    check(read_all(data, fmt, separator, name))
