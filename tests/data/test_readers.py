"""Readers: formats, document boundaries, Gutenberg stripping, bad input, bounded memory."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import re
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from mapnet_cli.data import inputs
from mapnet_cli.data import readers as R
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve

WIKI = "wiki-articles/enwiki-2015-wikiextractor"


def settings(**pre):
    return resolve(overrides={"preprocess": pre})


def read(path, **pre) -> tuple[list, inputs.ReadStats, R.InputReader]:
    s = settings(**pre)
    stats = inputs.ReadStats()
    (inp,) = inputs.discover([path], s.preprocess)
    reader = R.InputReader(inp, s, stats)
    return list(reader), stats, reader


def documents(items: list) -> list[list[str]]:
    docs, cur = [], []
    for item in items:
        if item is None:
            docs.append(cur)
            cur = []
        else:
            cur.append(item)
    assert not cur, "every piece belongs to a document that ends"
    return docs


# ---------------------------------------------------------------- real data
def test_wikiextractor_one_document_per_doc_element(shared_data):
    path = shared_data / WIKI / "AA_wiki_00.txt.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        text = fh.read()
    items, _, reader = read(path)
    docs = documents(items)
    assert reader.format == "wikiextractor"
    assert len(docs) == text.count("<doc ") == 38
    # the title line repeats the title attribute and is dropped; the article text stays
    assert docs[0][0].startswith("Anarchism is a political philosophy")
    assert not any(p.startswith("<doc") or p == "</doc>" for d in docs for p in d)


def test_gutenberg_header_and_footer_stripped(shared_data):
    path = shared_data / "gutenberg" / "joyce-dubliners-pg2814.txt.gz"
    raw, _, _ = read(path, doc_separator="file")
    stripped, _, _ = read(path, doc_separator="file", strip_gutenberg=True)
    raw_text, text = " ".join(p for p in raw if p), " ".join(p for p in stripped if p)
    assert "*** START OF THIS PROJECT GUTENBERG" in raw_text and "*** START OF" not in text
    assert "This eBook is for the use of anyone anywhere" in raw_text and "use of anyone anywhere" not in text
    assert "END OF THIS PROJECT GUTENBERG" in raw_text and "END OF THIS PROJECT GUTENBERG" not in text
    assert "Project Gutenberg-tm" in raw_text and "Project Gutenberg-tm" not in text  # the licence footer
    assert "THE SISTERS" in text and "There was no hope for him this time" in text  # the book itself stays
    assert len(documents(stripped)) == 1


def test_gutenberg_old_small_print_header(shared_data):
    path = shared_data / "gutenberg" / "darwin-coral-reefs-pg2690.txt.gz"
    items, _, _ = read(path, doc_separator="file", strip_gutenberg=True)
    text = " ".join(p for p in items if p)
    assert "SMALL PRINT" not in text and "End of The Project Gutenburg Etext" not in text
    assert "coral" in text.lower()


def test_text_without_markers_unchanged_by_gutenberg_stripping(shared_data):
    path = shared_data / "books" / "carroll-alice.txt.gz"  # NLTK removed the header already
    plain, _, _ = read(path, doc_separator="file")
    stripped, _, _ = read(path, doc_separator="file", strip_gutenberg=True)
    assert plain == stripped


# ---------------------------------------------------------------- separators and formats
def test_doc_separators(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("One two.\nthree four.\n\n\nFive six.\n\nSeven.\n")
    docs = documents(read(f, doc_separator="blank_line")[0])
    assert docs == [["One two. three four."], ["Five six."], ["Seven."]]  # soft wraps joined
    assert documents(read(f, doc_separator="line")[0]) == [["One two."], ["three four."], ["Five six."], ["Seven."]]
    assert documents(read(f, doc_separator="file")[0]) == [["One two. three four.", "Five six.", "Seven."]]


def test_wikitext_articles_and_headings(tmp_path):
    f = tmp_path / "wiki.train.raw"
    f.write_text(
        " \n = Alpha = \n \n Alpha is 1 @,@ 000 years old . \n \n = = History = = \n \n"
        " It grew . \n = Beta = \n \n Beta is a well @-@ known letter . \n"
    )
    items, _, reader = read(f)
    assert reader.format == "wikitext"  # sniffed from the " = Title = " line
    assert documents(items) == [["Alpha is 1,000 years old .", "It grew ."], ["Beta is a well-known letter ."]]


@pytest.mark.parametrize("suffix,opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_compressed_equals_plain(tmp_path, suffix, opener):
    text = "First doc here.\n\nSecond doc, with two lines\nof text.\n"
    (tmp_path / "p.txt").write_text(text)
    with opener(tmp_path / f"c.txt{suffix}", "wt", encoding="utf-8") as fh:
        fh.write(text)
    assert read(tmp_path / f"c.txt{suffix}")[0] == read(tmp_path / "p.txt")[0]


def test_jsonl_parquet_arrow(tmp_path):
    texts = ["Doc one.\n\nIts second paragraph.", "Doc two.", ""]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps({"id": i, "body": t}) + "\n" for i, t in enumerate(texts)))
    table = pa.table({"id": [0, 1, 2], "body": texts})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=1)
    feather.write_feather(table, tmp_path / "a.arrow")
    with pa.OSFile(str(tmp_path / "s.ipc"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    expected = [["Doc one.", "Its second paragraph."], ["Doc two."]]
    for name in ("a.jsonl", "a.parquet", "a.arrow", "s.ipc"):
        items, _, reader = read(tmp_path / name, text_field="body")
        assert documents(items) == expected, name
    with pytest.raises(MapnetError, match="no column 'text'.*id, body"):
        read(tmp_path / "a.parquet")
    with pytest.raises(MapnetError, match=r"a.jsonl:1: no 'text' field"):
        read(tmp_path / "a.jsonl")


def test_discover_walks_sorted_skips_hidden_and_excluded(tmp_path):
    for rel in ("b/2.txt", "b/1.txt", "a.txt", ".hidden.txt", ".git/x.txt", "README.md", "c/MANIFEST.tsv"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x.\n")
    found = inputs.discover([tmp_path], settings(exclude=("README*", "MANIFEST*")).preprocess)
    assert [Path(f.path).relative_to(tmp_path).as_posix() for f in found] == ["a.txt", "b/1.txt", "b/2.txt"]
    assert not any(f.explicit for f in found)


# ---------------------------------------------------------------- bad input
def test_missing_input(tmp_path):
    with pytest.raises(MapnetError, match="input not found"):
        inputs.discover([tmp_path / "nope.txt"], settings().preprocess)


def test_binary_named_errors_found_in_folder_skips(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "img.bin").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" * 10)
    (tmp_path / "d" / "ok.txt").write_text("Fine text.\n")
    with pytest.raises(MapnetError, match="looks binary"):
        read(tmp_path / "d" / "img.bin")
    items, stats, reader = read(tmp_path / "d" / "img.bin", on_binary="skip")
    assert items == [] and reader.skipped and stats.skipped_binary == [str(tmp_path / "d" / "img.bin")]
    s = settings()
    stats = inputs.ReadStats()
    out = [x for inp in inputs.discover([tmp_path / "d"], s.preprocess) for x in R.InputReader(inp, s, stats)]
    assert out == ["Fine text.", None] and len(stats.skipped_binary) == 1


def test_invalid_utf8_replaced_and_counted(tmp_path):
    f = tmp_path / "latin1.txt"
    f.write_bytes("Caf\xe9 na\xefve.\n".encode("latin-1"))
    before = inputs.invalid_utf8_count()
    items, _, _ = read(f)
    assert items == ["Caf\ufffd na\ufffdve.", None]
    assert inputs.invalid_utf8_count() - before == 2


@pytest.mark.parametrize("suffix,opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open)])
def test_corrupt_compressed_names_file(tmp_path, suffix, opener):
    good = tmp_path / f"good.txt{suffix}"
    with opener(good, "wt", encoding="utf-8") as fh:
        fh.write("Some words here. " * 20000)
    data = good.read_bytes()
    truncated = tmp_path / f"truncated.txt{suffix}"
    truncated.write_bytes(data[: len(data) // 2])
    garbage = tmp_path / f"garbage.txt{suffix}"
    garbage.write_bytes(b"this is not compressed at all" * 10)
    for bad in (truncated, garbage):
        with pytest.raises(MapnetError, match=re.escape(str(bad)) + ".*corrupt or truncated") as err:
            read(bad)
        assert "\n" not in str(err.value)


def test_huge_single_line_streams_in_bounded_memory(tmp_path):
    f = tmp_path / "line.txt"
    word = "abcdefghi "
    with open(f, "w") as fh:
        for _ in range(50):
            fh.write(word * 100_000)  # 50 MB, no newline anywhere
    tracemalloc.start()
    stats = inputs.ReadStats()
    s = settings(doc_separator="file")
    (inp,) = inputs.discover([f], s.preprocess)
    pieces = docs = 0
    for item in R.InputReader(inp, s, stats):
        if item is None:
            docs += 1
        else:
            pieces += 1
            assert len(item) <= s.preprocess.max_chunk_chars
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert docs == 1 and pieces >= 500 and stats.chunks_cut == pieces - 1
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB while streaming a 50 MB line"
