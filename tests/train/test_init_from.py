"""Continued pretraining (`--init-from`): exact weight mapping both ways, refusals, every strategy, resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_shards import SPECIAL_IDS, write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli.atomic import sha256_file
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.export import export
from mapnet_cli.model import checkpoint
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import Settings
from mapnet_cli.train import init_from

transformers = pytest.importorskip("transformers")

# Not a preset size: the model size must come from SOURCE.
CFG = BertConfig(vocab_size=64, layers=2, hidden=32, heads=4, intermediate=64, max_position=64)
RUN = [
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.eval_every=2",
    "train.eval_sequences=16",
    "train.checkpoint_every=2",
    "optim.warmup.steps=1",
    "optim.lr=3e-3",
    "logging.log_every=1",
    "logging.progress=false",
]


def run_args(shards: Path, out: Path, *extra: str) -> list[str]:
    return ["pretrain", str(shards), "--out", str(out), *[a for kv in RUN for a in ("--set", kv)], *extra]


def metrics(run: Path, kind: str) -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


@pytest.fixture(scope="module")
def source(shards, tmp_path_factory) -> tuple[Path, BertForMLM]:
    """A mapnet checkpoint with trained-looking weights (biases and LayerNorms off their init), the shards'
    tokenizer."""
    root = tmp_path_factory.mktemp("source")
    torch.manual_seed(0)
    model = BertForMLM(CFG)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    checkpoint.save_checkpoint(
        root / "run",
        5,
        {"": model},
        {},
        CFG,
        Settings().to_toml(),
        shards / "tokenizer.json",
        sha256_file(shards / "tokenizer.json"),
    )
    return root / "run", model.eval()


@pytest.fixture(scope="module")
def hf_folder(source, tmp_path_factory) -> Path:
    return export(source[0], tmp_path_factory.mktemp("hf") / "bert")


def logits(model: BertForMLM, seed: int = 1) -> torch.Tensor:
    ids = torch.randint(5, CFG.vocab_size, (3, 20), generator=torch.Generator().manual_seed(seed))
    ids[:, 0] = SPECIAL_IDS["cls"]
    with torch.no_grad():
        return model.eval()(ids)


# ---------------------------------------------------------------- the mapping
def test_export_then_init_from_gives_identical_weights_and_logits(source, hf_folder):
    path, original = source
    src = init_from.open_source(hf_folder)
    assert src.kind == "huggingface"
    assert src.arch == {**{k: getattr(CFG, k) for k in init_from.ARCH}, "vocab_size": 64, "pad_id": 0}
    model, notes = init_from.start_model(CFG, 3, src)  # another seed: nothing may come from the init
    for key, value in original.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    assert torch.equal(logits(model), logits(original))
    assert any("row 0 is zero (a mapnet export), dropped" in n for n in notes), notes
    # And the mapnet checkpoint itself (a run folder: its newest checkpoint) as SOURCE.
    again, notes = init_from.start_model(CFG, 3, init_from.open_source(path))
    assert torch.equal(logits(again), logits(original)) and notes == []


def test_pre_ln_export_then_init_from_gives_identical_weights_and_logits(shards, tmp_path):
    """The pre-LN layout goes out as RobertaPreLayerNormForMaskedLM and comes back weight for weight."""
    cfg = BertConfig(**{**CFG.to_dict(), "norm": "pre"})
    torch.manual_seed(0)
    original = BertForMLM(cfg)
    with torch.no_grad():
        for p in original.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    checkpoint.save_checkpoint(
        tmp_path / "run",
        5,
        {"": original},
        {},
        cfg,
        Settings().to_toml(),
        shards / "tokenizer.json",
        sha256_file(shards / "tokenizer.json"),
    )
    folder = export(tmp_path / "run", tmp_path / "hf")
    src = init_from.open_source(folder)
    assert src.arch["norm"] == "pre" and src.arch["max_position"] == cfg.max_position  # the RoBERTa offset undone
    model, _ = init_from.start_model(cfg, 3, src)
    for key, value in original.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
    assert torch.equal(logits(model), logits(original))
    # Sized by SOURCE: a run that starts from it is pre-LN without being told.
    settings = init_from.sized_by(src)
    assert settings.model.norm == "pre" and settings.model.max_position == cfg.max_position


def test_hf_roberta_prelayernorm_gives_its_own_logits(tmp_path, shards):
    """Written by transformers (pad_token_id 1, positions from 2, non-zero token types): same logits here."""
    torch.manual_seed(4)
    hf_cfg = transformers.RobertaPreLayerNormConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=66,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        type_vocab_size=1,
    )
    hf = transformers.RobertaPreLayerNormForMaskedLM(hf_cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf.save_pretrained(tmp_path / "hf")
    shutil.copyfile(shards / "tokenizer.json", tmp_path / "hf" / "tokenizer.json")
    src = init_from.open_source(tmp_path / "hf")
    assert (src.arch["norm"], src.arch["max_position"], src.arch["pad_id"]) == ("pre", 64, 1)
    cfg = BertConfig(**{**CFG.to_dict(), "norm": "pre", "pad_id": 1})
    model, notes = init_from.start_model(cfg, 0, src)
    ids = torch.randint(5, 64, (2, 16))  # no padding: RoBERTa numbers every token
    with torch.no_grad():
        theirs = hf(input_ids=ids).logits
    torch.testing.assert_close(model.eval()(ids), theirs, atol=2e-5, rtol=1e-4)
    assert any("folded into the position embeddings" in n for n in notes), notes


def test_hf_bert_for_masked_lm_gives_its_own_logits(tmp_path, shards):
    """A BertForMaskedLM written by transformers (non-zero token-type embeddings, NSP-free): same logits here."""
    torch.manual_seed(4)
    hf_cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    hf = transformers.BertForMaskedLM(hf_cfg).eval()
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    hf.save_pretrained(tmp_path / "hf")
    shutil.copyfile(shards / "tokenizer.json", tmp_path / "hf" / "tokenizer.json")
    model, notes = init_from.start_model(CFG, 0, init_from.open_source(tmp_path / "hf"))
    ids = torch.randint(5, 64, (2, 16))
    with torch.no_grad():
        theirs = hf(input_ids=ids).logits  # token_type_ids default to 0
    torch.testing.assert_close(model.eval()(ids), theirs, atol=2e-5, rtol=1e-4)
    assert any("folded into the position embeddings" in n for n in notes), notes


def test_bert_model_without_head_loads_with_the_head_initialised(tmp_path, shards):
    hf_cfg = transformers.BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(5)
    hf = transformers.BertModel(hf_cfg).eval()
    hf.save_pretrained(tmp_path / "hf")
    shutil.copyfile(shards / "tokenizer.json", tmp_path / "hf" / "tokenizer.json")
    model, notes = init_from.start_model(CFG, 7, init_from.open_source(tmp_path / "hf"))
    ids = torch.randint(5, 64, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(model.eval().encoder(ids), hf(input_ids=ids).last_hidden_state, atol=2e-5, rtol=1e-4)
    fresh, _ = init_from.start_model(CFG, 7)  # the head is the seeded BERT init, not SOURCE's
    for key, value in fresh.state_dict().items():
        if key.startswith("head."):
            assert torch.equal(model.state_dict()[key], value), key
    assert any("no MLM head" in n for n in notes) and any("pooler" in n for n in notes), notes
    # Through the CLI the note is printed and recorded.
    res = CliRunner().invoke(
        app, run_args(shards, tmp_path / "run", "--init-from", str(tmp_path / "hf"), "--steps", "1")
    )
    assert res.exit_code == 0, res.output
    assert "no MLM head" in res.output
    record = json.loads((tmp_path / "run" / "run.json").read_text())["init_from"]
    assert record["kind"] == "huggingface" and any("no MLM head" in n for n in record["notes"])


# ---------------------------------------------------------------- the CLI run
def test_pretrain_init_from_starts_at_source_and_records_it(shards, source, hf_folder, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, run_args(shards, tmp_path / "hf-run", "--init-from", str(hf_folder), "--steps", "2"))
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, run_args(shards, tmp_path / "ckpt-run", "--init-from", str(source[0]), "--steps", "2"))
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app,
        run_args(shards, tmp_path / "scratch", "--preset", "tiny", "--set", "model.max_position=64", "--steps", "2"),
    )
    assert res.exit_code == 0, res.output
    step0 = {name: metrics(tmp_path / name, "eval")[0]["eval_loss"] for name in ("hf-run", "ckpt-run", "scratch")}
    assert step0["hf-run"] == pytest.approx(step0["ckpt-run"], rel=1e-6)  # the same weights, either way in
    assert step0["hf-run"] != pytest.approx(step0["scratch"], rel=1e-3)
    info = json.loads((tmp_path / "hf-run" / "run.json").read_text())
    assert info["init_from"]["path"] == str(hf_folder.resolve())
    assert info["init_from"]["weights_sha256"] == sha256_file(hf_folder / "model.safetensors")
    assert info["model"]["hidden"] == 32 and info["model"]["layers"] == 2
    recorded = (tmp_path / "hf-run" / "settings.toml").read_text()
    assert 'preset = "custom"' in recorded and f'init_from = "{hf_folder}"' in recorded
    # Fresh optimizer and schedule: step 1 is at the warm-up's first learning rate.
    assert metrics(tmp_path / "hf-run", "train")[0]["lr"] == pytest.approx(3e-3)


def test_conflicting_preset_or_size_is_refused(shards, hf_folder, tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, run_args(shards, tmp_path / "a", "--init-from", str(hf_folder), "--preset", "tiny"))
    assert isinstance(res.exception, MapnetError) and "--preset tiny (L2/H128/A2)" in str(res.exception)
    assert "L2/H32/A4" in str(res.exception) and res.exit_code != 0
    res = runner.invoke(
        app, run_args(shards, tmp_path / "b", "--init-from", str(hf_folder), "--set", "model.hidden=64")
    )
    assert isinstance(res.exception, MapnetError) and "model.hidden = 64" in str(res.exception)
    # A size that agrees with SOURCE is no conflict.
    res = runner.invoke(
        app,
        run_args(shards, tmp_path / "c", "--init-from", str(hf_folder), "--set", "model.hidden=32", "--print-settings"),
    )
    assert res.exit_code == 0 and "hidden = 32" in res.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "damage, says",
    [
        ("truncated", "model.safetensors is not a readable safetensors file"),
        ("garbage", "model.safetensors is not a readable safetensors file"),
        ("config", "config.json is not readable JSON"),
    ],
)
def test_a_damaged_source_is_one_line_before_any_work(shards, hf_folder, tmp_path, damage, says):
    """`open_source` is the one reader of a folder a user hands us: it reads the safetensors header, so a truncated
    file is refused when the settings are resolved, before the shards are read or any folder is made, in
    pretrain as in shard --init-from, compare and blimp."""
    src = tmp_path / "src"
    shutil.copytree(hf_folder, src)
    weights = src / "model.safetensors"
    if damage == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif damage == "garbage":
        weights.write_bytes(b"\x00garbage" * 64)
    else:
        (src / "config.json").write_text('{"model_type": "bert",')
    with pytest.raises(MapnetError, match=says):
        init_from.open_source(src)
    res = CliRunner().invoke(app, run_args(shards, tmp_path / "run", "--init-from", str(src)))
    assert isinstance(res.exception, MapnetError) and says in str(res.exception) and "\n" not in str(res.exception)
    assert not (tmp_path / "run").exists()
    # Given as blimp's argument, the same reader does not speak of --init-from.
    with pytest.raises(MapnetError) as info:
        init_from.open_source(src, role="")
    assert says in str(info.value) and "--init-from" not in str(info.value)


def test_wrong_tokenizer_is_refused_naming_both_hashes(shards, hf_folder, tmp_path):
    other = write_tiny_shards(tmp_path / "other", vocab_size=64, seed=1)
    tok = json.loads((other / "tokenizer.json").read_text())
    tok["model"]["vocab"] = {("x" + k if k.startswith("w") else k): v for k, v in tok["model"]["vocab"].items()}
    (other / "tokenizer.json").write_text(json.dumps(tok))
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["tokenizer_sha256"] = sha256_file(other / "tokenizer.json")
    (other / "manifest.json").write_text(json.dumps(manifest))
    res = CliRunner().invoke(app, run_args(other, tmp_path / "run", "--init-from", str(hf_folder)))
    assert isinstance(res.exception, MapnetError), res.output
    message = str(res.exception)
    assert sha256_file(other / "tokenizer.json") in message and sha256_file(hf_folder / "tokenizer.json") in message


def _tokenizer_source(tokenizer: Path) -> init_from.Source:
    return init_from.Source(
        path=tokenizer.parent, kind="huggingface", arch={}, weights=tokenizer, tokenizer=tokenizer, config_sha256=""
    )


def test_exported_tokenizer_counts_as_the_shards_tokenizer(shards, tmp_path):
    """`export` adds a post-processor, the cleaning (normalizers, pre-tokenizers) and lstrip on [MASK]: ids still mean
    the
    same words."""
    from mapnet_cli.export import write_tokenizer

    exported = tmp_path / "tokenizer.json"
    write_tokenizer(shards / "tokenizer.json", exported, Settings().preprocess)
    doc = json.loads(exported.read_text())
    assert doc["normalizer"] is not None and any(t.get("lstrip") for t in doc["added_tokens"])
    init_from.check_tokenizer(_tokenizer_source(exported), shards / "tokenizer.json", "the shards")
    # merges written the older way ("a b") are the same merges
    old_style = json.loads(exported.read_text())
    if old_style["model"].get("merges"):
        old_style["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in old_style["model"]["merges"]]
    (tmp_path / "old.json").write_text(json.dumps(old_style))
    init_from.check_tokenizer(_tokenizer_source(tmp_path / "old.json"), shards / "tokenizer.json", "the shards")


def test_added_token_with_another_id_is_still_refused(shards, tmp_path):
    doc = json.loads((shards / "tokenizer.json").read_text())
    doc["added_tokens"][0]["content"] = "[OTHER]"
    (tmp_path / "tokenizer.json").write_text(json.dumps(doc))
    with pytest.raises(MapnetError, match="token ids would mean other words"):
        init_from.check_tokenizer(
            _tokenizer_source(tmp_path / "tokenizer.json"), shards / "tokenizer.json", "the shards"
        )


@pytest.mark.parametrize("text", ['{"model": {"vocab"', '{"added_tokens": []}', "[1, 2]"])
def test_corrupt_tokenizer_json_is_a_one_line_error(shards, tmp_path, text):
    (tmp_path / "tokenizer.json").write_text(text)
    with pytest.raises(MapnetError) as info:
        init_from.check_tokenizer(
            _tokenizer_source(tmp_path / "tokenizer.json"), shards / "tokenizer.json", "the shards"
        )
    assert "tokenizer.json" in str(info.value) and "\n" not in str(info.value)


def test_roberta_style_source_is_refused(shards, tmp_path):
    cfg = transformers.RobertaConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=66,
    )
    transformers.RobertaForMaskedLM(cfg).save_pretrained(tmp_path / "roberta")
    shutil.copyfile(shards / "tokenizer.json", tmp_path / "roberta" / "tokenizer.json")
    res = CliRunner().invoke(app, run_args(shards, tmp_path / "run", "--init-from", str(tmp_path / "roberta")))
    assert isinstance(res.exception, MapnetError) and res.exit_code != 0
    assert "is a roberta model" in str(res.exception) and "model_type 'bert' (post-LN)" in str(res.exception)
    res = CliRunner().invoke(app, run_args(shards, tmp_path / "run", "--init-from", str(tmp_path / "nowhere")))
    assert isinstance(res.exception, MapnetError) and "no such folder" in str(res.exception)


@pytest.mark.parametrize(
    "masking",
    [
        ["--masking", "uniform"],
        ["--masking", "mapnet"],
        ["--masking", "stratified"],
        ["--masking", "frequency", "--set", "masking.frequency.mix_uniform=0.5"],
    ],
)
def test_every_masking_strategy_starts_from_source(shards, hf_folder, tmp_path, masking):
    res = CliRunner().invoke(
        app, run_args(shards, tmp_path / "run", "--init-from", str(hf_folder), "--steps", "2", *masking)
    )
    assert res.exit_code == 0, res.output
    ckpt = checkpoint.latest_checkpoint(tmp_path / "run")
    assert checkpoint.read_config(ckpt)["masking"] == masking[1]
    # The start was SOURCE's: the step-0 held-out loss is the same whatever the strategy.
    assert metrics(tmp_path / "run", "eval")[0]["eval_loss"] == pytest.approx(
        _source_eval_loss(shards, hf_folder, tmp_path), rel=1e-6
    )


def _source_eval_loss(shards: Path, hf_folder: Path, tmp_path: Path) -> float:
    out = tmp_path / "ref"
    if not out.exists():
        assert (
            CliRunner().invoke(app, run_args(shards, out, "--init-from", str(hf_folder), "--steps", "1")).exit_code == 0
        )
    return metrics(out, "eval")[0]["eval_loss"]


def test_resume_continues_the_continued_run_not_source(shards, hf_folder, tmp_path):
    runner = CliRunner()
    src = tmp_path / "src"
    shutil.copytree(hf_folder, src)
    whole = run_args(shards, tmp_path / "whole", "--init-from", str(src), "--steps", "4")
    assert runner.invoke(app, whole).exit_code == 0
    part = run_args(shards, tmp_path / "part", "--init-from", str(src), "--steps", "4")
    assert runner.invoke(app, [*part, "--stop-at", "2"]).exit_code == 0
    shutil.rmtree(src)  # resume must not read SOURCE again: it restores the run's own checkpoint
    res = runner.invoke(app, ["pretrain", str(shards), "--out", str(tmp_path / "part"), "--resume"])
    assert res.exit_code == 0, res.output
    assert "resumed from" in res.output and "starting from" not in res.output
    a = checkpoint.load_model(tmp_path / "whole")[0].state_dict()
    b = checkpoint.load_model(tmp_path / "part")[0].state_dict()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    info = json.loads((tmp_path / "part" / "run.json").read_text())
    assert info["resumes"][0]["step"] == 2 and info["init_from"]["path"] == str(src.resolve())
    # Another SOURCE on resume is refused by name.
    res = runner.invoke(
        app,
        [
            "pretrain",
            str(shards),
            "--out",
            str(tmp_path / "part"),
            "--resume",
            "--steps",
            "6",
            "--init-from",
            str(hf_folder),
        ],
    )
    assert isinstance(res.exception, MapnetError) and "model.init_from" in str(res.exception)


# ---------------------------------------------------------------- a BERT's WordPiece vocabulary end to end
def write_wordpiece(path: Path) -> int:
    """A BERT-layout WordPiece tokenizer.json ([PAD] 0, [unused*], [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103),
    built offline as transformers would save it; returns its vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"-()")
    vocab = [
        "[PAD]",
        *[f"[unused{i}]" for i in range(99)],
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *chars,
        *["##" + c for c in chars],
    ]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 101), ("[SEP]", 102)]
    )
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.save(str(path))
    return len(vocab)


