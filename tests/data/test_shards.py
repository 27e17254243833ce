"""`mapnet shard` and ShardReader: packing, splitting, verification, random access.

Most tests build a small preprocessed folder here (docs/formats.md layout,
tokenizer trained in the test) so they do not depend on `mapnet preprocess`;
the tests marked `real_data` run the real preprocess on ../shared/data.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.data import shard_writer, synthetic
from mapnet_cli.data.shard_writer import is_valid, run_shard
from mapnet_cli.data.shards import ShardReader
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import Settings, SyntheticSettings, resolve

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, CLS, SEP = 0, 2, 3


# ---------------------------------------------------------------- fixtures: a preprocessed folder built here
def synthetic_docs(n: int, seed: int = 0) -> list[list[str]]:
    """Documents as lists of tokenised sentences, from the synthetic language."""
    docs = []
    for text in synthetic.generate_documents(SyntheticSettings(documents=n, seed=seed)):
        sentences, cur = [], []
        for tok in synthetic.tokenize(text):
            cur.append(tok)
            if tok == ".":
                sentences.append(" ".join(cur))
                cur = []
        docs.append(sentences)
    return docs


def train_tokenizer(sentences: list[str], vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always")
    tok.decoder = decoders.Metaspace(prepend_scheme="always")
    tok.train_from_iterator(
        sentences, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, show_progress=False)
    )
    return tok


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_preprocessed(
    root: Path,
    docs: list[list[str]],
    vocab_size: int = 500,
    parts: int = 2,
    word_kinds: dict | None = None,
    tokenizer=None,
) -> Path:
    (root / "sentences").mkdir(parents=True)
    per_part = -(-len(docs) // parts)
    part_entries = []
    for p in range(parts):
        chunk = docs[p * per_part : (p + 1) * per_part]
        name = f"sentences/part-{p:05d}.txt"
        (root / name).write_text("".join("\n".join(d) + "\n\n" for d in chunk), encoding="utf-8")
        part_entries.append(
            {
                "name": name,
                "documents": len(chunk),
                "sentences": sum(map(len, chunk)),
                "bytes": (root / name).stat().st_size,
                "sha256": sha(root / name),
            }
        )
    tok = tokenizer or train_tokenizer([s for d in docs for s in d], vocab_size)
    tok.save(str(root / "tokenizer.json"))
    if word_kinds is not None:
        (root / "word_kinds.json").write_text(json.dumps(word_kinds))
    manifest = {
        "schema": "mapnet.preprocess/1",
        "parts": part_entries,
        "counts": {"documents": len(docs), "sentences": sum(map(len, docs))},
        "tokenizer": {"sha256": sha(root / "tokenizer.json"), "vocab_size": tok.get_vocab_size(), "trained": True},
    }
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def settings(**shard) -> Settings:
    return resolve(None, {"shard": shard})


def expected_docs(prep: Path, docs: list[list[str]]) -> list[list[int]]:
    """Each document's ids as shard must pack them: its sentences' ids, then [SEP]."""
    tok = shard_writer.load_tokenizer(prep / "tokenizer.json")
    out = []
    for d in docs:
        ids = [i for e in tok.encode_batch(d, add_special_tokens=False) for i in e.ids]
        out.append(ids + [SEP])
    return out


def read_all(shards: Path, split: str) -> np.ndarray:
    return ShardReader(shards, split).take(np.arange(len(ShardReader(shards, split, verify="size"))))


def stream(blocks: np.ndarray) -> list[int]:
    """Corpus tokens of packed blocks, in order: [CLS] and [PAD] removed."""
    assert (blocks[:, 0] == CLS).all()
    body = blocks[:, 1:]
    nonpad = body != PAD
    # [PAD] only as a suffix of a block.
    assert (np.diff(nonpad.astype(np.int8), axis=1) <= 0).all()
    return body[nonpad].tolist()


def split_docs(tokens: list[int]) -> list[tuple[int, ...]]:
    docs, cur = [], []
    for t in tokens:
        cur.append(t)
        if t == SEP:
            docs.append(tuple(cur))
            cur = []
    assert not cur, "stream must end with a document's [SEP]"
    return docs


@pytest.fixture(scope="module")
def docs() -> list[list[str]]:
    return synthetic_docs(60)


@pytest.fixture(scope="module")
def prep(tmp_path_factory, docs) -> Path:
    return make_preprocessed(tmp_path_factory.mktemp("prep") / "p", docs, parts=3)


# ---------------------------------------------------------------- packing
@pytest.mark.parametrize("packing", ["fill", "whole_sentences"])
def test_stream_round_trips_no_token_dropped(tmp_path, prep, docs, packing):
    summary = run_shard(
        prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=0.0, packing=packing, sequences_per_file=50)
    )
    blocks = read_all(tmp_path / "s", "train")
    want = [t for d in expected_docs(prep, docs) for t in d]
    assert stream(blocks) == want
    assert summary["tokens"] == len(want)
    m = summary["manifest"]
    assert m["splits"]["train"]["documents"] == len(docs)
    assert m["splits"]["train"]["tokens"] == len(want) + len(blocks)  # + one [CLS] per block
    assert sum(f["sequences"] for f in m["files"]) == len(blocks) and len(m["files"]) == -(-len(blocks) // 50)
    nonpad = (blocks != PAD).sum(1)
    if packing == "fill":
        assert (nonpad[:-1] == 16).all()  # only the last block is padded
        assert 0 < m["splits"]["train"]["padding_fraction"] < 1 / len(blocks)


def test_whole_sentences_blocks_end_at_sentence_ends(tmp_path, prep, docs):
    run_shard(prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=0.0, packing="whole_sentences"))
    blocks = read_all(tmp_path / "s", "train")
    tok = shard_writer.load_tokenizer(prep / "tokenizer.json")
    lengths = [
        len(e.ids) + (i == len(d) - 1)
        for d in docs
        for i, e in enumerate(tok.encode_batch(d, add_special_tokens=False))
    ]
    ends, body = set(np.cumsum(lengths).tolist()), 15
    filled = np.cumsum((blocks[:, 1:] != PAD).sum(1))
    per_block = (blocks[:, 1:] != PAD).sum(1)
    # A block stops short only at a sentence end; a full block may cut a sentence only if that
    # sentence is longer than a block.
    long_spans = [(e - n, e) for e, n in zip(np.cumsum(lengths), lengths) if n > body]
    for end, n in zip(filled, per_block):
        assert end in ends or (n == body and any(a < end < b for a, b in long_spans)), (end, n)
    assert max(lengths) > body, "the corpus must contain a sentence longer than a block"
    # Padding is real here: report it against fill.
    assert (per_block < body).sum() > 1


def test_long_sentence_is_split_not_dropped(tmp_path):
    long = " ".join(["the bodan ka liple"] * 12) + " ."
    docs = [["a short one ."], [long, "a short one ."]]
    prep = make_preprocessed(tmp_path / "p", docs, vocab_size=300, parts=1)
    for packing in ("fill", "whole_sentences"):
        run_shard(prep, tmp_path / packing, settings(max_seq_len=8, valid_fraction=0.0, packing=packing))
        assert stream(read_all(tmp_path / packing, "train")) == [t for d in expected_docs(prep, docs) for t in d]


# ---------------------------------------------------------------- splits
def test_document_split_has_no_leakage(tmp_path, prep, docs):
    summary = run_shard(prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=0.2, split_seed=3))
    train = split_docs(stream(read_all(tmp_path / "s", "train")))
    valid = split_docs(stream(read_all(tmp_path / "s", "valid")))
    want = expected_docs(prep, docs)
    in_valid = is_valid(3, np.arange(len(docs)), 0.2)
    assert 0 < in_valid.sum() < len(docs)
    assert valid == [tuple(d) for d, v in zip(want, in_valid) if v]
    assert train == [tuple(d) for d, v in zip(want, in_valid) if not v]
    assert summary["manifest"]["splits"]["valid"]["documents"] == int(in_valid.sum())


def test_sequence_split(tmp_path, prep):
    run_shard(prep, tmp_path / "all", settings(max_seq_len=16, valid_fraction=0.0))
    run_shard(prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=0.3, split_unit="sequence", split_seed=1))
    everything = read_all(tmp_path / "all", "train")
    train, valid = read_all(tmp_path / "s", "train"), read_all(tmp_path / "s", "valid")
    v = is_valid(1, np.arange(len(everything)), 0.3)
    assert np.array_equal(valid, everything[v]) and np.array_equal(train, everything[~v])


def test_valid_fraction_one_makes_an_evaluation_only_set(tmp_path, prep, docs):
    # For train.extra_eval: every document held out, no training split, nothing dropped.
    run_shard(prep, tmp_path / "all", settings(max_seq_len=16, valid_fraction=0.0))
    summary = run_shard(prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=1.0))
    assert np.array_equal(read_all(tmp_path / "s", "valid"), read_all(tmp_path / "all", "train"))
    assert summary["manifest"]["splits"]["train"]["sequences"] == 0
    assert summary["manifest"]["splits"]["valid"]["documents"] == len(docs)
    with pytest.raises(MapnetError, match="all .* documents landed in validation"):
        run_shard(prep, tmp_path / "t", settings(max_seq_len=16, valid_fraction=0.999999999))


def test_split_seed_changes_assignment():
    idx = np.arange(10_000)
    a, b = is_valid(0, idx, 0.1), is_valid(1, idx, 0.1)
    assert abs(a.mean() - 0.1) < 0.015 and (a != b).any()


def test_no_document_in_validation_is_refused(tmp_path):
    prep = make_preprocessed(tmp_path / "p", synthetic_docs(1), parts=1)
    with pytest.raises(MapnetError, match='split_unit="sequence"'):
        run_shard(prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=0.01))
    assert not (tmp_path / "s").exists()


# ---------------------------------------------------------------- reader
def test_reader_random_access_agrees_with_sequential(tmp_path, prep):
    run_shard(prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=0.1, sequences_per_file=7))
    reader = ShardReader(tmp_path / "s", "train")
    rows = list(reader)
    assert len(rows) == len(reader) > 7 * 3
    assert len({f["name"] for f in reader.manifest["files"] if f["split"] == "train"}) == -(-len(reader) // 7)
    rng = np.random.default_rng(0)
    idx = rng.integers(-len(reader), len(reader), 200)
    batch = reader.take(idx)
    assert batch.shape == (200, 16) and batch.dtype == np.uint16
    for i, row in zip(idx, batch):
        assert np.array_equal(row, rows[i]) and np.array_equal(reader[int(i)], rows[i])
    assert reader.take(idx, dtype=np.int64).dtype == np.int64
    with pytest.raises(IndexError):
        reader[len(reader)]
    with pytest.raises(IndexError):
        reader.take([0, len(reader)])
    assert reader.max_seq_len == 16 and reader.special_ids == {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
    assert (
        reader.vocab_size == shard_writer.load_tokenizer(prep / "tokenizer.json").get_vocab_size()
        and reader.tokenizer_path.is_file()
        and reader.token_kinds is None
    )
    assert ShardReader(tmp_path / "s" / "manifest.json", "valid").manifest == reader.manifest
    copy = pickle.loads(pickle.dumps(reader))  # e.g. sent to a data-loader worker
    assert np.array_equal(copy.take(idx), batch)
    run = tmp_path / "run"  # a pretraining run folder records its shards in run.json
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"shards": {"path": str(tmp_path / "s")}}))
    assert len(ShardReader(run)) == len(reader)
    (run / "run.json").write_text(json.dumps({"shards": {"path": str(tmp_path / "gone")}}))
    with pytest.raises(MapnetError, match="not a finished shard folder"):
        ShardReader(run)


def test_reader_refuses_damage(tmp_path, prep):
    good = tmp_path / "good"
    run_shard(prep, good, settings(max_seq_len=16, valid_fraction=0.1, sequences_per_file=20))
    name = "train-00001.arrow"

    def damaged(how) -> Path:
        d = tmp_path / how
        shutil.copytree(good, d)
        f = d / name
        data = bytearray(f.read_bytes())
        if how == "truncated":
            f.write_bytes(data[:-100])
        elif how == "flipped":
            data[len(data) // 2] ^= 0x01
            f.write_bytes(bytes(data))
        else:
            f.unlink()
        return d

    with pytest.raises(MapnetError, match=rf"{name}.*bytes.*truncated"):
        ShardReader(damaged("truncated"))
    flipped = damaged("flipped")
    with pytest.raises(MapnetError, match=rf"{name}.*sha256"):
        ShardReader(flipped)
    assert len(ShardReader(flipped, verify="size")) == len(ShardReader(good))  # size mode trusts the disk
    missing = damaged("missing")
    with pytest.raises(MapnetError, match=rf"missing.*{name}"):
        ShardReader(missing)
    assert len(ShardReader(missing, "valid")) > 0  # the other split does not need that file
    (tmp_path / "unfinished").mkdir()
    with pytest.raises(MapnetError, match="not a finished shard folder"):
        ShardReader(tmp_path / "unfinished")
    with pytest.raises(MapnetError, match="not a shard manifest"):
        ShardReader(prep)
    no_hash = tmp_path / "no-hash"
    shutil.copytree(good, no_hash)
    manifest = json.loads((no_hash / "manifest.json").read_text())
    del manifest["tokenizer_sha256"]  # every manifest `shard` writes records it
    (no_hash / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(MapnetError) as exc:
        ShardReader(no_hash, verify="size")
    assert str(exc.value) == f"{no_hash / 'manifest.json'} lacks tokenizer_sha256"


def test_refuses_unfinished_or_edited_preprocessed(tmp_path, docs):
    (tmp_path / "empty").mkdir()
    with pytest.raises(MapnetError, match="not a finished preprocess output"):
        run_shard(tmp_path / "empty", tmp_path / "s", settings())
    prep = make_preprocessed(tmp_path / "p", docs[:10], parts=2)
    part = prep / "sentences" / "part-00001.txt"
    part.write_bytes(part.read_bytes().replace(b"the", b"thx", 1))  # same size, other content
    with pytest.raises(MapnetError, match="part-00001.txt.*sha256"):
        run_shard(prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=0.0))
    assert not (tmp_path / "s").exists() and not list(tmp_path.glob(".s.*"))  # nothing published, no staging left


def test_dtype_uint32_for_large_vocab(tmp_path):
    docs = [["the bodan ka liple ."], ["a zz69999 mo tutrol ."]]
    tok = train_tokenizer([s for d in docs for s in d], 300)
    tok.add_tokens([f"zz{i}" for i in range(70_000)])  # vocab beyond uint16
    prep = make_preprocessed(tmp_path / "p", docs, parts=1, tokenizer=tok)
    run_shard(prep, tmp_path / "s", settings(max_seq_len=16, valid_fraction=0.0))
    reader = ShardReader(tmp_path / "s")
    assert reader.manifest["dtype"] == "uint32" and reader.dtype == np.uint32 and reader.vocab_size > 65536
    assert stream(reader.take([0])) == [t for d in expected_docs(prep, docs) for t in d]
    assert max(stream(reader.take([0]))) > 65535


def test_workers_give_identical_shards(tmp_path, prep, monkeypatch):
    monkeypatch.setattr(shard_writer, "MIN_BYTES_PER_WORKER", 1)
    one = run_shard(prep, tmp_path / "one", settings(max_seq_len=16, valid_fraction=0.1, workers=1))
    two = run_shard(prep, tmp_path / "two", settings(max_seq_len=16, valid_fraction=0.1, workers=2))
    assert two["workers"] == 2
    assert [f["sha256"] for f in one["manifest"]["files"]] == [f["sha256"] for f in two["manifest"]["files"]]


# ---------------------------------------------------------------- token kinds
def test_token_kinds_on_synthetic(tmp_path):
    docs = synthetic_docs(400)
    prep = make_preprocessed(tmp_path / "p", docs, vocab_size=4096, parts=2, word_kinds=synthetic.word_kinds())
    summary = run_shard(prep, tmp_path / "s", settings(max_seq_len=64, valid_fraction=0.0))
    reader = ShardReader(tmp_path / "s")
    kinds = reader.token_kinds
    assert set(kinds) == {"determined", "long_range", "noise", "other"}
    assert summary["token_kinds"]["multi_token_words"] == 0  # 4k BPE makes every word one token
    kind_of = {int(i): k for k, ids in kinds.items() for i in ids}
    assert len(kind_of) == sum(len(v) for v in kinds.values())  # no id has two kinds
    # Every packed token's kind (from its id) agrees with the per-occurrence annotation.
    tok = shard_writer.load_tokenizer(prep / "tokenizer.json")
    got = [kind_of[t] for t in stream(read_all(tmp_path / "s", "train")) if t != SEP]
    texts = [" ".join(d) for d in docs]
    want = [k for t in texts for _, k in synthetic.annotate(t)]
    assert got == want
    assert all(len(tok.encode(w, add_special_tokens=False).ids) == 1 for w in synthetic.word_kinds())


# ---------------------------------------------------------------- CLI
def test_cli_shard(tmp_path, prep):
    runner = CliRunner()
    out = tmp_path / "s"
    args = ["shard", str(prep), "--out", str(out), "--max-seq-len", "32", "--valid-fraction", "0.1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "train" in result.output and "valid" in result.output and "padding" in result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["max_seq_len"] == 32 and (out / "settings.toml").is_file() and (out / "tokenizer.json").is_file()
    again = runner.invoke(app, args)
    assert isinstance(again.exception, MapnetError) and "--overwrite" in str(again.exception)
    assert runner.invoke(app, args + ["--overwrite", "--set", "shard.packing=whole_sentences"]).exit_code == 0
    assert json.loads((out / "manifest.json").read_text())["packing"] == "whole_sentences"
    shown = runner.invoke(
        app, ["shard", str(prep), "--out", str(out), "--print-settings", "--set", "shard.split_seed=7"]
    )
    assert "split_seed = 7" in shown.output


# ---------------------------------------------------------------- real data: `mapnet preprocess` output
@pytest.fixture(scope="module")
def real_prep(tmp_path_factory, shared_data) -> Path:
    """Alice in Wonderland + three Wikipedia articles through the real preprocess (~250 KB)."""
    import gzip
    import re

    from mapnet_cli.data.preprocess import run_preprocess

    root = tmp_path_factory.mktemp("real")
    wiki = gzip.open(
        shared_data / "wiki-articles/enwiki-2015-wikiextractor/AA_wiki_00.txt.gz", "rt", encoding="utf-8"
    ).read()
    (root / "wiki.txt").write_text("".join(re.findall(r"<doc .*?</doc>\n", wiki, flags=re.S)[:3]), encoding="utf-8")
    inputs = [shared_data / "books/carroll-alice.txt.gz", root / "wiki.txt"]
    run_preprocess(inputs, root / "prep", resolve(None, {"preprocess": {"vocab_size": 4096, "workers": 1}}))
    return root / "prep"


def part_lines(prep: Path) -> list[str]:
    manifest = json.loads((prep / "manifest.json").read_text())
    return [line for p in manifest["parts"] for line in (prep / p["name"]).read_text(encoding="utf-8").split("\n")]


def real_docs(prep: Path) -> list[list[str]]:
    docs, cur = [], []
    for line in part_lines(prep):
        if line:
            cur.append(line)
        elif cur:
            docs.append(cur)
            cur = []
    return docs


def test_real_fill_shards_round_trip(tmp_path, real_prep):
    docs = real_docs(real_prep)
    summary = run_shard(real_prep, tmp_path / "s", settings(max_seq_len=128, valid_fraction=0.0))
    reader = ShardReader(tmp_path / "s")
    assert reader.dtype == np.uint16 and reader.vocab_size == 4096
    assert summary["manifest"]["source"]["manifest_sha256"] == sha(real_prep / "manifest.json")
    blocks = reader.take(np.arange(len(reader)))
    want = [t for d in expected_docs(real_prep, docs) for t in d]
    assert stream(blocks) == want  # every token, in order: nothing dropped or duplicated
    assert summary["tokens"] == len(want)
    assert summary["manifest"]["splits"]["train"]["documents"] == len(docs)
    assert summary["manifest"]["splits"]["train"]["padding_fraction"] < 0.01
    # Sequences decode back to consecutive stretches of the tokenised sentences.
    assert_decodes_in_order(
        blocks, shard_writer.load_tokenizer(real_prep / "tokenizer.json"), [s for d in docs for s in d]
    )
    rows = list(reader)
    idx = np.random.default_rng(1).permutation(len(reader))[:64]
    assert all(np.array_equal(reader[int(i)], rows[i]) for i in idx)
    assert np.array_equal(reader.take(idx), np.stack([rows[i] for i in idx]))


def reference_whole_sentences(units: list[list[int]], body: int) -> list[list[int]]:
    """RoBERTa FULL-SENTENCES, one sentence at a time: the obviously-correct slow version."""
    blocks, cur = [], []
    for u in units:
        if cur and len(cur) + len(u) > body:
            blocks.append(cur)
            cur = []
        while len(u) > body:  # only a sentence longer than a block is cut
            blocks.append(u[:body])
            u = u[body:]
        cur = cur + u
    return blocks + ([cur] if cur else [])


def assert_decodes_in_order(blocks: np.ndarray, tok, sentences: list[str]) -> None:
    """Each sequence decodes to the next stretch of the tokenised corpus text."""
    text, pos = " ".join(sentences), 0
    for row in blocks:
        piece = tok.decode(row.tolist(), skip_special_tokens=True)
        found = text.find(piece, pos)
        assert found >= 0 and found - pos <= 1, (piece[:80], text[pos : pos + 80])
        pos = found + len(piece)
    assert pos == len(text)


def test_real_whole_sentence_sequences_are_consecutive_sentences(tmp_path, real_prep):
    docs = real_docs(real_prep)
    summary = run_shard(
        real_prep, tmp_path / "s", settings(max_seq_len=128, valid_fraction=0.0, packing="whole_sentences")
    )
    blocks = read_all(tmp_path / "s", "train")
    tok = shard_writer.load_tokenizer(real_prep / "tokenizer.json")
    units = [
        e.ids + [SEP] * (i == len(d) - 1)
        for d in docs
        for i, e in enumerate(tok.encode_batch(d, add_special_tokens=False))
    ]
    assert max(map(len, units)) > 127, "the corpus should contain a sentence longer than a block"
    want = reference_whole_sentences(units, 127)
    assert len(blocks) == len(want)
    for row, w in zip(blocks, want):
        assert row[1 : 1 + len(w)].tolist() == w and not row[1 + len(w) :].any()
    assert_decodes_in_order(blocks, tok, [s for d in docs for s in d])
    padding = summary["manifest"]["splits"]["train"]["padding_fraction"]
    print(f"whole_sentences padding at 128 tokens: {padding:.2%}")
    assert 0.01 < padding < 0.5


def test_real_document_split_and_damage(tmp_path, real_prep):
    docs = real_docs(real_prep)
    run_shard(real_prep, tmp_path / "s", settings(max_seq_len=128, valid_fraction=0.1, split_seed=2))
    want = expected_docs(real_prep, docs)
    in_valid = is_valid(2, np.arange(len(docs)), 0.1)
    for split, mask in (("train", ~in_valid), ("valid", in_valid)):
        got = split_docs(stream(read_all(tmp_path / "s", split)))
        assert got == [tuple(d) for d, m in zip(want, mask) if m]  # each document in exactly its split
    f = tmp_path / "s" / "valid-00000.arrow"
    data = bytearray(f.read_bytes())
    data[-50] ^= 0x80
    f.write_bytes(bytes(data))
    assert len(ShardReader(tmp_path / "s", "train")) > 0
    with pytest.raises(MapnetError, match="valid-00000.arrow.*sha256"):
        ShardReader(tmp_path / "s", "valid")


def test_real_synthetic_token_kinds(tmp_path):
    """`mapnet preprocess synthetic:` -> shard: token_kinds.json classifies the packed ids as generated."""
    from mapnet_cli.data.preprocess import run_preprocess

    s = resolve(None, {"preprocess": {"vocab_size": 4096, "workers": 1}, "synthetic": {"documents": 400}})
    run_preprocess(["synthetic:"], tmp_path / "prep", s)
    summary = run_shard(tmp_path / "prep", tmp_path / "s", settings(max_seq_len=128, valid_fraction=0.0))
    reader = ShardReader(tmp_path / "s")
    kind_of = {int(i): k for k, ids in reader.token_kinds.items() for i in ids}
    tok = shard_writer.load_tokenizer(reader.tokenizer_path)
    pieces = {
        w: e.ids
        for w, e in zip(
            synthetic.word_kinds(), tok.encode_batch(list(synthetic.word_kinds()), add_special_tokens=False)
        )
    }
    # A 400-document corpus leaves a few rare words in pieces; the full tiny corpus leaves none (slow test).
    assert summary["token_kinds"]["multi_token_words"] == sum(len(p) > 1 for p in pieces.values()) <= 10
    texts = list(synthetic.generate_documents(s.synthetic))
    want = [k if len(pieces[w]) == 1 else "piece" for t in texts for w, k in synthetic.annotate(t) for _ in pieces[w]]
    got = [kind_of.get(t, "?") for t in stream(reader.take(np.arange(len(reader)))) if t != SEP]
    assert len(got) == len(want)
    assert [g for g, w in zip(got, want) if w != "piece"] == [w for w in want if w != "piece"]
    assert want.count("piece") < 0.001 * len(want)


@pytest.mark.slow
def test_tiny_recipe_corpus_has_every_word_as_one_token(tmp_path):
    """The default synthetic corpus with the tiny recipe's 4096 BPE: kinds map one-to-one onto ids."""
    from mapnet_cli.data.preprocess import run_preprocess

    recipe = Path(__file__).resolve().parents[2] / "data_recipes" / "tiny.toml"
    s = resolve(recipe, {"preprocess": {"workers": 2}}, extra_sections=("recipe",))
    run_preprocess(["synthetic:"], tmp_path / "prep", s)
    summary = run_shard(tmp_path / "prep", tmp_path / "s", s)
    assert summary["token_kinds"]["multi_token_words"] == 0
    m = summary["manifest"]
    assert m["max_seq_len"] == 128 and 200 < m["splits"]["valid"]["sequences"] < 320
    print({k: v for k, v in m["splits"].items()})
