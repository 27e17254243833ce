"""Export to Hugging Face: transformers loads it and computes the same logits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from tiny_shards import SPECIAL_IDS
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError
from mapnet_cli.export import export, hf_config, hf_state_dict
from mapnet_cli.model import checkpoint
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import Settings

transformers = pytest.importorskip("transformers")


@pytest.fixture
def ckpt(trained_runs, tmp_path) -> tuple[Path, BertForMLM]:
    """A copy of the real tiny MAP-Net run (the tests damage it) and its model, read straight from the file."""
    run = shutil.copytree(trained_runs["mapnet"], tmp_path / "run")
    path = checkpoint.latest_checkpoint(run)
    meta = checkpoint.read_config(path)
    model = BertForMLM(BertConfig.from_dict(meta["model"]))
    checkpoint.load_weights(path / checkpoint.WEIGHTS, {"": model})
    assert any(k.startswith("mapnet.") for k in load_file(str(path / checkpoint.WEIGHTS)))  # for export to leave behind
    return path, model.eval()


def test_transformers_loads_it_with_identical_logits(ckpt, tmp_path):
    path, model = ckpt
    out = export(tmp_path / "run", tmp_path / "hf")  # a run folder means its newest checkpoint
    hf = transformers.AutoModelForMaskedLM.from_pretrained(str(out)).eval()
    assert type(hf).__name__ == "BertForMaskedLM"
    ids = torch.randint(5, 60, (3, 20))
    ids[:, 0] = SPECIAL_IDS["cls"]
    ids[2, 14:] = SPECIAL_IDS["pad"]
    attn = (ids != SPECIAL_IDS["pad"]).long()
    with torch.no_grad():
        ours = model(ids, attn.bool())
        theirs = hf(input_ids=ids, attention_mask=attn).logits
        pairs = hf(
            input_ids=ids, attention_mask=attn, token_type_ids=(torch.arange(20) > 9).long().expand(3, 20)
        ).logits
    real = attn.bool()
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(pairs[real], ours[real], atol=1e-4, rtol=1e-4)  # segment ids add nothing
    # The decoder really is tied to the word embeddings (not a random fresh matrix).
    assert torch.equal(hf.cls.predictions.decoder.weight, hf.bert.embeddings.word_embeddings.weight)


def test_pre_ln_exports_as_roberta_prelayernorm_with_identical_logits(tmp_path):
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=60, layers=2, hidden=32, heads=4, intermediate=64, max_position=20, norm="pre")
    model = BertForMLM(cfg)
    with torch.no_grad():  # trained-looking LayerNorms and biases, so a misplaced one shows
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model.eval()
    folder = tmp_path / "hf"
    folder.mkdir()
    save_file(hf_state_dict(model), str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(hf_config(model)))
    hf = transformers.AutoModelForMaskedLM.from_pretrained(str(folder)).eval()
    assert type(hf).__name__ == "RobertaPreLayerNormForMaskedLM"
    ids = torch.randint(5, 60, (3, 20))
    ids[:, 0] = SPECIAL_IDS["cls"]
    ids[2, 14:] = SPECIAL_IDS["pad"]  # right padding, as mapnet pads
    attn = (ids != SPECIAL_IDS["pad"]).long()
    with torch.no_grad():
        ours = model(ids, attn.bool())
        theirs = hf(input_ids=ids, attention_mask=attn).logits
    real = attn.bool()
    torch.testing.assert_close(theirs[real], ours[real], atol=1e-4, rtol=1e-4)
    assert torch.equal(hf.lm_head.decoder.weight, hf.roberta_prelayernorm.embeddings.word_embeddings.weight)


def modern_model(**kw) -> BertForMLM:
    """A modern-block model (3 blocks: the first without its attention LayerNorm) with trained-looking weights."""
    torch.manual_seed(0)
    cfg = BertConfig(
        **{
            **dict(
                vocab_size=60,
                layers=3,
                hidden=32,
                heads=4,
                intermediate=48,
                max_position=20,
                norm="pre",
                block="modern",
                layer_norm_eps=1e-5,
                rope_theta=500.0,
            ),
            **kw,
        }
    )
    model = BertForMLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


def test_modern_block_exports_as_modernbert_with_identical_logits_and_reads_back(tmp_path):
    from mapnet_cli.model.hf_modern_layout import hf_to_mapnet

    model = modern_model()
    folder = tmp_path / "hf"
    folder.mkdir()
    save_file(hf_state_dict(model), str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(hf_config(model)))
    ids = torch.randint(5, 60, (3, 20))
    ids[:, 0] = SPECIAL_IDS["cls"]
    ids[2, 14:] = SPECIAL_IDS["pad"]
    attn = (ids != SPECIAL_IDS["pad"]).long()
    real = attn.bool()
    with torch.no_grad():
        ours = model(ids, real)
    for impl in ("sdpa", "eager"):
        hf = transformers.AutoModelForMaskedLM.from_pretrained(str(folder), attn_implementation=impl).eval()
        assert type(hf).__name__ == "ModernBertForMaskedLM"
        assert hf.config.layer_types == ["full_attention"] * 3  # no local attention: mapnet has none
        with torch.no_grad():
            theirs = hf(input_ids=ids, attention_mask=attn).logits
        assert (theirs[real] - ours[real]).abs().max().item() <= 1e-5, impl
    assert torch.equal(hf.decoder.weight, hf.model.embeddings.tok_embeddings.weight)  # tied, not a fresh matrix
    back, notes = hf_to_mapnet(load_file(str(folder / "model.safetensors")), 3)
    assert notes == [] and back.keys() == model.state_dict().keys()
    assert all(torch.equal(back[k], v) for k, v in model.state_dict().items())


def test_modern_export_refuses_what_modernbert_cannot_express_and_reading_back_what_mapnet_cannot():
    from mapnet_cli.model.hf_modern_layout import arch_from_config

    with pytest.raises(MapnetError, match=r"^ModernBertForMaskedLM cannot express post-LN blocks"):
        hf_config(BertForMLM(BertConfig(vocab_size=60, layers=1, hidden=32, heads=4, block="modern", norm="post")))
    # transformers' own default ModernBERT: two local-attention layers in three, RoPE base 160,000.
    default = transformers.ModernBertConfig(
        vocab_size=60,
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=4,
        intermediate_size=48,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=None,
        cls_token_id=None,
        sep_token_id=None,
    ).to_dict()
    with pytest.raises(MapnetError, match=r"local \(sliding-window\) attention layers \(2 of them"):
        arch_from_config(default, "hf/x")
    ours = hf_config(modern_model())
    with pytest.raises(MapnetError, match="hidden_activation = 'gelu_new', mlp_bias = true is not"):
        arch_from_config({**ours, "mlp_bias": True, "hidden_activation": "gelu_new"}, "hf/x")
    arch = arch_from_config(ours, "hf/x")
    assert arch == {
        "layers": 3,
        "hidden": 32,
        "heads": 4,
        "intermediate": 48,
        "max_position": 20,
        "vocab_size": 60,
        "layer_norm_eps": 1e-5,
        "norm": "pre",
        "block": "modern",
        "rope_theta": 500.0,
        "pad_id": 0,
    }


def test_export_files_tokenizer_and_no_mapnet_weights(ckpt, tmp_path):
    export(ckpt[0], tmp_path / "hf")
    names = {p.name for p in (tmp_path / "hf").iterdir()}
    assert names == {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "mapnet_export.json",
    }
    cfg = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert (
        cfg["architectures"] == ["BertForMaskedLM"] and cfg["type_vocab_size"] == 2 and cfg["layer_norm_eps"] == 1e-12
    )
    from safetensors import safe_open

    with safe_open(str(tmp_path / "hf" / "model.safetensors"), "pt") as fh:
        keys = list(fh.keys())
        assert torch.equal(fh.get_tensor("bert.embeddings.token_type_embeddings.weight"), torch.zeros(2, 32))
    assert not any("mapnet" in k or "scorer" in k for k in keys)
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
    assert tok.mask_token == "[MASK]" and tok.mask_token_id == SPECIAL_IDS["mask"] and tok.pad_token_id == 0
    # The post-processor adds what pretraining and finetune-glue put around the text.
    cls, sep = SPECIAL_IDS["cls"], SPECIAL_IDS["sep"]
    assert tok("w7 w9")["input_ids"] == [cls, 7, 9, sep]
    assert tok("w7", "w9")["input_ids"] == [cls, 7, sep, 9, sep]
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "hf").iterdir()}
    assert modes["model.safetensors"] == modes["config.json"] == modes["tokenizer.json"], modes
    meta = json.loads((tmp_path / "hf" / "mapnet_export.json").read_text())
    assert meta["step"] == 3 and meta["source"] == str(ckpt[0].resolve())


def test_cli_export_and_refusals(ckpt, tmp_path):
    runner = CliRunner()
    done = runner.invoke(app, ["export", str(ckpt[0]), "--out", str(tmp_path / "hf")])
    assert done.exit_code == 0, done.output
    again = runner.invoke(app, ["export", str(ckpt[0]), "--out", str(tmp_path / "hf")])
    assert isinstance(again.exception, MapnetError) and "--overwrite" in str(again.exception)
    assert runner.invoke(app, ["export", str(ckpt[0]), "--out", str(tmp_path / "hf"), "--overwrite"]).exit_code == 0
    (ckpt[0] / "COMPLETE").unlink()
    broken = runner.invoke(app, ["export", str(ckpt[0]), "--out", str(tmp_path / "hf2")])
    assert isinstance(broken.exception, MapnetError) and "incomplete" in str(broken.exception)
    assert not (tmp_path / "hf2").exists()


def test_fill_mask_pipeline_works_on_typed_text_from_a_trained_export(synthetic_shards, tmp_path):
    """A tiny model trained a few steps on the Moses-processed, lower-cased synthetic corpus, exported to a local
    folder: AutoTokenizer + pipeline("fill-mask") take text as typed and predict what mapnet's own model does."""
    from mapnet_cli.settings import resolve
    from mapnet_cli.train import pretrain

    s = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [
            "train.batch_size=8",
            "train.steps=6",
            "train.eval_every=0",
            "train.checkpoint_every=6",
            "optim.warmup.steps=1",
            "optim.lr=3e-3",
            "logging.progress=false",
        ],
    )
    last = pretrain(s, synthetic_shards, tmp_path / "run")
    out = export(tmp_path / "run", tmp_path / "hf")
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    fill = transformers.pipeline("fill-mask", model=str(out), tokenizer=str(out), device="cpu", top_k=3)

    text = "The bodan ka [MASK] ."
    ids = tok(text)["input_ids"]
    raw = checkpoint.load_model(last)[0].eval()
    from tokenizers import Tokenizer

    mapnet_tok = Tokenizer.from_file(str(last / "tokenizer.json"))
    body = mapnet_tok.encode("the bodan ka").ids + [tok.mask_token_id] + mapnet_tok.encode(".").ids
    # [CLS] ... [SEP] around it, lower-cased, and [MASK] takes its space: the ids pretraining would have seen.
    assert ids == [tok.cls_token_id, *body, tok.sep_token_id]
    assert tok.special_tokens_map["mask_token"] == "[MASK]" and fill.tokenizer.mask_token_id == SPECIAL_IDS["mask"]
    predictions = fill(text)
    assert len(predictions) == 3 and all(
        "[MASK]" not in p["sequence"] and "[CLS]" not in p["sequence"] for p in predictions
    )
    with torch.no_grad():
        logits = raw(torch.tensor([ids]))[0, ids.index(tok.mask_token_id)]
    top = torch.softmax(logits.float(), -1).topk(3)
    assert [p["token"] for p in predictions] == top.indices.tolist()
    assert [p["score"] for p in predictions] == pytest.approx(top.values.tolist(), abs=1e-4)


