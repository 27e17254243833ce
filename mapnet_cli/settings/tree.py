"""The whole settings tree: one section per concern, and the checks that span sections."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

import tomli_w

from ..errors import MapnetError
from .data import EngineSettings, PreprocessSettings, ShardSettings, SyntheticSettings
from .evaluation import FinetuneSettings, VarianceSettings
from .field import declared_range_problems
from .masking import MaskingSettings
from .phases import span_problems
from .training import DistributedSettings, LoggingSettings, ModelSettings, OptimSettings, TrainSettings


@dataclass(frozen=True, kw_only=True)
class Settings:
    preprocess: PreprocessSettings = field(default_factory=PreprocessSettings)
    synthetic: SyntheticSettings = field(default_factory=SyntheticSettings)
    shard: ShardSettings = field(default_factory=ShardSettings)
    engine: EngineSettings = field(default_factory=EngineSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    masking: MaskingSettings = field(default_factory=MaskingSettings)
    optim: OptimSettings = field(default_factory=OptimSettings)
    train: TrainSettings = field(default_factory=TrainSettings)
    distributed: DistributedSettings = field(default_factory=DistributedSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    finetune: FinetuneSettings = field(default_factory=FinetuneSettings)
    variance: VarianceSettings = field(default_factory=VarianceSettings)

    def problems(self, ignored: bool = True) -> list[str]:
        """Every bad setting; `ignored=False`: not the masking settings the strategy would ignore (`compare`'s base)."""
        sections = [getattr(self, f.name) for f in fields(self)]
        out = [p for sec in sections for p in (sec.problems(ignored) if sec is self.masking else sec.problems())]
        out += [p for f in fields(self) for p in declared_range_problems(f.name, getattr(self, f.name))]
        if self.shard.max_seq_len > self.model.max_position:
            out.append(
                f"shard.max_seq_len ({self.shard.max_seq_len}) exceeds model.max_position ({self.model.max_position})"
            )
        m = self.masking
        if m.strategy == "stratified" and self.train.batch_size % m.stratified.copies:
            out.append(
                f"train.batch_size ({self.train.batch_size}) must be divisible by masking.stratified.copies "
                f"({m.stratified.copies})"
            )
        out += self._ramp_problems()
        if not 0.0 < self.train.eval_mask_prob < 1.0:
            out.append(f"train.eval_mask_prob must be in (0, 1) (got {self.train.eval_mask_prob})")
        return out + self._budget_problems()

    def _ramp_problems(self) -> list[str]:
        """A batch-size ramp (train/batch_ramp.py) beside what cannot follow it; the world size is checked at the
        run's start, where it is known."""
        t, m = self.train, self.masking
        if t.batch_ramp.start <= 0:
            return []
        out = []
        if m.strategy == "mapnet":
            out.append(
                "the batch-size ramp (train.batch_ramp.start) is not available with masking.strategy 'mapnet': its "
                "proposal trains on slots of the full train.batch_size"
            )
        if m.strategy == "stratified" and t.batch_ramp.start % m.stratified.copies:
            out.append(
                f"train.batch_ramp.start ({t.batch_ramp.start}) must be divisible by masking.stratified.copies "
                f"({m.stratified.copies}): a ramped batch repeats each sequence as the full one does"
            )
        return out

    def _budget_problems(self) -> list[str]:
        """A train.time_budget lays the schedules out in time: the learning rate's warm-up, and MAP-Net's exploration
        (counted in steps, which a budget does not fix)."""
        budgeted = bool(self.train.time_budget)
        if budgeted:
            try:
                _ = self.train.budget_seconds  # raises on a bad train.time_budget
            except MapnetError:
                return []  # named by the train section's own check; what would follow from it is noise
        out = span_problems("optim.warmup", self.optim.warmup, budgeted, "learning-rate warm-up")
        x = self.masking.mapnet
        if budgeted and self.masking.strategy == "mapnet" and x.explore_steps == 0 and x.explore_start != x.explore_end:
            out.append(
                "masking.mapnet.explore_steps = 0 spreads MAP-Net's exploration schedule over train.steps, which "
                "a train.time_budget does not fix: give masking.mapnet.explore_steps, or explore_start = explore_end"
            )
        return out

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {f.name: section_dict(getattr(self, f.name)) for f in fields(self)}

    def to_toml(self) -> str:
        return tomli_w.dumps(self.to_dict())


def section_dict(section) -> dict[str, Any]:
    """One section as TOML-ready values (tuples as lists, a table of its own as a nested dict)."""
    return {
        f.name: (
            section_dict(v) if is_dataclass(v := getattr(section, f.name)) else list(v) if isinstance(v, tuple) else v
        )
        for f in fields(section)
    }


def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"masking.mapnet.lr": value, ...}: every setting of a `to_dict` tree by its dotted key."""
    out = {}
    for key, value in tree.items():
        out |= flat(value, f"{prefix}{key}.") if isinstance(value, dict) else {f"{prefix}{key}": value}
    return out


SECTIONS = tuple(f.name for f in fields(Settings))
