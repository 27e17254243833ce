"""`mapnet inspect-masks` on a tiny saved model: text, --json schema, stdin, and a uniform checkpoint."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from typer.testing import CliRunner

from mapnet_cli import settings as settings_mod
from mapnet_cli.cli import app, main
from mapnet_cli.data.bpe import save_tokenizer, train_tokenizer
from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.inspect_masks import SCHEMA, inspect_masks, words_of
from mapnet_cli.masking.mapnet import ProposalConfig, ProposalNetwork
from mapnet_cli.model import checkpoint
from mapnet_cli.model.bert import BertConfig, BertForMLM

CORPUS = ["the computer computes a computation .", "a cat sat on the mat .", "the dog ate the computer ."] * 30
TEXT = "The computer computes a computation. A cat sat on the mat!"


def make_run(tmp_path):
    """A one-step MAP-Net checkpoint with a clearly non-uniform proposal, on a tiny BPE tokenizer."""
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    tok = train_tokenizer([text], vocab_size=300, min_frequency=1)
    tok_path = tmp_path / "tokenizer.json"
    save_tokenizer(tok, tok_path)
    settings = settings_mod.resolve(
        assignments=[
            "model.layers=1",
            "model.hidden=32",
            "model.heads=2",
            "model.max_position=64",
            "shard.max_seq_len=64",
            "masking.strategy=mapnet",
        ]
    )
    torch.manual_seed(0)
    cfg = BertConfig.from_settings(settings.model, tok.get_vocab_size(), 0)
    model = BertForMLM(cfg)
    pcfg = ProposalConfig.from_settings(settings.model, settings.masking)
    proposal = ProposalNetwork(pcfg, model.encoder.tok_embeddings)
    with torch.no_grad():
        proposal.score.weight.normal_(std=2.0)  # a clearly non-uniform proposal
    modules, extra = {"": model, "mapnet": proposal}, {"mapnet": pcfg.to_dict()}
    run = tmp_path / "run"
    checkpoint.save_checkpoint(
        run, 7, modules, {"data_position": 0}, cfg, settings.to_toml(), tok_path, "0" * 64, extra
    )
    return run


@pytest.fixture(scope="module")
def mapnet_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("mapnet"))


def test_json_schema_on_text(mapnet_run):
    result = CliRunner().invoke(
        app, ["inspect-masks", str(mapnet_run), "--text", TEXT, "--json", "--samples", "50", "--min-count", "1"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == SCHEMA and data["source"] == "text" and data["step"] == 7
    assert data["checkpoint"].endswith("step-00000007")
    assert len(data["sequences"]) == 2  # two sentences
    for seq in data["sequences"]:
        assert seq["tokens"][0] == "[CLS]" and seq["tokens"][-1] == "[SEP]"
        assert len(seq["tokens"]) == len(seq["ids"]) == len(seq["probabilities"])
        assert seq["probabilities"][0] is None and seq["probabilities"][-1] is None
        probs = [p for p in seq["probabilities"] if p is not None]
        assert len(probs) == seq["eligible"] and abs(sum(probs) - 1) < 1e-6
        assert len(seq["masked"]) == len(set(seq["masked"])) == seq["k"] >= 1
        assert all(seq["probabilities"][j] is not None for j in seq["masked"])
        assert 0 < seq["entropy"] <= 1
    # Lower-cased and Moses-tokenised like preprocess: "computation." becomes "computation" + "."
    first = "".join(data["sequences"][0]["tokens"][1:-1]).replace("\u2581", " ").split()
    assert first == ["the", "computer", "computes", "a", "computation", "."]
    words = {w["word"]: w for w in data["most"] + data["least"]}
    assert words and all({"word", "occurrences", "mask_rate", "relative"} <= set(w) for w in words.values())
    assert data["most"][0]["relative"] >= data["least"][0]["relative"]


def test_same_seed_same_masks_and_rich_view(mapnet_run):
    a = inspect_masks(mapnet_run, text=TEXT, seed=3, samples=20)
    b = inspect_masks(mapnet_run, text=TEXT, seed=3, samples=20)
    assert [s.masked for s in a.sequences] == [s.masked for s in b.sequences]
    result = CliRunner().invoke(
        app, ["inspect-masks", str(mapnet_run), "--text", TEXT, "--samples", "20", "--min-count", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "proposal p x n" in result.stdout and "masked" in result.stdout and "vs uniform" in result.stdout


def test_stdin_and_file(mapnet_run, tmp_path):
    piped = CliRunner().invoke(app, ["inspect-masks", str(mapnet_run), "--json", "--samples", "5"], input=TEXT)
    assert piped.exit_code == 0, piped.output
    assert json.loads(piped.stdout)["source"] == "stdin"
    f = tmp_path / "in.txt"
    f.write_text(TEXT, encoding="utf-8")
    from_file = CliRunner().invoke(app, ["inspect-masks", str(mapnet_run), "--file", str(f), "--json", "-n", "1"])
    assert from_file.exit_code == 0 and len(json.loads(from_file.stdout)["sequences"]) == 1


def test_a_file_is_read_as_preprocess_reads_it_gz_binary_and_a_megabyte_line(mapnet_run, tmp_path):
    """--file went through read_text: a .gz file was read as its compressed bytes, a binary file as text, and a
    1.2 MB one-line file was one spaCy doc over its max_length (E088). Now preprocess's reader reads it."""
    import gzip

    def masks(*args: str):
        return CliRunner().invoke(app, ["inspect-masks", str(mapnet_run), *args, "--json", "-n", "2", "--samples", "5"])

    plain, packed = tmp_path / "in.txt", tmp_path / "in.txt.gz"
    plain.write_text(TEXT + "\n", encoding="utf-8")
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    want, got = masks("--file", str(plain)), masks("--file", str(packed))
    assert want.exit_code == 0 and got.exit_code == 0, (want.output, got.output)
    assert json.loads(got.stdout)["sequences"] == json.loads(want.stdout)["sequences"]

    long = tmp_path / "long.txt"
    long.write_text((TEXT + " ") * 21_000, encoding="utf-8")  # one line, 1.2 MB
    assert long.stat().st_size > 1_200_000
    done = masks("--file", str(long))
    assert done.exit_code == 0, done.output
    assert [s["tokens"] for s in json.loads(done.stdout)["sequences"]] == [
        s["tokens"] for s in json.loads(want.stdout)["sequences"]
    ]
    piped = CliRunner().invoke(
        app, ["inspect-masks", str(mapnet_run), "--json", "-n", "2", "--samples", "5"], input=long.read_text()
    )
    assert piped.exit_code == 0, piped.output  # stdin is cut the same way

    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\x01\x02 weights " * 100)
    not_gzip = tmp_path / "x.txt.gz"
    not_gzip.write_text("not compressed\n")
    for path, message in (
        (binary, f"--file {binary} looks binary (NUL bytes"),
        (packed.with_name("b.txt.gz"), "looks binary"),
        (not_gzip, f"{not_gzip}: corrupt or truncated gzip data"),
        (tmp_path, f"--file {tmp_path} is a folder"),
        (tmp_path / "nope.txt", "no such file"),
    ):
        if path.name == "b.txt.gz":
            path.write_bytes(gzip.compress(binary.read_bytes()))
        res = masks("--file", str(path))
        assert isinstance(res.exception, MapnetError), (path, res.output)
        assert message in str(res.exception) and "\n" not in str(res.exception), str(res.exception)