def test_wordpiece_tokenizer_preprocess_shard_and_pretrain(tmp_path, hf_folder):
    """preprocess --tokenizer BERT/tokenizer.json --bert-text; shard reads BERT's special ids; shard and
    pretrain refuse another tokenizer than SOURCE's and accept SOURCE's own."""
    runner = CliRunner()
    bert = tmp_path / "bert"
    bert.mkdir()
    vocab = write_wordpiece(bert / "tokenizer.json")
    torch.manual_seed(0)
    transformers.BertForMaskedLM(
        transformers.BertConfig(
            vocab_size=vocab,
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    ).save_pretrained(bert)
    res = runner.invoke(
        app,
        [
            "preprocess",
            "synthetic:",
            "--out",
            str(tmp_path / "prep"),
            "--tokenizer",
            str(bert / "tokenizer.json"),
            "--bert-text",
            "--workers",
            "1",
            "--set",
            "synthetic.documents=30",
        ],
    )
    assert res.exit_code == 0, res.output
    pre = json.loads((tmp_path / "prep" / "manifest.json").read_text())["settings"]
    assert (pre["moses_tokenize"], pre["normalize_punctuation"], pre["lowercase"]) == (False, False, False)
    lines = (tmp_path / "prep" / "sentences" / "part-00000.txt").read_text().splitlines()
    assert any(ln[:1].isupper() for ln in lines) and any(
        ln.endswith(("a.", "e.", "s.")) for ln in lines
    )  # case kept, "word." unsplit
    shard = [
        "shard",
        str(tmp_path / "prep"),
        "--out",
        str(tmp_path / "shards"),
        "--max-seq-len",
        "32",
        "--valid-fraction",
        "0.2",
        "--set",
        "shard.workers=1",
    ]
    res = runner.invoke(app, [*shard, "--init-from", str(hf_folder)])  # SOURCE with another vocabulary: refused first
    assert isinstance(res.exception, MapnetError) and sha256_file(hf_folder / "tokenizer.json") in str(res.exception)
    assert (
        sha256_file(tmp_path / "prep" / "tokenizer.json") in str(res.exception) and not (tmp_path / "shards").exists()
    )
    res = runner.invoke(app, [*shard, "--init-from", str(bert)])
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "shards" / "manifest.json").read_text())
    assert manifest["special_ids"] == {"pad": 0, "unk": 100, "cls": 101, "sep": 102, "mask": 103}
    from mapnet_cli.data.shards import ShardReader

    rows = ShardReader(tmp_path / "shards", "train").take(range(4))
    assert (rows[:, 0] == 101).all() and (rows >= 104).mean() > 0.5  # [CLS] first; most tokens are letters
    res = runner.invoke(
        app,
        run_args(
            tmp_path / "shards", tmp_path / "run", "--init-from", str(bert), "--steps", "2", "--masking", "mapnet"
        ),
    )
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, run_args(tmp_path / "shards", tmp_path / "run2", "--init-from", str(hf_folder)))
    assert isinstance(res.exception, MapnetError) and "tokenizer" in str(res.exception)


