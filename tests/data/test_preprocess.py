"""`mapnet preprocess` end to end on real text: output format, counts, tokenizer, bad input, kills."""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

from mapnet_cli.atomic import sha256_file
from mapnet_cli.cli import app
from mapnet_cli.data import preprocess as pp
from mapnet_cli.data.bpe import SPECIAL_TOKENS, save_tokenizer, train_tokenizer
from mapnet_cli.errors import MapnetError

REPO = Path(__file__).resolve().parents[2]
WIKI = "wiki-articles/enwiki-2015-wikiextractor/AA_wiki_00.txt.gz"
PG_SMALL = (
    "gutenberg/potter-the-tailor-of-gloucester-pg14868.txt.gz",
    "gutenberg/carroll-feeding-the-mind-pg35535.txt.gz",
)
ALICE = "books/carroll-alice.txt.gz"
SMALL_VOCAB = "2000"


def cli(*args):
    return CliRunner().invoke(app, ["preprocess", *map(str, args)])


def assert_one_line_error(result, pattern: str):
    assert result.exit_code != 0
    assert isinstance(result.exception, MapnetError), result.output
    message = str(result.exception)
    assert "\n" not in message and re.search(pattern, message), message


def sentence_lines(out: Path) -> list[str]:
    return [ln for p in sorted((out / "sentences").glob("part-*.txt")) for ln in p.read_text().split("\n") if ln]


def no_output(out: Path) -> bool:
    """Neither the folder nor a staging folder that could be mistaken for it."""
    return not out.exists() and not list(out.parent.glob(f".{out.name}.*"))


def left_behind(out: Path) -> list[str]:
    """What an interrupted run left beside `out`, for the failure message."""
    return sorted(
        str(p.relative_to(out.parent))
        for pattern in (out.name, f".{out.name}.*")
        for root in out.parent.glob(pattern)
        for p in [root, *root.rglob("*")]
    )


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory) -> Path:
    """Wikipedia (WikiExtractor) + two real Gutenberg books + Alice, through the CLI with 2 workers."""
    out = tmp_path_factory.mktemp("pre") / "corpus"
    inputs = [shared_data / WIKI, *(shared_data / p for p in PG_SMALL), shared_data / ALICE]
    result = cli(
        *inputs,
        "--out",
        out,
        "--workers",
        "2",
        "--vocab-size",
        SMALL_VOCAB,
        "--set",
        'preprocess.doc_separator="file"',
        "--set",
        "preprocess.strip_gutenberg=true",
        "--set",
        "preprocess.sentences_per_part=2000",
    )
    assert result.exit_code == 0, result.output
    return out


# ---------------------------------------------------------------- the output
@pytest.mark.slow
def test_layout_counts_and_manifest(corpus, shared_data):
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert manifest["schema"] == "mapnet.preprocess/1"
    with gzip.open(shared_data / WIKI, "rt", encoding="utf-8") as fh:
        wiki_docs = sum(line.startswith("<doc ") for line in fh)
    docs = [i["documents"] for i in manifest["inputs"]]
    assert docs == [wiki_docs, 1, 1, 1]  # WikiExtractor: one per <doc>; books: one per file
    assert [i["format"] for i in manifest["inputs"]] == ["wikiextractor+gzip"] + ["text+gzip"] * 3
    for inp in manifest["inputs"]:
        assert inp["sha256"] == sha256_file(inp["path"]) and inp["bytes"] == os.path.getsize(inp["path"])

    counts = manifest["counts"]
    assert counts["documents"] == sum(docs) == sum(p["documents"] for p in manifest["parts"])
    assert len(manifest["parts"]) > 1  # sentences_per_part=2000 forces several parts
    sentences = empties = words = 0
    for part in manifest["parts"]:
        path = corpus / part["name"]
        data = path.read_bytes()
        assert part["bytes"] == len(data) and part["sha256"] == sha256_file(path)
        assert data.endswith(b"\n\n") and not data.startswith(b"\n")  # every part ends at a document end
        lines = data.decode("utf-8").split("\n")[:-1]
        assert sum(1 for ln in lines if not ln) == part["documents"]
        assert sum(1 for ln in lines if ln) == part["sentences"]
        assert "\n\n\n" not in data.decode("utf-8")
        sentences += part["sentences"]
        empties += part["documents"]
        words += sum(len(ln.split(" ")) for ln in lines if ln)
        assert all(ln == " ".join(ln.split()) for ln in lines)  # single spaces, nothing at the ends
    assert (counts["sentences"], counts["words"]) == (sentences, words)
    assert manifest["tokenizer"]["sha256"] == sha256_file(corpus / "tokenizer.json")
    assert manifest["tokenizer"]["trained"] is True and manifest["tokenizer"]["vocab_size"] == int(SMALL_VOCAB)
    assert set(manifest["versions"]) >= {"python", "mapnet", "spacy", "sacremoses", "tokenizers", "pyarrow"}
    settings = tomllib.loads((corpus / "settings.toml").read_text())
    assert settings["preprocess"]["strip_gutenberg"] is True and settings["preprocess"]["workers"] == 2
    assert manifest["settings"] == settings["preprocess"]