# ---------------------------------------------------------------- a user's round trip on real text (issue 36)
CASED_PUNCTUATED = "He said: \"It's Mr. Smith's, not Emma's... (I think).\" She didn't!"


@pytest.fixture(scope="module")
def real_exports(pretrained_tiny, tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """{norm: (checkpoint, export folder)}: `pretrained_tiny` (pre-LN: tiny's "fast" recipe; 100 steps on books,
    the paper's cleaning) and a post-LN run of a few steps on the same shards, each exported."""
    from trained_runs import train_tiny_run

    root = tmp_path_factory.mktemp("real-exports")
    post_ln = train_tiny_run(
        root / "post-ln",
        pretrained_tiny.parent / "shards",
        "uniform",
        "model.norm=post",
        "model.max_position=128",
        "shard.max_seq_len=128",
        "train.steps=4",
        "train.checkpoint_every=4",
    )
    # The modern block (two blocks: the first has no attention LayerNorm, the second has), trained a little.
    modern = train_tiny_run(
        root / "modern",
        pretrained_tiny.parent / "shards",
        "uniform",
        "model.block=modern",
        "model.norm=pre",
        "model.layers=2",
        "model.max_position=128",
        "shard.max_seq_len=128",
        "train.steps=30",
        "train.checkpoint_every=30",
    )
    out = {}
    for run in (pretrained_tiny, post_ln, modern):
        ckpt = checkpoint.latest_checkpoint(run)
        m = checkpoint.read_config(ckpt)["model"]
        name = "modern" if m.get("block") == "modern" else m["norm"]
        out[name] = ckpt, export(run, root / f"hf-{name}")
    assert set(out) == {"pre", "post", "modern"}
    return out


def mapnet_ids(ckpt: Path, texts: list[str]) -> list[list[int]]:
    """[CLS] + mapnet's own ids (finetune-glue's TextEncoder: the run's cleaning and tokenizer) + [SEP]."""
    from mapnet_cli.evaluation.glue.encode import TextEncoder

    enc = TextEncoder(ckpt / "tokenizer.json", checkpoint.load_settings(ckpt).preprocess, 128)
    return [[enc.cls_id, *ids.tolist(), enc.sep_id] for ids in enc.tokenise(texts)]


@pytest.mark.slow
def test_fill_mask_on_typed_text_returns_real_words(real_exports):
    ckpt, folder = real_exports["pre"]  # the one trained for 100 steps
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    text = "The capital of France is [MASK]."
    ids = tok(text)["input_ids"]
    before, after = mapnet_ids(ckpt, ["The capital of France is", "."])
    assert ids == [*before[:-1], tok.mask_token_id, *after[1:]]  # what pretraining would have read
    assert tok.unk_token_id not in ids
    fill = transformers.pipeline("fill-mask", model=str(folder), tokenizer=str(folder), device="cpu", top_k=5)
    predictions = fill(text)
    tokens = [p["token_str"] for p in predictions]
    not_words = set(tok.all_special_ids) | {tok.convert_tokens_to_ids("\u2581")}  # [UNK], [CLS] ..., a bare "▁"
    assert not not_words & {p["token"] for p in predictions}, tokens
    assert any(t.strip().isalpha() for t in tokens), tokens  # words, not only punctuation
    model = checkpoint.load_model(ckpt)[0].eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0, ids.index(tok.mask_token_id)]
    assert [p["token"] for p in predictions] == logits.topk(5).indices.tolist()