def test_compare_passes_init_from_to_every_run(shards, hf_folder, tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "compare",
            str(shards),
            "--out",
            str(tmp_path / "cmp"),
            "--init-from",
            str(hf_folder),
            "--strategies",
            "uniform,stratified",
            "--seeds",
            "1",
            "--steps",
            "2",
            *[a for kv in RUN for a in ("--set", kv)],
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "cmp" / "results.json").read_text())
    assert all(doc["checks"].values()), doc["checks"]
    start, _ = init_from.start_model(CFG, 0, init_from.open_source(hf_folder))
    from mapnet_cli.compare import tensors_sha256

    assert {r["initial_weights_sha256"] for r in doc["runs"]} == {tensors_sha256(start.state_dict())}
    for r in doc["runs"]:
        assert json.loads((Path(r["path"]) / "run.json").read_text())["init_from"]["path"] == str(hf_folder.resolve())


# ---------------------------------------------------------------- `mapnet pretrain --nproc 2 --init-from`, stopped
@pytest.fixture(scope="module")
def launched(shards, hf_folder, tmp_path_factory) -> tuple[Path, list[str], int, str]:
    """`mapnet pretrain --nproc 2 --init-from HF` as a user types it (no --preset: the model is SOURCE's; the launcher
    -> torchrun -> two gloo workers), sent SIGTERM (`kill`, to the launcher) once step 2 is logged: (its run folder,
    its settings, exit status, stderr). The suite's one `--nproc 2` run that trains: a launch starts torch four
    times, so both tests below read this one (the other 1-vs-2 runs share one torchrun job, tests/gloo_runs.py)."""
    import sys

    from gloo import _clean_env
    from signalled import signal_once_training

    out = tmp_path_factory.mktemp("launched") / "two"
    sets = [
        *RUN,
        "model.dropout=0.0",
        "model.attention_dropout=0.0",
        f"model.init_from={hf_folder}",
        "train.steps=100000",
        "train.checkpoint_every=0",
        "train.micro_batch_size=4",
    ]
    cmd = [
        sys.executable,
        "-m",
        "mapnet_cli.cli",
        "pretrain",
        str(shards),
        "--out",
        str(out),
        "--nproc",
        "2",
        *[a for kv in sets for a in ("--set", kv)],
    ]
    code, err = signal_once_training(cmd, out, env=_clean_env(), within=300, after_step=2)
    return out, sets, code, err


