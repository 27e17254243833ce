"""What is left of a Hugging Face state dict after mapnet took the weights it maps (`hf_layout.leftover_weights`)."""

from __future__ import annotations

import pytest

from mapnet_cli.errors import MapnetError
from mapnet_cli.model.hf_layout import leftover_weights


def test_heads_mlm_does_not_use_are_dropped_with_one_note_and_encoder_weights_are_refused():
    left = {"bert.pooler.dense.weight": 0, "bert.pooler.dense.bias": 0, "cls.seq_relationship.weight": 0}
    assert leftover_weights(left, ("bert.embeddings", "bert.encoder"), "mapnet's BERT", "why") == [
        "not used by MLM pretraining, dropped: bert.pooler.dense, cls.seq_relationship"
    ]
    assert leftover_weights({}, ("bert.encoder",), "mapnet's BERT", "why") == []
    # A 13th layer in a 12-layer config (or another model's weights): refused, naming the module and the hint.
    with pytest.raises(
        MapnetError,
        match=r"^model.safetensors has encoder weights mapnet's BERT does not: "
        r"bert.encoder.layer.12.output.dense \(more layers\)$",
    ):
        leftover_weights(
            {"bert.encoder.layer.12.output.dense.weight": 0, **left},
            ("bert.embeddings", "bert.encoder"),
            "mapnet's BERT",
            "more layers",
        )