def test_uniform_checkpoint_is_refused_in_one_line(trained_runs, monkeypatch, capsys):
    run = trained_runs["uniform"]  # a real run trained with uniform masking: no MAP-Net to inspect
    # Through the console-script entry point: it is main() that formats errors as one line.
    monkeypatch.setattr(sys, "argv", ["mapnet", "inspect-masks", str(run), "--text", TEXT])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code != 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no proposal network" in lines[0], lines


def test_words_of_groups_bpe_pieces():
    assert words_of(["[CLS]", "\u2581comp", "uter", "\u2581is", "[SEP]"]) == [0, 1, 1, 2, 3]


def test_word_tables_rank_only_word_types_seen_min_count_times_and_say_how_many_were_left_out(mapnet_run):
    text = "the cat sat on the mat . " * 3 + "a dog ran . the end ."  # "the" x5, cat/sat/on/mat x3, "." x5, rest x1
    result = inspect_masks(mapnet_run, text=text, samples=20, sentences=10, min_count=3)
    ranked = {w.word for w in result.most + result.least}
    assert ranked and ranked <= {"the", "cat", "sat", "on", "mat", "."}  # words, not BPE pieces, are counted
    assert result.min_count == 3 and result.left_out == 4  # a, dog, ran, end
    assert inspect_masks(mapnet_run, text=text, samples=20, sentences=10, min_count=1).left_out == 0
    shown = CliRunner().invoke(
        app,
        ["inspect-masks", str(mapnet_run), "--text", text, "--samples", "20", "--sentences", "10", "--min-count", "3"],
    )
    assert shown.exit_code == 0, shown.output
    assert "4 word types seen fewer than 3 times are left out" in " ".join(shown.output.split())
    bad = CliRunner().invoke(app, ["inspect-masks", str(mapnet_run), "--text", text, "--min-count", "0"])
    assert isinstance(bad.exception, MapnetError) and "--min-count" in str(bad.exception)


