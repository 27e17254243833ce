"""Continued pretraining: start a run from an existing encoder instead of random weights.

    mapnet pretrain shards/ --out runs/dapt --init-from hf/bert-base-uncased --masking mapnet
    mapnet pretrain shards/ --out runs/more --init-from runs/base          # a mapnet run's newest checkpoint
    mapnet shard prep/ --out shards/ --init-from hf/bert-base-uncased      # refuse a foreign tokenizer early

SOURCE is a mapnet checkpoint or run folder, or a local Hugging Face folder (`config.json` + `model.safetensors`:
BertForMaskedLM / BertForPreTraining / BertModel, RobertaPreLayerNormForMaskedLM — what `mapnet export` writes for a
pre-LN model — or ModernBertForMaskedLM / ModernBertModel with global attention in every layer,
`model/hf_modern_layout.py`; never a download, never a pickle). Only the weights come from SOURCE: optimizer,
schedule, step and masking strategy start fresh (`model.init_from` is a setting, so `--resume` restores the
continued run's own checkpoint, never SOURCE). The mapping is the inverse of `mapnet export` (fused query/key/value;
token-type row 0 added to the positions: the same logits); the size is SOURCE's, and a preset or size that disagrees
is an error (`source_settings`). What is dropped, kept and refused:
docs/pretraining.md#continued-pretraining-init-from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .. import settings as settings_mod
from ..atomic import sha256_file
from ..errors import MapnetError
from ..model import hf_modern_layout
from ..model.hf_layout import BY_MODEL_TYPE, LAYOUTS, folder_kind, leftover_weights
from ..model.hf_layout import read_json_object as _read_json
from ..model.widths import default_intermediate

if TYPE_CHECKING:  # annotations only: torch is imported where the weights are read, not at import
    import torch

# The architecture settings SOURCE decides; dropout and init_std stay the run's (training choices).
ARCH = ("layers", "hidden", "heads", "intermediate", "max_position", "layer_norm_eps", "norm", "block", "rope_theta")
# What a checkpoint or Hugging Face BERT folder without model.block holds: the BERT block.
BERT_BLOCK = {"block": "bert", "rope_theta": 10_000.0}
HF_ARCH = {
    "layers": "num_hidden_layers",
    "hidden": "hidden_size",
    "heads": "num_attention_heads",
    "intermediate": "intermediate_size",
    "max_position": "max_position_embeddings",
}


@dataclass
class Source:
    """What --init-from points at, read without loading the weights."""

    path: Path  # the checkpoint folder (a run resolves to its newest) or the HF folder
    kind: str  # "mapnet" | "huggingface"
    arch: dict  # ARCH values plus vocab_size
    weights: Path
    tokenizer: Path
    config_sha256: str
    tensor_names: tuple[str, ...] = ()  # a Hugging Face SOURCE's, read from its checked safetensors header
    role: str = "--init-from"  # how the user gave it, for messages ("" for a command's argument)

    @property
    def where(self) -> str:
        return f"{self.role} {self.path}".strip()

    def record(self, notes: list[str]) -> dict:
        """For run.json: where the start came from, the hashes that pin it, and what was folded or dropped."""
        return {
            "path": str(self.path.resolve()),
            "kind": self.kind,
            "config_sha256": self.config_sha256,
            "weights_sha256": sha256_file(self.weights),
            "tokenizer_sha256": sha256_file(self.tokenizer),
            "notes": list(notes),
        }


# ---------------------------------------------------------------- reading SOURCE
def open_source(path: str | Path, role: str = "--init-from") -> Source:
    """The one checked reader of a model folder a user hands us (`--init-from`, `blimp`'s exported folders):
    config.json, the safetensors header (so a truncated file is one line here, before any work) and the
    tokenizer's presence. `role` is how the user gave the folder, for the messages ("" for an argument)."""
    path = Path(path)
    where = f"{role} {path}".strip()
    if not path.is_dir():
        raise MapnetError(f"{where}: no such folder (a mapnet run/checkpoint or a local Hugging Face BERT folder)")
    if folder_kind(path) == "huggingface":
        return _hf_source(path, _read_json(path / "config.json"), role)
    return _mapnet_source(path)


def safetensors_names(path: Path) -> tuple[str, ...]:
    """The tensor names in a safetensors file's header, read without loading the weights; a truncated, empty or
    garbage file is one line (safetensors checks that the header's offsets cover the file exactly)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), "np") as f:
            return tuple(f.keys())
    except (SafetensorError, OSError, ValueError) as exc:
        raise MapnetError(f"{path} is not a readable safetensors file ({exc}); truncated or corrupt?") from None


def _mapnet_source(path: Path) -> Source:
    from ..model import checkpoint
    from .run_loader import load_run

    run = load_run(path, weights=False)  # found and verified against its manifest; weights come later (load_into)
    ckpt, m = (
        run.checkpoint,
        {"norm": "post", **BERT_BLOCK, **run.meta["model"]},
    )  # checkpoints before model.norm are post-LN
    arch = {k: m[k] for k in ARCH} | {"vocab_size": m["vocab_size"]}
    return Source(
        ckpt,
        "mapnet",
        arch,
        ckpt / checkpoint.WEIGHTS,
        ckpt / checkpoint.TOKENIZER,
        sha256_file(ckpt / checkpoint.CONFIG),
    )


def _hf_source(path: Path, c: dict, role: str) -> Source:
    where = f"{role} {path}".strip()
    kind = c.get("model_type")
    arch = (
        hf_modern_layout.arch_from_config(c, where)
        if kind == hf_modern_layout.MODEL_TYPE
        else _bert_arch(c, where, kind)
    )
    weights = path / "model.safetensors"
    if not weights.is_file():
        other = [p.name for p in path.glob("*.bin")] + [p.name for p in path.glob("*.safetensors.index.json")]
        hint = (
            f" (found {', '.join(other)}: mapnet never unpickles, and reads one safetensors file; "
            "re-save with save_pretrained(..., safe_serialization=True))"
            if other
            else ""
        )
        raise MapnetError(f"{where} has no model.safetensors{hint}")
    tokenizer = path / "tokenizer.json"
    if not tokenizer.is_file():
        raise MapnetError(
            f"{where} has no tokenizer.json: mapnet reads a model's vocabulary from it, to check shards "
            "against it and to encode text (AutoTokenizer.from_pretrained(folder).save_pretrained(folder) "
            "writes one, offline)"
        )
    return Source(
        path,
        "huggingface",
        arch,
        weights,
        tokenizer,
        sha256_file(path / "config.json"),
        safetensors_names(weights),
        role,
    )


def _bert_arch(c: dict, where: str, kind) -> dict:
    """ARCH values, vocab_size and pad_id of a BERT or pre-LN RoBERTa config.json; what mapnet's BERT block
    cannot compute is refused in one line."""
    if kind not in BY_MODEL_TYPE:
        raise MapnetError(
            f"{where} is a {kind or 'unknown'} model (architectures {c.get('architectures')}); "
            "mapnet's encoder is BERT's: model_type 'bert' (post-LN) or 'roberta-prelayernorm' (pre-LN), "
            "or ModernBERT's (modernbert: model.block = 'modern') only"
        )
    unsupported = [
        f"{k} = {c[k]!r}"
        for k, ok in (("position_embedding_type", "absolute"), ("hidden_act", "gelu"))
        if c.get(k, ok) != ok
    ]
    unsupported += [f"{k} = true" for k in ("is_decoder", "add_cross_attention") if c.get(k)]
    if unsupported:
        raise MapnetError(
            f"{where}: {', '.join(unsupported)} is not the BERT mapnet trains (absolute positions, "
            "exact GELU, encoder only)"
        )
    missing = [k for k in (*HF_ARCH.values(), "vocab_size") if not isinstance(c.get(k), int)]
    if missing:
        raise MapnetError(f"{where}: config.json lacks {', '.join(missing)}")
    arch = {ours: c[theirs] for ours, theirs in HF_ARCH.items()} | BERT_BLOCK
    arch |= {
        "layer_norm_eps": float(c.get("layer_norm_eps", 1e-12)),
        "vocab_size": c["vocab_size"],
        "norm": BY_MODEL_TYPE[kind],
    }
    pad = c.get("pad_token_id")
    arch["pad_id"] = pad if isinstance(pad, int) else 0 if kind == "bert" else 1  # transformers' defaults
    # RoBERTa numbers positions from pad_token_id + 1: the rows before are never used.
    arch["max_position"] -= LAYOUTS[arch["norm"]].position_rows_before(arch["pad_id"])
    if arch["max_position"] < 1:
        raise MapnetError(
            f"{where}: max_position_embeddings {c['max_position_embeddings']} leaves no position "
            f"after pad_token_id {arch['pad_id']}"
        )
    return arch


# ---------------------------------------------------------------- settings: the size is SOURCE's
def resolve(config, overrides: dict, assignments, **kw):
    """`settings.resolve` (defaults < preset < config < flags), with the model sized by SOURCE when
    model.init_from is given anywhere: SOURCE's sizes replace defaults < preset, and a preset or size
    the user gave that disagrees is refused first (one line naming all), before it could be mistaken
    for another problem (model.hidden not divisible by the default heads)."""
    paths = [] if config is None else [config] if isinstance(config, (str, Path)) else list(config)
    given = given_model_values(paths, overrides.get("model", {}), assignments)
    if not given.get("init_from"):
        return settings_mod.resolve(config, overrides, assignments, **kw)
    source = open_source(given["init_from"])
    refuse_conflicts(source, given)
    return settings_mod.resolve(config, overrides, assignments, base=sized_by(source), **kw)


def given_model_values(config: list, flags: dict, assignments) -> dict:
    """The model.* values the user gave: a config file's [model] table, a flag, a --set (later wins)."""
    given: dict = {}
    for path in config:
        table = settings_mod.load_toml(path).get("model")
        given.update(table if isinstance(table, dict) else {})
    given.update({k: v for k, v in flags.items() if v is not None})
    for text in assignments:
        try:
            section, key, value = settings_mod.parse_assignment(text)
        except MapnetError:
            continue  # `settings.resolve` names it, beside every other problem
        if section == "model":
            given[key] = value
    return given


def _effective(model, block: str) -> tuple:
    """The size `model` (settings or SOURCE's values) gives a `block` encoder: a preset names a size, not a block."""
    return (
        model["layers"],
        model["hidden"],
        model["heads"],
        model["intermediate"] or default_intermediate(model["hidden"], block),
    )


def _preset_arch(name: str) -> dict:
    return settings_mod.section_dict(settings_mod.preset(name).model)


def refuse_conflicts(source: Source, given: dict) -> None:
    arch, conflicts = source.arch, []
    name = given.get("preset")
    if name in settings_mod.PRESETS and _effective(_preset_arch(name), arch["block"]) != _effective(
        arch, arch["block"]
    ):
        p = _preset_arch(name)
        conflicts.append(f"--preset {name} (L{p['layers']}/H{p['hidden']}/A{p['heads']})")
    for key in ARCH:
        if key in given and given[key] != arch[key]:
            if (
                key == "intermediate"
                and (given[key] or default_intermediate(arch["hidden"], arch["block"])) == arch["intermediate"]
            ):
                continue  # 0 means the default width (4H for BERT's block), which SOURCE has
            conflicts.append(f"model.{key} = {given[key]!r}")
    if conflicts:
        size = (
            f"L{arch['layers']}/H{arch['hidden']}/A{arch['heads']}, intermediate {arch['intermediate']}, "
            f"max_position {arch['max_position']}"
        )
        raise MapnetError(
            f"--init-from {source.path} sets the model size ({size}); {', '.join(conflicts)} "
            "disagrees: drop it (the size comes from SOURCE)"
        )


def sized_by(source: Source):
    """Default settings with the model sized by SOURCE, named by the preset it matches, else "custom"."""
    arch = source.arch
    values = {k: arch[k] for k in ARCH}
    values["intermediate"] = (
        0 if arch["intermediate"] == default_intermediate(arch["hidden"], arch["block"]) else arch["intermediate"]
    )
    match = [
        n for n in settings_mod.PRESETS if _effective(_preset_arch(n), arch["block"]) == _effective(arch, arch["block"])
    ]
    values["preset"] = match[0] if match else "custom"
    return settings_mod.apply(settings_mod.Settings(), {"model": values}, f"--init-from {source.path}")


# ---------------------------------------------------------------- vocabulary
def _encoding_identity(path: Path) -> str:
    """What decides what a token id means: the model (its vocabulary, and merges for BPE) and the added/special
    tokens' (id, content). The encoder pipeline around them is left out: `mapnet export` adds a [CLS]/[SEP]
    post-processor, the run's cleaning (normalizers and pre-tokenizers) and lstrip on [MASK], and `shard` encodes
    without specials, truncation or padding, so none of that makes an exported tokenizer foreign."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        model = dict(doc["model"])
        if isinstance(model.get("merges"), list):  # tokenizers writes "a b" (older) or ["a", "b"] (newer)
            model["merges"] = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in model["merges"]]
        added = sorted((int(t["id"]), str(t["content"])) for t in doc.get("added_tokens") or [])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MapnetError(
            f"{path} is not a readable tokenizer.json ({type(exc).__name__}: {exc}); truncated or corrupt?"
        ) from None
    return json.dumps({"model": model, "added_tokens": added}, sort_keys=True)


def same_encoding(a: Path, b: Path) -> bool:
    """Whether tokenizer files `a` and `b` give every text the same ids (the same bytes, or the same vocabulary,
    merges and special tokens: `_encoding_identity`)."""
    return sha256_file(a) == sha256_file(b) or _encoding_identity(a) == _encoding_identity(b)


def check_tokenizer(source: Source, tokenizer: Path, what: str) -> None:
    """Refuse `tokenizer` (the shards' or a preprocessed corpus's) unless it encodes as SOURCE's does."""
    theirs, ours = sha256_file(source.tokenizer), sha256_file(tokenizer)
    if same_encoding(source.tokenizer, tokenizer):
        return
    raise MapnetError(
        f"{what} was encoded with tokenizer {ours}, but --init-from {source.path} uses tokenizer {theirs}: "
        f"token ids would mean other words; preprocess the text with --tokenizer {source.tokenizer} "
        "and shard it again"
    )


# ---------------------------------------------------------------- weights
def load_into(source: Source, model) -> list[str]:
    """Copy SOURCE's weights into `model` (a BertForMLM of SOURCE's size, already seeded-initialised);
    return notes on what was folded, dropped or initialised."""
    if model.cfg.vocab_size != source.arch["vocab_size"]:
        raise MapnetError(
            f"{source.where} has a {source.arch['vocab_size']}-token vocabulary, the shards' "
            f"tokenizer {model.cfg.vocab_size}: the tokenizer and the embedding table must match"
        )
    if source.kind == "mapnet":
        from ..model import checkpoint

        checkpoint.load_weights(source.weights, {"": model})  # MAP-Net's weights, if any, stay behind
        return []
    tensors = _read_safetensors(source.weights)
    try:
        if source.arch["block"] == "modern":
            state, notes = hf_modern_layout.hf_to_mapnet(tensors, model.cfg.layers)
        else:
            state, notes = hf_to_mapnet(
                tensors, model.cfg.layers, model.cfg.hidden, model.cfg.norm, source.arch["pad_id"]
            )
    except MapnetError as exc:  # "model.safetensors lacks ...": which folder's, as the user gave it
        raise MapnetError(f"{source.where}: {exc}") from None
    if not any(k.startswith("head.") for k in state):
        for name, t in model.state_dict().items():
            if name.startswith("head."):
                state[name] = t
    wanted = model.state_dict()
    missing = sorted(set(wanted) - set(state))
    if missing:
        raise MapnetError(f"{source.where}: model.safetensors lacks {len(missing)} weights (e.g. {missing[0]})")
    for k, t in state.items():
        if t.shape != wanted[k].shape:
            raise MapnetError(
                f"{source.where}: {k} has shape {tuple(t.shape)}, config.json implies {tuple(wanted[k].shape)}"
            )
    model.load_state_dict({k: t.to(wanted[k].dtype) for k, t in state.items()}, strict=True)
    return notes


def _read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as exc:
        raise MapnetError(f"{path} is not a readable safetensors file ({exc}); truncated or corrupt?") from None
    # Checkpoints converted from TensorFlow name LayerNorm parameters gamma/beta; transformers renames them on load.
    return {
        k.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias"): v
        for k, v in tensors.items()
    }


def has_mlm_head(source: Source) -> bool:
    """Whether a Hugging Face SOURCE holds an MLM head (a ...ForMaskedLM, not a bare BertModel), read from the
    safetensors header alone, so an evaluator can refuse the folder before it scores anything."""
    names = source.tensor_names or safetensors_names(source.weights)
    if source.arch["block"] == "modern":
        return hf_modern_layout.has_mlm_head(names)
    prefix = _mlm_head_prefix(LAYOUTS[source.arch["norm"]])
    return any(k.startswith(prefix) for k in names)


def _mlm_head_prefix(layout) -> str:
    """The key prefix of a *ForMaskedLM's MLM head ("cls.predictions.", "lm_head."): a state dict with a key under
    it has a head (`has_mlm_head` and `hf_to_mapnet` decide it the same way)."""
    return layout.head_bias.rsplit(".", 1)[0] + "."


def hf_to_mapnet(
    sd: dict[str, torch.Tensor], layers: int, hidden: int, norm: str = "post", pad_id: int = 0
) -> tuple[dict[str, torch.Tensor], list[str]]:
    """HF names -> mapnet's (the inverse of `export.hf_state_dict`, `model/hf_layout.py`'s tables), with
    notes. No MLM head in `sd` (a BertModel) gives no head.* keys here and a note saying the head is
    initialised."""
    import torch

    layout = LAYOUTS[norm]
    if f"{layout.encoder}embeddings.word_embeddings.weight" in sd:
        enc = layout.encoder
    elif "embeddings.word_embeddings.weight" in sd:
        enc = ""  # BertModel.save_pretrained writes its keys without the "bert." prefix
    else:
        raise MapnetError("model.safetensors holds no BERT encoder (no embeddings.word_embeddings.weight)")
    sd, notes = dict(sd), []
    take = lambda key: sd.pop(key)  # noqa: E731  every weight used is removed: what is left was not mapped
    positions = take(f"{enc}embeddings.position_embeddings.weight").float()[layout.position_rows_before(pad_id) :]
    out = {
        "encoder.tok_embeddings.weight": take(f"{enc}embeddings.word_embeddings.weight"),
        "encoder.pos_embeddings.weight": positions,
    }
    types = sd.pop(f"{enc}embeddings.token_type_embeddings.weight", None)
    if types is not None:
        rest = f"; rows 1..{len(types) - 1} (segment B of sentence pairs) dropped" if len(types) > 1 else ""
        if torch.count_nonzero(types[0]):
            # HF adds word + type + position before the LayerNorm; mapnet feeds every token as segment 0.
            out["encoder.pos_embeddings.weight"] = out["encoder.pos_embeddings.weight"] + types[0].float()
            notes.append(
                f"token-type embeddings: row 0 folded into the position embeddings (same logits for segment 0){rest}"
            )
        else:
            notes.append(f"token-type embeddings: row 0 is zero (a mapnet export), dropped{rest}")
    sd.pop(f"{enc}embeddings.position_ids", None)  # a buffer older transformers saved
    modules = {mine: enc + theirs for mine, theirs in layout.encoder_top.items()}
    for i in range(layers):
        hf, ours = f"{enc}encoder.layer.{i}.", f"encoder.blocks.{i}."
        for part in ("weight", "bias"):
            out[f"{ours}qkv.{part}"] = torch.cat(
                [_need(sd, f"{hf}attention.self.{n}.{part}") for n in ("query", "key", "value")]
            )
        modules |= {ours + mine: hf + theirs for mine, theirs in layout.layer.items()}
    if any(k.startswith(_mlm_head_prefix(layout)) for k in sd):
        modules |= layout.head
        bias, decoder_bias = sd.pop(layout.head_bias, None), sd.pop(f"{layout.decoder}.bias", None)
        if bias is None and decoder_bias is None:
            raise MapnetError(f"model.safetensors lacks {layout.head_bias}")
        out["head.bias"] = bias if bias is not None else decoder_bias  # the same tensor, tied, in transformers
        decoder = sd.pop(f"{layout.decoder}.weight", None)
        if decoder is not None and not torch.equal(decoder, out["encoder.tok_embeddings.weight"]):
            raise MapnetError(
                "SOURCE's MLM decoder is not tied to its word embeddings; mapnet's is (tie_word_embeddings)"
            )
    else:
        notes.append(
            "no MLM head in SOURCE (a BertModel): the head's transform and bias are initialised as BERT's "
            "(from train.seed); the decoder is the word embedding matrix, as always"
        )
    for mine, theirs in modules.items():
        for part in ("weight", "bias"):
            out[f"{mine}.{part}"] = _need(sd, f"{theirs}.{part}")
    # what is left: bert.pooler.dense, cls.seq_relationship (dropped, with a note), or encoder weights (refused)
    notes += leftover_weights(
        sd, (f"{enc}embeddings", f"{enc}encoder"), "mapnet's BERT", "more layers than config.json says, or not a BERT"
    )
    return {k: v.float() for k, v in out.items()}, notes


def _need(sd: dict, key: str) -> torch.Tensor:
    if key not in sd:
        raise MapnetError(f"model.safetensors lacks {key}")
    return sd.pop(key)


# ---------------------------------------------------------------- a run's start
def start_model(cfg, seed: int, source: Source | None = None):
    """The MLM model exactly as a run starts it: BERT's init from `seed`, then SOURCE's weights if given.
    Returns (model, notes). `train.Run` and `compare`'s fairness hash both build it here."""
    import torch

    from ..model.bert import BertForMLM

    torch.manual_seed(seed)  # identical initial weights on every rank (and a BertModel's head)
    model = BertForMLM(cfg)
    return model, (load_into(source, model) if source is not None else [])


__all__ = [
    "Source",
    "open_source",
    "safetensors_names",
    "resolve",
    "given_model_values",
    "refuse_conflicts",
    "sized_by",
    "check_tokenizer",
    "load_into",
    "hf_to_mapnet",
    "start_model",
]