@pytest.mark.slow
@pytest.mark.parametrize(
    "norm, cls",
    [
        ("post", "BertForSequenceClassification"),
        ("pre", "RobertaPreLayerNormForSequenceClassification"),
        ("modern", "ModernBertForSequenceClassification"),
    ],
)
def test_sequence_classification_loads_and_fine_tunes_a_step(real_exports, norm, cls):
    _, folder = real_exports[norm]
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModelForSequenceClassification.from_pretrained(str(folder), num_labels=2)
    assert type(model).__name__ == cls
    batch = tok(["A gripping, funny film.", "Dull; I left early."], ["Yes.", "No!"], padding=True, return_tensors="pt")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(**batch, labels=torch.tensor([1, 0])).loss
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()) if b.grad is not None)
    assert sum(b.grad is not None for b in model.parameters()) == len(before)


@pytest.mark.slow
@pytest.mark.parametrize("norm", ["post", "pre", "modern"])
def test_cased_punctuated_sentence_gets_mapnets_outputs(real_exports, norm):
    ckpt, folder = real_exports[norm]
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    ids = tok(CASED_PUNCTUATED)["input_ids"]
    assert ids == mapnet_ids(ckpt, [CASED_PUNCTUATED])[0]
    assert tok.unk_token_id not in ids
    hf = transformers.AutoModelForMaskedLM.from_pretrained(str(folder)).eval()
    model = checkpoint.load_model(ckpt)[0].eval()
    with torch.no_grad():
        theirs = hf(**tok(CASED_PUNCTUATED, return_tensors="pt")).logits[0]
        ours = model(torch.tensor([ids]))[0]
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_modern_export_gives_mapnets_logits_on_real_sentences_and_loads_back(real_exports, pretrained_tiny):
    """Book sentences, batched with padding: ModernBertForMaskedLM's logits are mapnet's to 1e-5 (sdpa and eager);
    the folder reads back in mapnet (blimp's loader, --init-from) as the very model exported."""
    from mapnet_cli.evaluation.blimp.models import find_targets
    from mapnet_cli.train import init_from

    ckpt, folder = real_exports["modern"]
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["ModernBertForMaskedLM"] and config["layer_types"] == ["full_attention"] * 2
    lines = (pretrained_tiny.parent / "books.txt").read_text(encoding="utf-8").split("\n")
    sentences = [line for line in lines if 40 < len(line) < 300][:16]
    assert len(sentences) == 16
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    batch = tok(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
    assert set(batch) == {"input_ids", "attention_mask"}  # ModernBERT takes no token_type_ids
    assert (
        batch["input_ids"].tolist()[0][: len(mapnet_ids(ckpt, sentences[:1])[0])] == mapnet_ids(ckpt, sentences[:1])[0]
    )
    model = checkpoint.load_model(ckpt)[0].eval()
    real = batch["attention_mask"].bool()
    assert not real.all()  # padding is exercised
    with torch.no_grad():
        ours = model(batch["input_ids"], real)
        for impl in ("sdpa", "eager"):
            hf = transformers.AutoModelForMaskedLM.from_pretrained(str(folder), attn_implementation=impl).eval()
            theirs = hf(**batch).logits
            assert (theirs[real] - ours[real]).abs().max().item() <= 1e-5, impl
    state = model.state_dict()
    back = find_targets([folder])[0].build()  # what `mapnet blimp hf-folder` scores
    assert back.cfg.block == "modern" and all(torch.equal(back.state_dict()[k], v) for k, v in state.items())
    s = init_from.resolve(None, {}, [f"model.init_from={folder}", "shard.max_seq_len=128"])
    assert (s.model.block, s.model.norm, s.model.layers) == ("modern", "pre", 2)
    source = init_from.open_source(folder)
    start, _ = init_from.start_model(
        BertConfig.from_settings(s.model, model.cfg.vocab_size, model.cfg.pad_id), 0, source
    )
    assert all(torch.equal(start.state_dict()[k], v) for k, v in state.items())


def test_export_records_its_cleaning_and_preprocess_will_not_clean_twice(ckpt, tmp_path):
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.settings import resolve

    out = export(ckpt[0], tmp_path / "hf")
    assert json.loads((out / "mapnet_export.json").read_text())["cleaning"] == {
        "normalize_punctuation": True,
        "moses_tokenize": True,
        "moses_lang": "en",
        "lowercase": True,
    }
    # A BPE export (the tiny run's tokenizer is a WordLevel one, which preprocess does not reuse), written as export
    # writes its tokenizer and record.
    from mapnet_cli.data.bpe import save_tokenizer, train_tokenizer
    from mapnet_cli.export import cleaning_record, write_tokenizer

    (tmp_path / "text.txt").write_text("It's a cat. And a dog, a cat!\n\nA dog.\n", encoding="utf-8")
    save_tokenizer(train_tokenizer([tmp_path / "text.txt"], 300, 1), tmp_path / "bpe.json")
    bpe_export = tmp_path / "bpe-export"
    bpe_export.mkdir()
    write_tokenizer(tmp_path / "bpe.json", bpe_export / "tokenizer.json", Settings().preprocess)
    (bpe_export / "mapnet_export.json").write_text(json.dumps({"cleaning": cleaning_record(Settings().preprocess)}))
    reuse = {"tokenizer": str(bpe_export / "tokenizer.json"), "workers": 1}
    with pytest.raises(MapnetError, match="cleans text itself.*--bert-text"):
        run_preprocess([tmp_path / "text.txt"], tmp_path / "prep", resolve(None, {"preprocess": reuse}))
    assert not (tmp_path / "prep").exists()
    bert_text = reuse | {"normalize_punctuation": False, "moses_tokenize": False, "lowercase": False}
    run_preprocess([tmp_path / "text.txt"], tmp_path / "prep", resolve(None, {"preprocess": bert_text}))
    lines = (tmp_path / "prep" / "sentences" / "part-00000.txt").read_text().split("\n")
    assert lines[:2] == ["It's a cat.", "And a dog, a cat!"]  # raw: the export's tokenizer cleans them
    (bpe_export / "mapnet_export.json").write_text(json.dumps({"cleaning": ["lowercase"]}))  # damaged: one line
    with pytest.raises(MapnetError, match='"cleaning" is not a table'):
        run_preprocess([tmp_path / "text.txt"], tmp_path / "prep2", resolve(None, {"preprocess": reuse}))


def test_export_checks_the_runs_cleaning_against_its_shards(ckpt, trained_runs, tmp_path, capsys):
    """The cleaning export writes into tokenizer.json is the checkpoint's record; the shards run.json names hold
    the corpus's (their settings.toml, written by `shard`). A mismatch is refused in one line before anything is
    written; shards that cannot be reached leave it unchecked, with a warning that says so."""
    from mapnet_cli import settings as settings_mod

    shards = shutil.copytree(trained_runs["shards"], tmp_path / "shards")  # this test's own: it writes into them
    run_json = tmp_path / "run" / "run.json"
    record = json.loads(run_json.read_text())
    record["shards"]["path"] = str(shards)
    run_json.write_text(json.dumps(record))
    run = checkpoint.load_settings(ckpt[0])
    assert run.preprocess.lowercase and run.preprocess.moses_tokenize
    cased = settings_mod.apply(run, {"preprocess": {"lowercase": False}}, "a cased corpus")
    (shards / "settings.toml").write_text(cased.to_toml())
    with pytest.raises(MapnetError) as exc:
        export(ckpt[0], tmp_path / "hf")
    assert str(exc.value) == (
        f"{ckpt[0] / 'settings.toml'} records the cleaning lowercase=True, but the shards the run trained on were made "
        f"with lowercase=False ({shards / 'settings.toml'}): the exported tokenizer would not read text as pretraining "
        "did (were the shards rebuilt since?)"
    )
    assert not (tmp_path / "hf").exists()
    cli = CliRunner().invoke(app, ["export", str(ckpt[0]), "--out", str(tmp_path / "hf")])
    assert isinstance(cli.exception, MapnetError) and str(cli.exception) == str(exc.value)  # one line, by the CLI
    # The corpus's own cleaning: exported, without a warning.
    (shards / "settings.toml").write_text(run.to_toml())
    capsys.readouterr()
    export(ckpt[0], tmp_path / "hf")
    assert "warning" not in capsys.readouterr().err
    # Shards without settings.toml (written by hand or an older mapnet), then moved away: exported with the
    # checkpoint's record, and a warning naming why it was not checked.
    (shards / "settings.toml").unlink()
    export(ckpt[0], tmp_path / "hf", overwrite=True)
    assert f"not checked against its corpus: its shards {shards} have no settings.toml" in " ".join(
        capsys.readouterr().err.split()
    )
    shards.rename(tmp_path / "moved")
    export(ckpt[0], tmp_path / "hf", overwrite=True)
    assert f"not checked against its corpus: its shards {shards} are not there" in " ".join(
        capsys.readouterr().err.split()
    )
    assert json.loads((tmp_path / "hf" / "mapnet_export.json").read_text())["cleaning"]["lowercase"] is True