def test_words_of_groups_wordpiece_pieces_and_keeps_specials_apart():
    # WordPiece: "##" continues a word; every other piece starts one; a special token is its own word
    tokens = ["[CLS]", "comp", "##uter", "##s", "are", "fast", "[SEP]", "##x"]
    assert words_of(tokens, "##") == [0, 1, 1, 1, 2, 3, 4, 5]
    # read as BPE the same pieces would be one word after [CLS]: the prefix matters
    assert words_of(tokens) != words_of(tokens, "##")


def test_continuation_prefix_reads_the_tokenizer_model():
    from tokenizers import Tokenizer, models

    from mapnet_cli.evaluation.inspect_masks import continuation_prefix

    wp = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    bpe = Tokenizer(models.BPE({"[UNK]": 0, "a": 1}, [], unk_token="[UNK]"))
    assert continuation_prefix(wp) == "##"
    assert continuation_prefix(bpe) is None


@pytest.fixture(scope="module")
def adaptive_run(tmp_path_factory):
    """A real adaptive run on split-vocabulary tiny shards: theme tokens (ids 5-33) become predictable, noise
    tokens (34-63) never do (tests/masking/test_adaptive.py measures the table this run learns)."""
    from tiny_shards import write_tiny_shards

    from mapnet_cli.settings import resolve
    from mapnet_cli.train import pretrain

    root = tmp_path_factory.mktemp("adaptive")
    shards = write_tiny_shards(root / "shards", train=128, valid=8, seq_len=64, split_vocab=True, bpe=True)
    s = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [
            "train.recipe=paper",
            "model.max_position=64",
            "shard.max_seq_len=64",
            "train.batch_size=16",
            "train.steps=40",
            "train.eval_every=0",
            "train.eval_sequences=8",
            "train.checkpoint_every=0",
            "optim.warmup.steps=3",
            "optim.lr=3e-3",
            "logging.progress=false",
            "masking.strategy=adaptive",
            "masking.adaptive.every=5",
            "masking.adaptive.weights=ht",
            "masking.adaptive.mix_uniform=0.5",
        ],
    )
    return pretrain(s, shards, root / "run")