@pytest.mark.slow
@pytest.mark.distributed
def test_the_launcher_passes_a_stop_signal_to_its_workers(launched):
    """`kill` on `mapnet pretrain --nproc 2` (the launcher, not torchrun): both workers checkpoint the step they are
    in, and the launcher leaves with 143 and one line naming that checkpoint."""
    from signalled import stopped_step

    out, _, code, err = launched
    assert code == 143, err[-3000:]
    said = [line for line in err.splitlines() if "stopped by" in line]  # once: the launcher's, the workers' silent
    assert len(said) == 1 and said[0] == err.strip().splitlines()[-1] and "Traceback" not in err
    assert said[0].startswith("error: stopped by SIGTERM after step ") and "--resume continues the run" in said[0]
    step = stopped_step(said[0])
    assert checkpoint.latest_checkpoint(out).name == f"step-{step:08d}"


@pytest.mark.slow
@pytest.mark.distributed
def test_two_gloo_processes_start_from_source_as_one(shards, launched, tmp_path):
    """The launched run (2 processes x 4 sequences, from SOURCE) against one process x 8 stopped at the same step:
    the same losses step by step, the same held-out losses, the same weights; run.json records what was typed."""
    from signalled import stopped_step

    from mapnet_cli.train import pretrain

    two, sets, code, err = launched
    assert code == 143, err[-3000:]
    step = stopped_step(err.strip().splitlines()[-1])
    assert step >= 2
    pretrain(init_from.resolve(None, {}, sets), shards, tmp_path / "one", stop_at=step)
    a, b = (metrics(run, "train") for run in (tmp_path / "one", two))
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, step + 1))
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], rel=1e-5, abs=1e-6)
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-4)
    a, b = (metrics(run, "eval") for run in (tmp_path / "one", two))
    assert len(b) >= 2 and [r["step"] for r in a] == [r["step"] for r in b]
    assert [r["eval_loss"] for r in b] == pytest.approx([r["eval_loss"] for r in a], rel=1e-5)
    m1, _ = checkpoint.load_model(tmp_path / "one")
    m2, _ = checkpoint.load_model(two)
    for (k, p1), p2 in zip(m1.state_dict().items(), m2.state_dict().values()):
        torch.testing.assert_close(p1, p2, atol=2e-5, rtol=1e-4, msg=k)
    run_info = json.loads((two / "run.json").read_text())
    assert run_info["init_from"]["kind"] == "huggingface"
    assert run_info["world_size"] == 2 and "--nproc" in run_info["command"]  # the command the user typed
    assert not list(two.glob(".launch-settings-*"))  # the settings file the launcher gave its workers


