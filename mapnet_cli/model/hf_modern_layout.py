"""The modern block (`model.block = "modern"`) in Hugging Face's `ModernBertForMaskedLM`: names, config, both ways.

`mapnet export` writes a modern model with `hf_config` and `hf_state_dict`; `--init-from` and `mapnet blimp`
read such a folder back with `arch_from_config` and `hf_to_mapnet` (the exact inverse). Every weight maps one
to one: ModernBERT fuses Q, K and V as mapnet does (`Wqkv`, rows [Q; K; V]) and splits its GLU input as mapnet
does (`mlp.Wi`, rows [input; gate]); its first layer has no attention LayerNorm, as mapnet's has none; the
decoder is tied to the token embeddings, so only the embedding is stored. ModernBERT's local-attention layers
are switched off (every layer global, as mapnet's): a ModernBERT folder with sliding-window layers, biases, or
another activation is refused in one line, as is a mapnet model ModernBERT cannot express.
"""

from __future__ import annotations

from ..errors import MapnetError
from .hf_layout import leftover_weights

MODEL_TYPE = "modernbert"
ARCHITECTURE = "ModernBertForMaskedLM"
# ModernBERT's forward takes no token_type_ids; its own tokenizer leaves them out.
TOKENIZER_CONFIG = {"model_input_names": ["input_ids", "attention_mask"]}
HEAD_PREFIXES = ("head.", "decoder.")  # a ModernBertForMaskedLM's MLM head (a bare ModernBertModel has none)

_TOP = {
    "encoder.tok_embeddings.weight": "embeddings.tok_embeddings.weight",
    "encoder.emb_norm.weight": "embeddings.norm.weight",
    "encoder.final_norm.weight": "final_norm.weight",
}
_LAYER = {
    "attn_norm": "attn_norm",
    "qkv": "attn.Wqkv",
    "attn_out": "attn.Wo",
    "ffn_norm": "mlp_norm",
    "ffn_in": "mlp.Wi",
    "ffn_out": "mlp.Wo",
}
_HEAD = {"head.dense.weight": "head.dense.weight", "head.norm.weight": "head.norm.weight", "head.bias": "decoder.bias"}


def hf_names(layers: int, prefix: str = "model.") -> dict[str, str]:
    """mapnet parameter name -> ModernBertForMaskedLM's, for every encoder weight (`prefix` "": a bare
    ModernBertModel's names); the head's are `_HEAD`."""
    names = {mine: prefix + theirs for mine, theirs in _TOP.items()}
    for i in range(layers):
        for mine, theirs in _LAYER.items():
            if not (i == 0 and mine == "attn_norm"):  # Identity in ModernBERT's layer 0, absent in mapnet's
                names[f"encoder.blocks.{i}.{mine}.weight"] = f"{prefix}layers.{i}.{theirs}.weight"
    return names


def unexpressible(cfg) -> list[str]:
    """What of the mapnet config `cfg` ModernBertForMaskedLM cannot express (empty: it can)."""
    out = []
    if cfg.block != "modern":
        out.append(f"the {cfg.block} block (learned positions, GELU feed-forward, biases)")
    if cfg.norm != "pre":
        out.append(f"{cfg.norm}-LN blocks")
    return out


def hf_config(cfg) -> dict:
    """config.json of the ModernBertForMaskedLM with `cfg`'s computation: every layer global, no biases but
    the decoder's, exact GELU, mapnet's rotary base; dropout where mapnet's modern block has it."""
    missing = unexpressible(cfg)
    if missing:
        raise MapnetError(
            f"{ARCHITECTURE} cannot express {' and '.join(missing)}: only model.block = 'modern' "
            "(pre-LN) exports as ModernBERT"
        )
    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    return {
        "architectures": [ARCHITECTURE],
        "model_type": MODEL_TYPE,
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden,
        "num_hidden_layers": cfg.layers,
        "num_attention_heads": cfg.heads,
        "intermediate_size": cfg.intermediate,
        "hidden_activation": "gelu",
        "classifier_activation": "gelu",
        "max_position_embeddings": cfg.max_position,
        "initializer_range": cfg.init_std,
        "norm_eps": cfg.layer_norm_eps,
        "norm_bias": False,
        "attention_bias": False,
        "mlp_bias": False,
        "classifier_bias": False,
        "decoder_bias": True,
        "embedding_dropout": cfg.dropout,
        "mlp_dropout": cfg.dropout,
        "attention_dropout": cfg.attention_dropout,
        # Global attention in every layer: `layer_types` (transformers 5), `global_attn_every_n_layers` (4.x).
        "layer_types": ["full_attention"] * cfg.layers,
        "global_attn_every_n_layers": 1,
        "rope_parameters": {"full_attention": dict(rope), "sliding_attention": dict(rope)},
        "global_rope_theta": cfg.rope_theta,
        "local_rope_theta": cfg.rope_theta,
        "pad_token_id": cfg.pad_id,
        "bos_token_id": None,
        "eos_token_id": None,
        "cls_token_id": None,
        "sep_token_id": None,
        "tie_word_embeddings": True,
        "sparse_prediction": False,
        "torch_dtype": "float32",
    }


def hf_state_dict(model) -> dict:
    """A modern `BertForMLM`'s weights under ModernBertForMaskedLM's names (the tied decoder left out)."""
    sd = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    names = hf_names(model.cfg.layers) | _HEAD
    unmapped = sorted(set(sd) - set(names))
    if unmapped:  # a weight left behind would change the logits; never silently
        raise MapnetError(f"{ARCHITECTURE} has no place for {', '.join(unmapped[:3])}")
    return {theirs: sd[mine].contiguous().clone() for mine, theirs in names.items()}