def test_an_adaptive_run_shows_the_tokens_its_table_masks_more_and_less(adaptive_run):
    from safetensors.torch import load_file

    result = inspect_masks(adaptive_run, sentences=4, samples=50, min_count=20)
    assert result.strategy == "adaptive" and result.updates == 8 and result.step == 40 and result.source == "valid"
    table = load_file(str(adaptive_run / "model.safetensors"))["adaptive.table"] / 0.15
    most, least = result.tokens_most, result.tokens_least
    assert len(most) == len(least) == 10 and not {t.id for t in most} & {t.id for t in least}
    for t in most + least:
        assert t.relative == pytest.approx(float(table[t.id])) and t.observed >= 20 and t.token == f"w{t.id}"
    assert [t.relative for t in most] == sorted((t.relative for t in most), reverse=True)
    assert [t.relative for t in least] == sorted(t.relative for t in least)
    # The table stops masking the themes the encoder has learned; what it masks most stays at the base rate
    # (the noise, which no model predicts, and themes not learned yet: measured 3 of the 10).
    assert all(t.relative > 0.9 for t in most) and sum(t.id >= 34 for t in most) >= 5
    assert all(t.id < 34 and t.relative < 0.5 for t in least)
    for view in result.sequences:  # masks drawn as training draws them: exactly K, eligible positions only
        probs = [p for p in view.probabilities if p is not None]
        assert abs(sum(probs) - 1) < 1e-9 and len(view.masked) == len(set(view.masked)) == view.k
        assert all(view.probabilities[j] is not None for j in view.masked)
        theme = max(set(view.ids[1:-1]), key=view.ids.count)
        noise = [p for tok, p in zip(view.ids, view.probabilities) if p is not None and tok != theme]
        themed = [p for tok, p in zip(view.ids, view.probabilities) if p is not None and tok == theme]
        if theme < 34 and noise:
            assert min(noise) > max(themed)  # within a row too, the unpredictable positions are drawn more
    shown = CliRunner().invoke(app, ["inspect-masks", str(adaptive_run), "--samples", "20", "--min-count", "20"])
    assert shown.exit_code == 0, shown.output
    assert "adaptive table after 8 updates" in shown.output and "tokens the adaptive table masks least" in shown.output
    data = json.loads(CliRunner().invoke(app, ["inspect-masks", str(adaptive_run), "--samples", "20", "--json"]).stdout)
    assert data["strategy"] == "adaptive" and data["tokens_least"][0]["relative"] < 0.5


@pytest.mark.parametrize("vocab_size, bpe", [(200, True), (64, False)])
def test_shards_of_another_tokenizer_are_refused_before_any_id_reaches_the_model(
    adaptive_run, tmp_path, vocab_size, bpe
):
    """`--shards` of another tokenizer: ids past the embedding table were torch's IndexError; ids within it (a
    tokenizer of the same size) would have been read as other words, without a word."""
    from tiny_shards import write_tiny_shards

    other = write_tiny_shards(tmp_path / "other", train=8, valid=8, seq_len=64, vocab_size=vocab_size, bpe=bpe, seed=1)
    result = CliRunner().invoke(app, ["inspect-masks", str(adaptive_run), "--shards", str(other)])
    assert isinstance(result.exception, MapnetError), result.output
    assert str(result.exception).startswith(
        f"shards {other} were encoded with another tokenizer ({vocab_size} tokens, {other / 'tokenizer.json'}) than "
        f"{adaptive_run} was trained with (64 embedding rows, its tokenizer.json): their ids would mean other words"
    )
    # The run's own shards are read as before.
    own = adaptive_run.parents[2] / "shards"  # the checkpoint is RUN/checkpoints/step-N, beside RUN: shards
    assert inspect_masks(adaptive_run, shards=own, samples=5).source == "valid"


def test_a_negative_seed_is_refused_as_every_seed_is(mapnet_run):
    with pytest.raises(MapnetError, match=r"--seed must be >= 0 \(got -1\)"):
        inspect_masks(mapnet_run, text=TEXT, seed=-1)
