"""Named presets, each a layer of settings that resolution puts under the config file and the flags.

    preset("tiny")          # the full default settings with the model sized `tiny`
    protocol("small")       # a fine-tuning protocol: its finetune values and its GLUE tasks

`settings.resolve` applies both, once: defaults < model preset < fine-tuning
protocol < config files < flags < --set, so any value a preset sets can still
be changed, and `--print-settings` shows the result. Commands only name them
(`--preset`, `finetune-glue --protocol` / `--quick`, `compare --glue-protocol`).

Model presets size the encoder (paper: base, L12/H768/A12).

Fine-tuning protocols set `finetune` values and may name their tasks; `--task`
replaces them.

- `paper`: the settings defaults, the paper's protocol (grid bs {16, 32} x
  LR {1e-5 ... 8e-5}, 10 seeds, 10 epochs, full data).
- `quick`: a smoke test, not a measurement (batch 32, LR 8e-5, 2 seeds,
  2 epochs, 2,000 training examples). Small encoders stay at the majority
  class under it.
- `small`: meant to tell small encoders apart on a 2-core CPU in about an
  hour for a `mini` encoder (L4/H256, 128-token inputs): SST-2, CoLA and
  MRPC; batch 32; LR grid {1e-4, 3e-4} (ELECTRA-Small's fine-tuning LR is
  3e-4 at the same width; a grid lets the random-init control find its own
  LR, so the margin over it is not inflated by a rate tuned for pretrained
  weights); 3 seeds; 3 epochs; at most 20,000 training examples per task
  (caps SST-2's 67,349 to a fixed subset; CoLA's 8,551 and MRPC's 3,668 are
  used whole); max_seq_len 128. Chosen by an estimate; measured since
  (RESULTS section 6, experiments/downstream-mini): the full grid is several hours on a 2-core
  CPU, not one, and at a CPU's pretraining budget (`mini`, 2,000 steps) a
  pretrained encoder does not beat its random-init control on SST-2 or
  CoLA. The values are kept so that results stay comparable; `--task` and
  `--lrs` narrow it to what a machine can afford.

The protocol table of docs/evaluation.md states the same values; `tests/evaluation/glue/test_glue_control.py`
checks that the two agree.
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
    finetune: dict          # finetune settings the preset sets (tuples for lists)
    tasks: tuple[str, ...]  # canonical task names; () = none: --task is required
    summary: str            # one line, for --help


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("paper", {"pooling": "cls"}, (), "the paper's grid, 10 seeds, 10 epochs, [CLS] pooling (BERT's)"),
    Protocol("quick", {"batch_sizes": (32,), "learning_rates": (8e-5,), "seeds": 2, "epochs": 2, "max_train": 2000}, (),
             "smoke test: bs 32, lr 8e-5, 2 seeds, 2 epochs, 2,000 train examples"),
    Protocol("small", {"batch_sizes": (32,), "learning_rates": (1e-4, 3e-4), "seeds": 3, "epochs": 3,
                       "max_train": 20000, "max_seq_len": 128},
             ("SST-2", "CoLA", "MRPC"),
             "SST-2, CoLA, MRPC; bs 32, lr {1e-4, 3e-4}, 3 seeds, 3 epochs, <= 20,000 train examples, 128 tokens"),
)}


def protocol(name: str) -> Protocol:
    """The fine-tuning protocol `name` (`finetune-glue --protocol`, `compare --glue-protocol`)."""
    if name not in PROTOCOLS:
        raise MapnetError(f"unknown fine-tuning protocol {name!r} (choose from {', '.join(PROTOCOLS)})")
    return PROTOCOLS[name]