# ---------------------------------------------------------------- continued pretraining reads text as BERT does
@pytest.fixture(scope="module")
def bert_folders(shared_data, tmp_path_factory) -> dict[str, Path]:
    """{"uncased", "cased"}: local Hugging Face BERT folders as `save_pretrained` writes them: a WordPiece
    vocabulary trained on real text (tokenizers), BertTokenizerFast's tokenizer.json, a BertForMaskedLM."""
    from real_text import training_text
    from tokenizers import BertWordPieceTokenizer

    paragraphs = training_text(shared_data)[:3000]
    root = tmp_path_factory.mktemp("bert-folders")
    out = {}
    for name in ("uncased", "cased"):
        wordpiece = BertWordPieceTokenizer(lowercase=name == "uncased")
        wordpiece.train_from_iterator(
            paragraphs, vocab_size=3000, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        )
        folder = root / name
        folder.mkdir()
        wordpiece.save_model(str(folder))  # vocab.txt
        tok = transformers.BertTokenizerFast(vocab_file=str(folder / "vocab.txt"), do_lower_case=name == "uncased")
        tok.save_pretrained(folder)
        torch.manual_seed(0)
        transformers.BertForMaskedLM(
            transformers.BertConfig(
                vocab_size=len(tok),
                hidden_size=32,
                num_hidden_layers=1,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=64,
            )
        ).save_pretrained(folder)
        out[name] = folder
    return out


