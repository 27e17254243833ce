"""Named presets, each a layer of settings that resolution puts under the config file and the flags.

    preset("tiny")          # the full default settings with the model sized `tiny`
    protocol("small")       # a fine-tuning protocol: its finetune values and its GLUE tasks

`settings.resolve` applies both, once: defaults < model preset < fine-tuning protocol < config files < flags <
--set, so any value a preset sets can still be changed, and `--print-settings` shows the result. Commands only name
them (`--preset`, `finetune-glue --protocol` / `--quick`, `compare --glue-protocol`).

Model presets size the encoder (paper: base, L12/H768/A12). Fine-tuning protocols set `finetune` values and may name
their tasks (`--task` replaces them): `paper`, the settings defaults (the paper's protocol); `quick`, a smoke test,
not a measurement; `small`, meant to tell small encoders apart on a 2-core CPU in an hour for `mini`, an estimate
the measurement since did not bear out (RESULTS section 6), kept so results stay comparable (`--task` and `--lrs`
narrow it to what a machine affords). Values, reasons and measurements: the protocol table of
docs/evaluation.md#fine-tuning-protocols-protocol-name, which `tests/evaluation/glue/test_glue_control.py` checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import MapnetError
from .training import ModelSettings
from .tree import Settings


# ---------------------------------------------------------------- model sizes
def _model_preset(name: str, layers: int, hidden: int, heads: int) -> Settings:
    return Settings(model=ModelSettings(preset=name, layers=layers, hidden=hidden, heads=heads))


PRESETS = {
    "tiny": lambda: _model_preset("tiny", 2, 128, 2),
    "mini": lambda: _model_preset("mini", 4, 256, 4),
    "small": lambda: _model_preset("small", 4, 512, 8),
    "medium": lambda: _model_preset("medium", 8, 512, 8),
    "base": lambda: _model_preset("base", 12, 768, 12),
}


def preset(name: str) -> Settings:
    """The full default settings with the model sized by preset `name`."""
    if name not in PRESETS:
        raise MapnetError(f"unknown preset {name!r} (choose from {', '.join(PRESETS)})")
    return PRESETS[name]()


# ---------------------------------------------------------------- fine-tuning protocols
@dataclass(frozen=True)
class Protocol:
    name: str
    finetune: dict  # finetune settings the preset sets (tuples for lists)
    tasks: tuple[str, ...]  # canonical task names; () = none: --task is required
    summary: str  # one line, for --help


PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol("paper", {"pooling": "cls"}, (), "the paper's grid, 10 seeds, 10 epochs, [CLS] pooling (BERT's)"),
        Protocol(
            "quick",
            {"batch_sizes": (32,), "learning_rates": (8e-5,), "seeds": 2, "epochs": 2, "max_train": 2000},
            (),
            "smoke test: bs 32, lr 8e-5, 2 seeds, 2 epochs, 2,000 train examples",
        ),
        Protocol(
            "small",
            {
                "batch_sizes": (32,),
                "learning_rates": (1e-4, 3e-4),
                "seeds": 3,
                "epochs": 3,
                "max_train": 20000,
                "max_seq_len": 128,
            },
            ("SST-2", "CoLA", "MRPC"),
            "SST-2, CoLA, MRPC; bs 32, lr {1e-4, 3e-4}, 3 seeds, 3 epochs, <= 20,000 train examples, 128 tokens",
        ),
    )
}


def protocol(name: str) -> Protocol:
    """The fine-tuning protocol `name` (`finetune-glue --protocol`, `compare --glue-protocol`)."""
    if name not in PROTOCOLS:
        raise MapnetError(f"unknown fine-tuning protocol {name!r} (choose from {', '.join(PROTOCOLS)})")
    return PROTOCOLS[name]
