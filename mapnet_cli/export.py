"""Export a checkpoint's encoder + MLM head in Hugging Face's BERT layout.

    mapnet export runs/base --out hf/base            # the run's newest checkpoint
    mapnet export runs/base/checkpoints/step-00400000 --out hf/base-400k

    from transformers import AutoModelForMaskedLM, AutoTokenizer
    model = AutoModelForMaskedLM.from_pretrained("hf/base")   # same logits as mapnet's model

The folder holds `config.json` (BertForMaskedLM; RobertaPreLayerNormForMaskedLM for `model.norm = "pre"`,
ModernBertForMaskedLM for `model.block = "modern"`), `model.safetensors` with HF's key names, the tokenizer files
(PreTrainedTokenizerFast; `tokenizer.json` cleans text as the run's pretraining did, `data/hf_cleaning.py`) and
`mapnet_export.json` (where it came from). Only the encoder and the MLM head are written: MAP-Net's weights stay
behind. How the layouts differ and are bridged so the logits stay identical (fused QKV, token types, RoBERTa's
position numbering, the modern block): docs/internals.md#exportpy; the guide: docs/pretraining.md#export.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import torch
from safetensors.torch import save_file

from . import __version__, artefacts, atomic
from .errors import MapnetError
from .model import hf_modern_layout
from .model.bert import BertForMLM
from .model.hf_layout import LAYOUTS
from .output_paths import check_output
from .train.run_loader import load_run

SPECIAL_TOKENS = {
    "pad_token": "[PAD]",
    "unk_token": "[UNK]",
    "cls_token": "[CLS]",
    "sep_token": "[SEP]",
    "mask_token": "[MASK]",
}
TYPE_VOCAB_SIZE = 2


def hf_config(model: BertForMLM) -> dict:
    c = model.cfg
    if c.block != "bert":
        return hf_modern_layout.hf_config(c)  # ModernBertForMaskedLM, or one line naming what it cannot express
    layout = LAYOUTS[c.norm]
    return {
        "architectures": [layout.architecture],
        "model_type": layout.model_type,
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden,
        "num_hidden_layers": c.layers,
        "num_attention_heads": c.heads,
        "intermediate_size": c.intermediate,
        "hidden_act": "gelu",
        "hidden_dropout_prob": c.dropout,
        "attention_probs_dropout_prob": c.attention_dropout,
        "max_position_embeddings": c.max_position + layout.position_rows_before(c.pad_id),
        "type_vocab_size": TYPE_VOCAB_SIZE,
        "initializer_range": c.init_std,
        "layer_norm_eps": c.layer_norm_eps,
        "pad_token_id": c.pad_id,
        "position_embedding_type": "absolute",
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }


def hf_state_dict(model: BertForMLM) -> dict[str, torch.Tensor]:
    """mapnet parameter names -> those of the Hugging Face class of its layout (`model/hf_layout.py`)."""
    if model.cfg.block != "bert":
        return hf_modern_layout.hf_state_dict(model)
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    c, H = model.cfg, model.cfg.hidden
    layout = LAYOUTS[c.norm]
    enc = layout.encoder
    positions = sd["encoder.pos_embeddings.weight"]
    unused = torch.zeros(layout.position_rows_before(c.pad_id), H, dtype=positions.dtype)
    out = {
        f"{enc}embeddings.word_embeddings.weight": sd["encoder.tok_embeddings.weight"],
        f"{enc}embeddings.position_embeddings.weight": torch.cat([unused, positions]),
        f"{enc}embeddings.token_type_embeddings.weight": torch.zeros(TYPE_VOCAB_SIZE, H),
        layout.head_bias: sd["head.bias"],
    }
    modules = {mine: enc + theirs for mine, theirs in layout.encoder_top.items()} | layout.head
    for i in range(c.layers):
        hf, ours = f"{enc}encoder.layer.{i}.", f"encoder.blocks.{i}."
        for part in ("weight", "bias"):
            for name, t in zip(("query", "key", "value"), sd[f"{ours}qkv.{part}"].split(H)):
                out[f"{hf}attention.self.{name}.{part}"] = t
        modules |= {ours + mine: hf + theirs for mine, theirs in layout.layer.items()}
    for mine, theirs in modules.items():
        for part in ("weight", "bias"):
            out[f"{theirs}.{part}"] = sd[f"{mine}.{part}"]
    return {k: v.contiguous().clone() for k, v in out.items()}


def tokenizer_files(tokenizer_path: Path, max_position: int) -> dict[str, dict]:
    from tokenizers import Tokenizer

    from .data.bpe import special_ids

    special_ids(Tokenizer.from_file(str(tokenizer_path)), tokenizer_path)
    return {
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": max_position,
            "clean_up_tokenization_spaces": False,
            **SPECIAL_TOKENS,
        },
        "special_tokens_map.json": dict(SPECIAL_TOKENS),
    }


def write_tokenizer(source: Path, path: Path, preprocess_settings) -> None:
    """The checkpoint's tokenizer made to read text as the run's pretraining did, plus a post-processor that
    adds [CLS] ... [SEP] (and [CLS] a [SEP] b [SEP] for pairs, token type 0 throughout, as pretraining and
    `finetune-glue` encode), so `tokenizer("...")` in transformers gives the inputs the model was trained on.

    The run's cleaning (`preprocess_settings`, as the run recorded them: Moses punctuation normalisation and
    tokenisation, lower-casing) goes in front of the tokenizer's own normalizer and pre-tokenizer
    (`data/hf_cleaning.py`: the same steps as `data/cleaning.Cleaner`, which preprocessing and `finetune-glue`
    run). `[MASK]` takes the space before it (lstrip), so "the [MASK] ." is [▁the, [MASK], ▁.] as in
    pretraining, not [▁the, ▁, [MASK], ▁.]."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors

    from .data import hf_cleaning
    from .data.bpe import special_ids
    from .data.cleaning import word_marker

    tok = Tokenizer.from_file(str(source))
    ids = special_ids(tok, source)  # before TemplateProcessing, which fails on a missing id in its own words
    cls, sep = SPECIAL_TOKENS["cls_token"], SPECIAL_TOKENS["sep_token"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}", pair=f"{cls} $A {sep} $B {sep}", special_tokens=[(cls, ids[cls]), (sep, ids[sep])]
    )
    cleaning = hf_cleaning.normalizer(preprocess_settings, word_marker(tok))
    tok.normalizer = normalizers.Sequence([n for n in (cleaning, tok.normalizer) if n is not None])
    moses_splits = hf_cleaning.pre_tokenizer(preprocess_settings)
    if moses_splits is not None:
        tok.pre_tokenizer = pre_tokenizers.Sequence([p for p in (moses_splits, tok.pre_tokenizer) if p is not None])
    data = json.loads(tok.to_str())
    for added in data.get("added_tokens", []):
        if added["content"] == SPECIAL_TOKENS["mask_token"]:
            added["lstrip"] = True
    atomic.write_text(path, json.dumps(data, ensure_ascii=False))