def _layer_types(c: dict) -> list:
    if isinstance(c.get("layer_types"), list):
        return c["layer_types"]
    every = c.get("global_attn_every_n_layers", 3)  # transformers' default: two local layers per global one
    return ["sliding_attention" if i % every else "full_attention" for i in range(c.get("num_hidden_layers", 0))]


def _rope_theta(c: dict) -> tuple[float | None, str | None]:
    """(the global layers' rotary base, or None with what is wrong)."""
    params = c.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("full_attention"), dict):
        full = params["full_attention"]
        if full.get("rope_type", "default") != "default":
            return None, f"rope_type {full['rope_type']!r}"
        return float(full.get("rope_theta", c.get("global_rope_theta", 160_000.0))), None
    if c.get("rope_scaling"):
        return None, f"rope_scaling {c['rope_scaling']!r}"
    return float(c.get("global_rope_theta", 160_000.0)), None  # transformers' default for global layers


def arch_from_config(c: dict, where: str) -> dict:
    """mapnet's architecture values (model settings plus vocab_size and pad_id) from a ModernBertForMaskedLM
    config.json; what mapnet's modern block cannot compute is refused in one line naming all of it."""
    problems = [f"{k} = {c[k]!r}" for k in ("hidden_activation", "classifier_activation") if c.get(k, "gelu") != "gelu"]
    problems += [f"{k} = true" for k in ("attention_bias", "mlp_bias", "norm_bias", "classifier_bias") if c.get(k)]
    if "sliding_attention" in _layer_types(c):
        problems.append(
            f"local (sliding-window) attention layers ({_layer_types(c).count('sliding_attention')} "
            "of them; mapnet attends globally in every layer)"
        )
    theta, rope_problem = _rope_theta(c)
    problems += [rope_problem] if rope_problem else []
    if c.get("tie_word_embeddings") is False:
        problems.append("tie_word_embeddings = false")
    if problems:
        raise MapnetError(
            f"{where}: {', '.join(problems)} is not the modern block mapnet trains (global attention, "
            "exact GELU, no biases but the decoder's, default RoPE, tied decoder)"
        )
    sizes = {
        "layers": "num_hidden_layers",
        "hidden": "hidden_size",
        "heads": "num_attention_heads",
        "intermediate": "intermediate_size",
        "max_position": "max_position_embeddings",
        "vocab_size": "vocab_size",
    }
    missing = [theirs for theirs in sizes.values() if not isinstance(c.get(theirs), int)]
    if missing:
        raise MapnetError(f"{where}: config.json lacks {', '.join(missing)}")
    pad = c.get("pad_token_id")
    return {ours: c[theirs] for ours, theirs in sizes.items()} | {
        "layer_norm_eps": float(c.get("norm_eps", 1e-5)),
        "norm": "pre",
        "block": "modern",
        "rope_theta": theta,
        "pad_id": pad if isinstance(pad, int) else 0,
    }


def has_mlm_head(keys) -> bool:
    return any(k.startswith(HEAD_PREFIXES) for k in keys)


def hf_to_mapnet(sd: dict, layers: int) -> tuple[dict, list[str]]:
    """ModernBertForMaskedLM (or ModernBertModel) names -> mapnet's, with notes; the inverse of `hf_state_dict`.
    No head in `sd` gives no head.* keys (the caller keeps its initialised head) and a note."""
    import torch

    sd, notes = dict(sd), []
    prefix = "model." if "model.embeddings.tok_embeddings.weight" in sd else ""
    if f"{prefix}embeddings.tok_embeddings.weight" not in sd:
        raise MapnetError("model.safetensors holds no ModernBERT encoder (no embeddings.tok_embeddings.weight)")
    names, head = hf_names(layers, prefix), has_mlm_head(sd)
    if head:
        names |= {mine: theirs for mine, theirs in _HEAD.items() if theirs != "decoder.bias" or theirs in sd}
    else:
        notes.append(
            "no MLM head in SOURCE (a ModernBertModel): the head is initialised (from train.seed); "
            "the decoder is the token embedding matrix, as always"
        )
    missing = [theirs for theirs in names.values() if theirs not in sd]
    if missing:
        raise MapnetError(
            f"model.safetensors lacks {missing[0]}" + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
        )
    out = {mine: sd.pop(theirs) for mine, theirs in names.items()}
    if head and "head.bias" not in out:
        out["head.bias"] = torch.zeros(out["encoder.tok_embeddings.weight"].shape[0])
        notes.append("no decoder bias in SOURCE (decoder_bias = false): mapnet's vocabulary bias starts at zero")
    decoder = sd.pop("decoder.weight", None)
    if decoder is not None and not torch.equal(decoder, out["encoder.tok_embeddings.weight"]):
        raise MapnetError("SOURCE's MLM decoder is not tied to its token embeddings; mapnet's is (tie_word_embeddings)")
    notes += leftover_weights(
        sd,
        (f"{prefix}embeddings", f"{prefix}layers", f"{prefix}final_norm"),
        "mapnet's modern block",
        "biases, more layers than config.json says, or not a ModernBERT",
    )
    return {k: v.float() for k, v in out.items()}, notes


__all__ = [
    "MODEL_TYPE",
    "ARCHITECTURE",
    "TOKENIZER_CONFIG",
    "hf_names",
    "unexpressible",
    "hf_config",
    "hf_state_dict",
    "arch_from_config",
    "has_mlm_head",
    "hf_to_mapnet",
]
