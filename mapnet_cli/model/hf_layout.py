"""Where each mapnet weight lives in the Hugging Face class of its layout: one table per `model.norm`.

`mapnet export` writes these names and `--init-from` reads them back (the exact inverse), so the two
cannot drift apart. Post-LN is `BertForMaskedLM`; pre-LN is `RobertaPreLayerNormForMaskedLM`, the
transformers class with the same computation (LayerNorm before attention and feed-forward, a final
LayerNorm after the last layer, the embedding LayerNorm kept). Q, K and V are split from mapnet's fused
`qkv` (rows [Q; K; V]); token-type embeddings, which mapnet does not have, are zero rows on export.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import MapnetError


@dataclass(frozen=True)
class HFLayout:
    model_type: str
    architecture: str
    encoder: str  # the encoder's prefix inside the *ForMaskedLM class ("" in a bare *Model)
    layer: dict[str, str]  # mapnet module in encoder.blocks.i -> HF module in {encoder}encoder.layer.i
    encoder_top: dict[str, str]  # mapnet module -> HF module under {encoder} (outside the layers)
    head: dict[str, str]  # mapnet head module -> HF module (the *ForMaskedLM's own)
    head_bias: str  # the vocabulary bias
    decoder: str  # the vocabulary projection, tied to the word embeddings
    position_offset: bool  # RoBERTa numbers token i's position pad_token_id + 1 + i

    def position_rows_before(self, pad_id: int) -> int:
        """Rows of HF's position table before mapnet's first position."""
        return pad_id + 1 if self.position_offset else 0


LAYOUTS = {
    "post": HFLayout(
        "bert",
        "BertForMaskedLM",
        "bert.",
        {
            "attn_out": "attention.output.dense",
            "attn_norm": "attention.output.LayerNorm",
            "ffn_in": "intermediate.dense",
            "ffn_out": "output.dense",
            "ffn_norm": "output.LayerNorm",
        },
        {"encoder.emb_norm": "embeddings.LayerNorm"},
        {"head.dense": "cls.predictions.transform.dense", "head.norm": "cls.predictions.transform.LayerNorm"},
        "cls.predictions.bias",
        "cls.predictions.decoder",
        False,
    ),
    "pre": HFLayout(
        "roberta-prelayernorm",
        "RobertaPreLayerNormForMaskedLM",
        "roberta_prelayernorm.",
        {
            "attn_out": "attention.output.dense",
            "attn_norm": "attention.LayerNorm",
            "ffn_in": "intermediate.dense",
            "ffn_out": "output.dense",
            "ffn_norm": "intermediate.LayerNorm",
        },
        {"encoder.emb_norm": "embeddings.LayerNorm", "encoder.final_norm": "LayerNorm"},
        {"head.dense": "lm_head.dense", "head.norm": "lm_head.layer_norm"},
        "lm_head.bias",
        "lm_head.decoder",
        True,
    ),
}
BY_MODEL_TYPE = {layout.model_type: norm for norm, layout in LAYOUTS.items()}


def read_json_object(path: Path) -> dict:
    """A model folder's config.json, or one line naming it when it is not a JSON object."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MapnetError(f"{path} is not readable JSON ({exc}); a model folder's config.json must be") from None
    if not isinstance(value, dict):
        raise MapnetError(f"{path} is not a JSON object; a model folder's config.json must be")
    return value


def folder_kind(path: Path) -> str:
    """ "huggingface" when `path` holds a Hugging Face config.json (model_type or architectures), else "mapnet"
    (a run or checkpoint folder, checked by its own reader). Every reader of a folder a user hands us asks
    here first, so a config.json that is not a JSON object is named as such, never taken for an incomplete
    mapnet checkpoint."""
    config = Path(path) / "config.json"
    if not config.is_file():
        return "mapnet"
    c = read_json_object(config)
    return "huggingface" if "model_type" in c or "architectures" in c else "mapnet"


def leftover_weights(left: dict, encoder_prefixes: tuple[str, ...], model: str, hint: str) -> list[str]:
    """What a Hugging Face state dict holds after the weights mapnet maps were taken out of it (`left`): a one-line
    refusal when any is an encoder weight (under `encoder_prefixes`: the folder is not the model its config.json
    says), else one note naming the modules dropped (a pooler, a next-sentence head). `hint`: the likely causes."""
    modules = sorted({k.rsplit(".", 1)[0] for k in left})
    unknown = [k for k in modules if k.startswith(encoder_prefixes)]
    if unknown:
        raise MapnetError(f"model.safetensors has encoder weights {model} does not: {', '.join(unknown[:3])} ({hint})")
    return [f"not used by MLM pretraining, dropped: {', '.join(modules)}"] if modules else []


__all__ = ["HFLayout", "LAYOUTS", "BY_MODEL_TYPE", "read_json_object", "folder_kind", "leftover_weights"]