def cleaning_record(preprocess_settings) -> dict:
    """The settings that decide the exported tokenizer's cleaning, for mapnet_export.json."""
    from .data.cleaning import cleaning_settings

    return cleaning_settings(preprocess_settings)


def check_cleaning_against_shards(run) -> None:
    """Refuse a run whose recorded cleaning (its checkpoint's settings.toml, what the export writes into
    tokenizer.json) is not its corpus's: the shards its run.json names, whose settings.toml `shard` wrote.
    They differ when the shards were rebuilt in place with other settings, or for a run from before runs
    recorded their corpus's cleaning; the tokenizer would then read text unlike pretraining.

    Shards that cannot be reached (run.json missing or silent, the folder moved or on another machine, shards
    without a settings.toml) leave nothing to check against: the export goes on with the run's record, and a
    warning says it was not checked."""
    from .data.cleaning import cleaning_settings
    from .data.shards import find_shard_dir
    from .errors import warn
    from .model.checkpoint import load_settings

    recorded = cleaning_settings(run.settings.preprocess)
    named = run.shards
    try:
        folder = find_shard_dir(named) if named is not None else None
    except MapnetError:
        folder = None
    if folder is None or not (folder / "settings.toml").is_file():
        why = (
            f"{run.run_json} names no shards"
            if named is None
            else f"its shards {named} are not there"
            if folder is None
            else f"its shards {folder} have no settings.toml"
        )
        warn(
            f"the export's cleaning ({', '.join(f'{k}={v}' for k, v in recorded.items())}) is {run.checkpoint}'s "
            f"record alone, not checked against its corpus: {why}"
        )
        return
    corpus = cleaning_settings(load_settings(folder).preprocess)
    differ = [k for k in recorded if recorded[k] != corpus[k]]
    if differ:
        raise MapnetError(
            f"{run.checkpoint / 'settings.toml'} records the cleaning "
            f"{', '.join(f'{k}={recorded[k]}' for k in differ)}, but the shards the run trained on were made with "
            f"{', '.join(f'{k}={corpus[k]}' for k in differ)} ({folder / 'settings.toml'}): the exported tokenizer "
            "would not read text as pretraining did (were the shards rebuilt since?)"
        )


def export(source: str | os.PathLike, out: str | os.PathLike, overwrite: bool = False) -> Path:
    """Write the Hugging Face folder `out` from a checkpoint (or a run's newest); return `out`."""
    out = Path(out)
    # `export RUN --out RUN --overwrite` would replace every checkpoint of the run with the export.
    check_output(out, [source], kind=artefacts.EXPORT, overwrite=overwrite)
    run = load_run(source, with_proposal=False)  # only the encoder and MLM head are exported
    model, meta, ckpt = run.model, run.meta, run.checkpoint
    check_cleaning_against_shards(run)
    staging = atomic.staging_dir(out)
    try:
        with atomic.full_disk_is_an_error(out, staging):
            save_file(hf_state_dict(model), str(staging / "model.safetensors"), metadata={"format": "pt"})
            (staging / "model.safetensors").chmod(atomic.FILE_MODE)  # as every other published file, not 0600
            atomic.write_json(staging / "config.json", hf_config(model))
            write_tokenizer(run.tokenizer, staging / "tokenizer.json", run.settings.preprocess)
            for name, content in tokenizer_files(run.tokenizer, model.cfg.max_position).items():
                if name == "tokenizer_config.json" and model.cfg.block != "bert":
                    content = {**content, **hf_modern_layout.TOKENIZER_CONFIG}
                atomic.write_json(staging / name, content)
            atomic.write_json(
                staging / "mapnet_export.json",
                {
                    "source": str(ckpt.resolve()),
                    "step": meta["step"],
                    "tokenizer_sha256": meta["tokenizer_sha256"],
                    "cleaning": cleaning_record(run.settings.preprocess),
                    "pretraining_seed": run.settings.train.seed,
                    "mapnet_version": __version__,
                    "created": datetime.now(UTC).isoformat(timespec="seconds"),
                },
            )
            atomic.publish_dir(staging, out, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


__all__ = [
    "export",
    "check_cleaning_against_shards",
    "cleaning_record",
    "hf_config",
    "hf_state_dict",
    "tokenizer_files",
    "write_tokenizer",
]