@pytest.mark.slow
def test_sentences_split_normalised_lowercased_tokenised(corpus):
    lines = sentence_lines(corpus)
    words_per_sentence = sum(len(ln.split()) for ln in lines) / len(lines)
    assert 12 <= words_per_sentence <= 35
    text = "\n".join(lines)
    assert not re.search(r"[A-Z]", text)  # lower-cased
    assert not re.search(r"[a-z][,;:?!]", text)  # Moses splits punctuation off words
    assert "alice 's adventures" in text  # ... and English clitics
    # a known passage: Alice's first two sentences end up on consecutive lines
    i = next(k for k, ln in enumerate(lines) if ln.startswith("alice was beginning to get very tired"))
    assert lines[i].endswith("without pictures or conversation ? '")
    assert lines[i + 1].startswith("so she was considering in her own mind ( as well as she could , for")
    assert lines[i + 1].endswith("a white rabbit with pink eyes ran close by her .")
    # Wikipedia: a sentence boundary inside a paragraph, abbreviations kept whole
    assert "anarchism holds the state to be undesirable , unnecessary , or harmful ." in lines


@pytest.mark.slow
def test_gutenberg_boilerplate_not_in_output(corpus):
    text = "\n".join(sentence_lines(corpus))
    assert "the tailor of gloucester" in text
    for boiler in (
        "project gutenberg license",
        "use of anyone anywhere",
        "end of this project gutenberg",
        "end of the project gutenberg",
        "start of this project gutenberg",
    ):
        assert boiler not in text


@pytest.mark.slow
def test_bpe_round_trip_and_special_ids(corpus):
    tok = Tokenizer.from_file(str(corpus / "tokenizer.json"))
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    lines = sentence_lines(corpus)
    bad = [ln for ln in lines if tok.decode(tok.encode(ln).ids) != ln]
    assert not bad, bad[:3]
    assert tok.token_to_id("[UNK]") not in {i for ln in lines[:2000] for i in tok.encode(ln).ids}


@pytest.mark.slow
def test_reuse_existing_tokenizer(corpus, shared_data, tmp_path):
    out = tmp_path / "reuse"
    result = cli(shared_data / PG_SMALL[0], "--out", out, "--workers", "1", "--tokenizer", corpus / "tokenizer.json")
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tokenizer"]["trained"] is False
    assert (
        manifest["tokenizer"]["sha256"] == sha256_file(corpus / "tokenizer.json") == sha256_file(out / "tokenizer.json")
    )


def test_tokenizer_without_a_special_token_refused(tmp_path):
    """Special-token ids are read from a reused tokenizer (a BERT's are 0, 100..103), but all five must exist."""
    lines = tmp_path / "l.txt"
    lines.write_text("a b c d e .\n" * 20)
    tok = train_tokenizer([lines], 300, 1)
    save_tokenizer(tok, tmp_path / "good.json")
    bad = json.loads((tmp_path / "good.json").read_text())
    bad["added_tokens"] = [e for e in bad["added_tokens"] if e["content"] != "[MASK]"]
    del bad["model"]["vocab"]["[MASK]"]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    (tmp_path / "in.txt").write_text("Hello there.\n")
    assert_one_line_error(
        cli(tmp_path / "in.txt", "--out", tmp_path / "o", "--tokenizer", tmp_path / "bad.json"),
        r"lacks the special token\(s\) \[MASK\]",
    )
    assert_one_line_error(
        cli(tmp_path / "in.txt", "--out", tmp_path / "o", "--tokenizer", tmp_path / "nope.json"), "tokenizer not found"
    )
    assert no_output(tmp_path / "o")


@pytest.mark.slow
def test_no_lowercase_and_synthetic(shared_data, tmp_path):
    out = tmp_path / "cased"
    result = cli(
        shared_data / PG_SMALL[0],
        "synthetic:",
        "--out",
        out,
        "--workers",
        "1",
        "--no-lowercase",
        "--vocab-size",
        "1000",
        "--set",
        "synthetic.documents=40",
    )
    assert result.exit_code == 0, result.output
    text = "\n".join(sentence_lines(out))
    assert "Tailor" in text and "Gloucester" in text
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["lowercase"] is False
    assert manifest["inputs"][1]["path"] == "synthetic:" and manifest["inputs"][1]["documents"] == 40
    assert manifest["word_kinds"] == "word_kinds.json"
    kinds = json.loads((out / "word_kinds.json").read_text())
    assert kinds and set(kinds.values()) <= {"determined", "long_range", "noise", "other"}


