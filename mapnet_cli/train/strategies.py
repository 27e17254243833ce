"""The strategy hookup: `masking.strategy` -> the object that masks, weights and scores a run's batches.

A strategy object (`masking/strategy.py`: uniform, stratified, frequency;
`masking/adaptive.py`: the AMLM table; `masking/hybrid.py`: masked and causal rows; the
unit strategies of `masking/units.py` and `masking/pmi_units.py`;
`masking/mapnet/training.py`: `MapnetTraining`) owns what
differs — how a micro-batch is masked and weighted, the modules DDP wraps and
the checkpoint stores, the loss of a step, extra metrics — so the loop in
`loop.py` is the same for all of them.
"""

from __future__ import annotations

from .. import distributed
from ..masking.adaptive import AdaptiveTraining
from ..masking.hybrid import HybridTraining
from ..masking.mapnet.training import MapnetTraining
from ..masking.pmi_units import PmiTraining
from ..masking.strategy import FrequencyTraining, Strategy, StratifiedTraining, UniformTraining
from ..masking.units import SpanTraining, WholeWordTraining
from ..model.bert import BertForMLM

STRATEGIES = {
    "uniform": UniformTraining,
    "stratified": StratifiedTraining,
    "frequency": FrequencyTraining,
    "adaptive": AdaptiveTraining,
    "mapnet": MapnetTraining,
    "whole-word": WholeWordTraining,
    "span": SpanTraining,
    "pmi": PmiTraining,
    "hybrid": HybridTraining,
}


def training_strategy(settings, model: BertForMLM, data, info: distributed.DistInfo) -> Strategy:
    """The strategy object for `settings.masking.strategy`; call it right after building the encoder
    (a MAP-Net run then starts from the same encoder weights as a uniform run with the same seed)."""
    return STRATEGIES[settings.masking.strategy](settings, model, data, info)


__all__ = ["STRATEGIES", "training_strategy"]
