"""`mapnet inspect-masks` on a tiny saved model: text, --json schema, stdin, and a uniform checkpoint."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from typer.testing import CliRunner

from mapnet_cli.model import checkpoint
from mapnet_cli import settings as settings_mod
from mapnet_cli.cli import app, main
from mapnet_cli.errors import MapnetError
from mapnet_cli.data.bpe import save_tokenizer, train_tokenizer
from mapnet_cli.evaluation.inspect_masks import SCHEMA, inspect_masks, words_of
from mapnet_cli.masking.mapnet import ProposalConfig, ProposalNetwork
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
    settings = settings_mod.resolve(assignments=[
        "model.layers=1", "model.hidden=32", "model.heads=2", "model.max_position=64", "shard.max_seq_len=64",
        "masking.strategy=mapnet"])
    torch.manual_seed(0)
    cfg = BertConfig.from_settings(settings.model, tok.get_vocab_size(), 0)
    model = BertForMLM(cfg)
    pcfg = ProposalConfig.from_settings(settings.model, settings.masking)
    proposal = ProposalNetwork(pcfg, model.encoder.tok_embeddings)
    with torch.no_grad():
        proposal.score.weight.normal_(std=2.0)  # a clearly non-uniform proposal
    modules, extra = {"": model, "mapnet": proposal}, {"mapnet": pcfg.to_dict()}
    run = tmp_path / "run"
    checkpoint.save_checkpoint(run, 7, modules, {"data_position": 0}, cfg, settings.to_toml(), tok_path, "0" * 64, extra)
    return run


@pytest.fixture(scope="module")
def mapnet_run(tmp_path_factory):
    return make_run(tmp_path_factory.mktemp("mapnet"))


def test_json_schema_on_text(mapnet_run):
    result = CliRunner().invoke(app, ["inspect-masks", str(mapnet_run), "--text", TEXT, "--json", "--samples", "50",
                                      "--min-count", "1"])
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
    result = CliRunner().invoke(app, ["inspect-masks", str(mapnet_run), "--text", TEXT, "--samples", "20",
                                      "--min-count", "1"])
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
    shown = CliRunner().invoke(app, ["inspect-masks", str(mapnet_run), "--text", text, "--samples", "20",
                                     "--sentences", "10", "--min-count", "3"])
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