def test_print_settings_shows_flags_and_recipe(tmp_path):
    result = cli(
        "--print-settings", "--vocab-size", "1234", "--no-lowercase", "--recipe", REPO / "data_recipes" / "paper.toml"
    )
    assert result.exit_code == 0, result.output
    pre = tomllib.loads(result.output)["preprocess"]
    assert pre["vocab_size"] == 1234 and pre["lowercase"] is False and pre["strip_gutenberg"] is True
    result = cli("--print-settings")
    assert tomllib.loads(result.output)["preprocess"]["lowercase"] is True  # unset flags do not override


# ---------------------------------------------------------------- bad input through the CLI
def test_missing_input_and_missing_out(tmp_path):
    assert_one_line_error(cli(tmp_path / "nope.txt", "--out", tmp_path / "o"), "input not found")
    assert_one_line_error(cli(tmp_path / "nope.txt"), "missing --out")
    assert no_output(tmp_path / "o")


@pytest.mark.slow
def test_output_exists_needs_overwrite_which_replaces_only_a_corpus_and_nothing_added_to_it(tmp_path):
    (tmp_path / "in.txt").write_text("Hello there. How are you?\n")
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep").write_text("x")
    assert_one_line_error(cli(tmp_path / "in.txt", "--out", out, "--workers", "1"), "already exists.*--overwrite")
    assert_one_line_error(
        cli(tmp_path / "in.txt", "--out", out, "--workers", "1", "--overwrite"),
        "is not a preprocessed corpus made by mapnet .it holds keep.",
    )
    assert (out / "keep").read_text() == "x"
    (out / "keep").unlink()  # an empty folder: nothing to lose
    assert cli(tmp_path / "in.txt", "--out", out, "--workers", "1", "--overwrite", "--vocab-size", "256").exit_code == 0
    (tmp_path / "in.txt").write_text("Good bye. See you!\n")
    (out / "keep").write_text("x")  # the user's file inside the corpus: named, not deleted
    assert_one_line_error(
        cli(tmp_path / "in.txt", "--out", out, "--workers", "1", "--overwrite"),
        "holds what mapnet did not write there .keep.",
    )
    (out / "keep").unlink()
    result = cli(tmp_path / "in.txt", "--out", out, "--workers", "1", "--overwrite", "--vocab-size", "256")
    assert result.exit_code == 0, result.output
    assert (out / "manifest.json").exists()
    assert sentence_lines(out) == ["good bye .", "see you !"]


def test_binary_named_is_an_error(tmp_path):
    (tmp_path / "blob.dat").write_bytes(bytes(range(256)) * 64)
    assert_one_line_error(cli(tmp_path / "blob.dat", "--out", tmp_path / "o"), "looks binary.*on_binary")
    assert no_output(tmp_path / "o")


