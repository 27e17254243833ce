"""Named fine-tuning protocols: every preset of `finetune-glue --protocol` and `compare --glue-protocol`, in one table.

    layer = protocol_layer("small", config_path)   # {finetune key: value} to put under the config file
    settings = settings_mod.resolve(config_path, {"finetune": {**layer, **flags}}, assignments)
    tasks = PROTOCOLS["small"].tasks                 # the protocol's tasks when --task is not given

A protocol is a preset layer of `finetune` settings: it sits below the config
file and the flags (defaults < protocol < --config < flags < --set), so any
of its values can still be changed, and `--print-settings` shows the result.
A protocol may also name its tasks; `--task` replaces them.

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
  (docs/RESULTS.md, section 6): the full grid is several hours on a 2-core
  CPU, not one, and at a CPU's pretraining budget (`mini`, 2,000 steps) a
  pretrained encoder does not beat its random-init control on SST-2 or
  CoLA. The values are kept so that results stay comparable; `--task` and
  `--lrs` narrow it to what a machine can afford.

The README's protocol table states the same values; `tests/glue/test_glue_control.py`
checks that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import MapnetError


@dataclass(frozen=True)
class Protocol:
    name: str
    finetune: dict          # finetune settings the preset sets (tuples for lists)
    tasks: tuple[str, ...]  # canonical task names; () = none: --task is required
    summary: str            # one line, for --help


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("paper", {}, (), "the settings defaults: the paper's grid, 10 seeds, 10 epochs"),
    Protocol("quick", {"batch_sizes": (32,), "learning_rates": (8e-5,), "seeds": 2, "epochs": 2, "max_train": 2000}, (),
             "smoke test: bs 32, lr 8e-5, 2 seeds, 2 epochs, 2,000 train examples"),
    Protocol("small", {"batch_sizes": (32,), "learning_rates": (1e-4, 3e-4), "seeds": 3, "epochs": 3,
                       "max_train": 20000, "max_seq_len": 128},
             ("SST-2", "CoLA", "MRPC"),
             "SST-2, CoLA, MRPC; bs 32, lr {1e-4, 3e-4}, 3 seeds, 3 epochs, <= 20,000 train examples, 128 tokens"),
)}


def get(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise MapnetError(f"unknown fine-tuning protocol {name!r} (choose from {', '.join(PROTOCOLS)})")
    return PROTOCOLS[name]


def protocol_layer(name: str | None, config: Path | None = None) -> dict:
    """The protocol's finetune values that the config file does not set, as TOML-ready values (lists).

    The layer goes into `settings.resolve`'s overrides together with the flags, which are applied
    after it (`{**layer, **flags}`); leaving out the keys the config file sets puts the protocol
    below the file. `None` is the paper's protocol (no layer).
    """
    if name is None:
        return {}
    proto = get(name)
    from .. import settings as settings_mod

    file_keys = set((settings_mod.load_toml(config).get("finetune") or {})) if config is not None else set()
    return {k: list(v) if isinstance(v, tuple) else v for k, v in proto.finetune.items() if k not in file_keys}