@pytest.mark.slow
@pytest.mark.parametrize("case", ["uncased", "cased"])
def test_bert_text_path_gives_berts_own_ids_on_real_text(case, bert_folders, shared_data, tmp_path):
    """Issue 36, item 5: what continuing pretraining from a BERT reads (`preprocess --tokenizer BERT/tokenizer.json
    --bert-text`: spaCy's sentences, mapnet's cleaning, then `shard`'s encoding) is, document by document, the ids
    BERT's own tokenizer gives the raw text (2,000 real sentences: GLUE, Wikipedia, books, BLiMP; and a "▁",
    which mapnet's BPE cleaning would make "_")."""
    from real_text import real_sentences

    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.data.preprocessed import open_preprocessed
    from mapnet_cli.data.shard_writer import encode_lines
    from mapnet_cli.settings import resolve

    folder = bert_folders[case]
    texts = [" ".join(text.split()) for _, text in real_sentences(shared_data)]  # one document per line
    texts.append("Typed as key\u2581value, as BERT reads it.")
    (tmp_path / "docs.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    settings = resolve(
        None,
        {
            "preprocess": {
                "tokenizer": str(folder / "tokenizer.json"),
                "lowercase": False,
                "normalize_punctuation": False,
                "moses_tokenize": False,
            }
        },
        ["preprocess.doc_separator=line", "preprocess.workers=1"],
    )
    run_preprocess([tmp_path / "docs.txt"], tmp_path / "prep", settings)
    init_from.check_tokenizer(init_from.open_source(folder), tmp_path / "prep" / "tokenizer.json", "the corpus")
    by_doc: dict[int, list[str]] = {}
    for chunk in open_preprocessed(tmp_path / "prep").chunks():
        for line, doc in zip(chunk.lines, chunk.doc_index):
            by_doc.setdefault(int(doc), []).append(line)
    assert len(by_doc) == len(texts)
    docs = [by_doc[d] for d in sorted(by_doc)]
    flat, lengths = encode_lines(str(tmp_path / "prep" / "tokenizer.json"), [ln for doc in docs for ln in doc])
    ends = np.cumsum(lengths)[np.cumsum([len(doc) for doc in docs]) - 1]  # where each document's ids end
    ids = [flat[a:b].tolist() for a, b in zip([0, *ends[:-1]], ends)]
    bert = transformers.AutoTokenizer.from_pretrained(str(folder))
    theirs = bert(texts, add_special_tokens=False)["input_ids"]
    differing = [t for t, a, b in zip(texts, ids, theirs) if a != b]
    assert not differing, differing[:3]
    # Not vacuous: capitals and punctuation reach the tokenizer as typed (BERT lower-cases when uncased).
    lines = [ln for d in by_doc.values() for ln in d]
    assert any(ln[:1].isupper() for ln in lines) and any(ln.endswith(".") and ln[-2:-1].isalpha() for ln in lines)