def test_only_binary_files_in_folder_is_an_empty_corpus(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.bin").write_bytes(b"\0" * 100)
    (tmp_path / "d" / "b.txt").write_text("   \n\n")
    assert_one_line_error(
        cli(tmp_path / "d", "--out", tmp_path / "o", "--workers", "1"), r"no sentences found .*1 skipped as binary"
    )
    assert no_output(tmp_path / "o")


def test_empty_inputs(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    assert_one_line_error(cli(tmp_path / "empty.txt", "--out", tmp_path / "o", "--workers", "1"), "no sentences found")
    (tmp_path / "d").mkdir()
    assert_one_line_error(cli(tmp_path / "d", "--out", tmp_path / "o"), "no input files found")
    assert no_output(tmp_path / "o")


def test_corrupt_gzip_names_the_file(shared_data, tmp_path):
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes((shared_data / ALICE).read_bytes()[:20_000])  # a truncated download
    assert_one_line_error(
        cli(bad, "--out", tmp_path / "o", "--workers", "1"), re.escape(str(bad)) + ".*corrupt or truncated gzip"
    )
    assert no_output(tmp_path / "o")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_input(tmp_path):
    f = tmp_path / "secret.txt"
    f.write_text("Hidden.\n")
    f.chmod(0)
    assert_one_line_error(cli(f, "--out", tmp_path / "o"), "permission denied")


def test_permission_error_while_opening_is_one_line(tmp_path, monkeypatch):
    import builtins

    f = tmp_path / "secret.txt"
    f.write_text("Hidden.\n")
    real_open = builtins.open

    def deny(path, *args, **kw):  # what a non-root user sees for a mode-000 file (root ignores modes)
        if str(path) == str(f):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kw)

    monkeypatch.setattr(builtins, "open", deny)
    assert_one_line_error(
        cli(f, "--out", tmp_path / "o", "--workers", "1"), "cannot read input .*secret.txt: permission denied"
    )
    assert no_output(tmp_path / "o")


@pytest.mark.slow
def test_invalid_utf8_counted_and_long_line_cut(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("Un caf\xe9 cr\xe8me. C'est tr\xe8s bon.\n".encode("latin-1"))
    (tmp_path / "one_line.txt").write_text("This is a sentence that goes on and on " * 30000)  # 1.2 MB, no newline
    out = tmp_path / "o"
    result = cli(
        tmp_path / "latin1.txt", tmp_path / "one_line.txt", "--out", out, "--workers", "1", "--vocab-size", "300"
    )
    assert result.exit_code == 0, result.output
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["invalid_utf8_replaced"] == 3
    assert counts["chunks_cut"] >= 11 and counts["sentences_cut"] >= 200  # pieces <= 100k chars, sentences <= 5k
    assert counts["documents"] == 2
    assert max(len(ln) for ln in sentence_lines(out)) <= 5000 + 100


def test_worker_exceptions_become_one_line_errors(tmp_path, monkeypatch):
    failed = Future()
    failed.set_exception(ValueError("boom\nsecond line"))
    with pytest.raises(MapnetError, match="worker failed: ValueError: boom second line"):
        pp._result(pp._Batch(), failed)
    broken = Future()
    broken.set_exception(BrokenProcessPool("gone"))
    with pytest.raises(MapnetError, match="worker process died"):
        pp._result(pp._Batch(), broken)

    def explode(self, pieces):
        raise RuntimeError("spaCy fell over")

    monkeypatch.setattr(pp.TextProcessor, "process", explode)
    (tmp_path / "in.txt").write_text("Hello.\n")
    assert_one_line_error(
        cli(tmp_path / "in.txt", "--out", tmp_path / "o", "--workers", "1"),
        "preprocessing failed: RuntimeError: spaCy fell over",
    )
    assert no_output(tmp_path / "o")


# ---------------------------------------------------------------- the real command: exit codes, kill, Ctrl-C
def run_mapnet(*args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "mapnet_cli.cli", "preprocess", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        **kw,
    )


def test_cli_error_is_one_red_line_exit_2(tmp_path):
    proc = run_mapnet(tmp_path / "missing", "--out", tmp_path / "o")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "error: input not found" in proc.stderr


def sigint_as_in_a_terminal() -> None:
    # A shell starts background jobs (`cmd &`, nohup) with SIGINT ignored, and an ignored signal stays
    # ignored across exec: under a test suite started that way the command would never see the Ctrl-C
    # and would run to completion. A command started from a terminal has the default disposition.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_and_wait_for_parts(out: Path, inputs: list[Path]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mapnet_cli.cli", "preprocess", *map(str, inputs), "--out", str(out), "--workers", "2"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # own process group: the kill reaches its workers too
        preexec_fn=sigint_as_in_a_terminal,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        parts = list(out.parent.glob(f".{out.name}.*/sentences/part-*.txt"))
        if parts and parts[0].stat().st_size > 0:  # sentences are being written: mid-run
            return proc
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("preprocess wrote no sentences within 90 s")


@pytest.mark.slow
def test_sigkill_leaves_nothing_complete_and_rerun_works(shared_data, tmp_path):
    out = tmp_path / "killed"
    proc = start_and_wait_for_parts(out, sorted((shared_data / "gutenberg").glob("*.txt.gz"))[:40])
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not out.exists()
    stale = list(tmp_path.glob(".killed.*"))
    assert stale and not any((s / "manifest.json").exists() for s in stale)
    rerun = run_mapnet(shared_data / PG_SMALL[0], "--out", out, "--workers", "1", "--vocab-size", "500")
    assert rerun.returncode == 0, rerun.stderr
    assert (out / "manifest.json").exists() and not list(tmp_path.glob(".killed.*"))


@pytest.mark.slow
def test_ctrl_c_cleans_up(shared_data, tmp_path):
    out = tmp_path / "interrupted"
    proc = start_and_wait_for_parts(out, sorted((shared_data / "gutenberg").glob("*.txt.gz"))[:40])
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err.decode()
    assert no_output(out), (proc.returncode, left_behind(out), err.decode()[-500:])  # nothing staged or published
    assert proc.returncode == 130, err
