"""One typed settings tree for every mapnet command.

Precedence, stated once: defaults < model preset < recipe < fine-tuning protocol < config file (TOML) < CLI flags.

    mapnet config show --preset tiny --config run.toml --set optim.lr=3e-4

Every section is a frozen, keyword-only dataclass; each field carries a one-line doc (`doc=` metadata), shown by
`mapnet config show --docs`. Each section validates itself and reports *all* its problems; `resolve()` joins them,
and every unknown key and type error, into one `MapnetError` line that names every bad key.

Defaults are the paper's (Chen, "Variance-reduced language pretraining via a mask proposal network", tables
"Hyperparameter for pretraining" and "Hyperparameter search spaces for fine-tuning"). Where the paper is silent or
ambiguous the choice is marked `(mapnet choice)` in the field doc and in the manual (docs/). The modules: the
sections (`data`, `masking`, `training`, `evaluation`), the tree that holds them (`tree`), the named presets
(`presets`), resolution and type checking (`resolution`), and the rows of `config show --docs` (`docs`).
"""

from __future__ import annotations

from .data import ENGINES, EngineSettings, PreprocessSettings, ShardSettings, SyntheticSettings
from .docs import field_docs
from .evaluation import FinetuneSettings, VarianceSettings
from .masking import (
    UNIT_STRATEGIES,
    AdaptiveSettings,
    FrequencySettings,
    HybridSettings,
    MapnetSettings,
    MaskingSettings,
    PmiSettings,
    SpanSettings,
    StratifiedSettings,
)
from .phases import BatchRampSettings, ShortSeqSettings, WarmupSettings
from .presets import PRESETS, PROTOCOLS, Protocol, preset, protocol
from .resolution import apply, from_dict, load_toml, parse_assignment, resolve
from .training import DistributedSettings, LoggingSettings, ModelSettings, OptimSettings, TrainSettings
from .tree import SECTIONS, Settings, flat, section_dict

__all__ = [
    "Settings",
    "PreprocessSettings",
    "SyntheticSettings",
    "ShardSettings",
    "EngineSettings",
    "ENGINES",
    "ModelSettings",
    "MaskingSettings",
    "MapnetSettings",
    "StratifiedSettings",
    "FrequencySettings",
    "AdaptiveSettings",
    "SpanSettings",
    "PmiSettings",
    "HybridSettings",
    "WarmupSettings",
    "ShortSeqSettings",
    "BatchRampSettings",
    "OptimSettings",
    "TrainSettings",
    "DistributedSettings",
    "LoggingSettings",
    "FinetuneSettings",
    "VarianceSettings",
    "UNIT_STRATEGIES",
    "SECTIONS",
    "section_dict",
    "flat",
    "PRESETS",
    "preset",
    "PROTOCOLS",
    "Protocol",
    "protocol",
    "resolve",
    "apply",
    "from_dict",
    "load_toml",
    "parse_assignment",
    "field_docs",
]
