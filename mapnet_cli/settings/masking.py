"""Settings of how pretraining masks: what every strategy shares, and one table per strategy for its own.

    [masking]            strategy, mask_prob, mask_count, replace_mask, replace_random
    [masking.mapnet]     MAP-Net: the proposal's size and learning, its importance weights, the exploration schedule
    [masking.stratified], [masking.frequency], [masking.adaptive], [masking.span], [masking.pmi], [masking.hybrid]

A table other than the chosen strategy's stays at its defaults (a value set there would be ignored: refused by
name), and a strategy's table says which of its own keys its other values make unused (`unused`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal

from .field import setting

# Strategies that mask whole units (masking/units.py, masking/pmi_units.py): unweighted, no table of their own but
# pmi's.
UNIT_STRATEGIES = ("whole-word", "span", "pmi")


def _defaults_differ(section) -> list[str]:
    """The keys of `section` set to something other than their default."""
    default = type(section)()
    return [f.name for f in fields(section) if getattr(section, f.name) != getattr(default, f.name)]


@dataclass(frozen=True, kw_only=True)
class MapnetSettings:
    importance: Literal["clipped", "unclipped", "none", "ht"] = setting(
        "clipped",
        "importance weights: per sequence, the paper's clipped / unclipped ratio or none; ht: per-position "
        "Horvitz-Thompson weights (K/n)/pi_i with systematic PPS sampling (mapnet, unbiased for any proposal)",
    )
    mix_uniform: float = setting(
        0.0,
        "with importance 'ht': alpha of the defensive mixture pi = alpha K/n + (1-alpha) pi_proposal (bounds every HT "
        "weight by 1/alpha)",
    )
    temperature: float = setting(
        1.0,
        "with importance 'ht': masks are drawn from p^(1/T) renormalised (T > 1 flattens the proposal toward uniform)",
    )
    target: Literal["loss", "gradnorm", "learnability"] = setting(
        "loss",
        "what the proposal learns: loss = the paper's eq. 10; gradnorm = regress log p on log ||softmax - onehot|| at "
        "masked positions; learnability = on log of how fast the token type's loss falls (slow minus fast "
        "per-type average)",
    )
    learnability_decay: float = setting(
        0.99,
        "with target 'learnability': per-step decay of the slow per-token-type loss average (the fast one uses "
        "decay^20)",
    )
    target_floor: float = setting(
        1e-3,
        "with target 'gradnorm' or 'learnability': targets are floored at this before the log (keeps every position's "
        "mass > 0)",
    )
    lr: float = setting(0.0, "the proposal's own peak learning rate (0: optim.lr); same schedule as the encoder's")
    clip_epsilon: float = setting(0.2, "weights are clipped to [1-eps, 1+eps] (paper gives no value; mapnet choice)")
    explore_start: float = setting(1.0, "probability of uniform masking at step 0 (paper: 100%)")
    explore_end: float = setting(0.33, "probability of uniform masking at the end of the schedule (paper: 33%)")
    explore_steps: int = setting(0, "length of the linear exploration schedule in steps (0: the whole run)")
    layers: int = setting(0, "proposal blocks (0: as many as the encoder, as in the paper)")
    hidden: int = setting(0, "proposal width (0: half the encoder's, as in the paper)")
    heads: int = setting(0, "proposal heads (0: half the encoder's)")
    dropout: float = setting(
        0.0,
        "the proposal's hidden and attention dropout (paper silent; mapnet choice: 0, so the distribution masks are "
        "drawn from is the one inspect-masks shows, and CPU attention keeps its fused kernel)",
    )
    loss_weight: float = setting(1e-2, "lambda of the paper's combined loss (paper: 1e-2)")
    loss_on: Literal["map", "encoder"] = setting(
        "map",
        "which term lambda scales: 'map' = L_enc + lambda*L_MAP (mapnet choice, see docs/masking.md), 'encoder' = "
        "L_MAP + lambda*L_enc as printed",
    )
    train_on_uniform: bool = setting(
        True, "uniformly masked sequences also train the proposal (mapnet choice: more signal early)"
    )
    train_every: int = setting(
        1,
        "the proposal learns on every k-th step only; in between it only draws masks (forward without autograd, no "
        "update): a cheaper step (mapnet choice; 1: every step, as in the paper)",
    )

    def unused(self) -> dict[str, str]:
        """{key: where it applies} of the keys set here that these settings' other values leave unused."""
        where = {
            "mix_uniform": (self.importance == "ht", "masking.mapnet.importance 'ht'"),
            "temperature": (
                self.importance == "ht",
                "masking.mapnet.importance 'ht' (the paper's Gumbel-top-k draws from p itself)",
            ),
            "learnability_decay": (self.target == "learnability", "masking.mapnet.target 'learnability'"),
            "target_floor": (self.target != "loss", "masking.mapnet.target 'gradnorm' or 'learnability'"),
        }
        return {key: text for key, (applies, text) in where.items() if not applies and key in _defaults_differ(self)}

    def problems(self) -> list[str]:
        out = []
        if not 0.0 < self.clip_epsilon < 1.0:
            out.append(f"masking.mapnet.clip_epsilon must be in (0, 1) (got {self.clip_epsilon})")
        for name in ("explore_start", "explore_end"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                out.append(f"masking.mapnet.{name} must be in [0, 1] (got {getattr(self, name)})")
        if self.train_every < 1:
            out.append(f"masking.mapnet.train_every must be >= 1 (got {self.train_every})")
        for name in ("explore_steps", "layers", "hidden", "heads"):
            if getattr(self, name) < 0:
                out.append(f"masking.mapnet.{name} must be >= 0 (got {getattr(self, name)})")
        if not 0.0 <= self.dropout < 1.0:
            out.append(f"masking.mapnet.dropout must be in [0, 1) (got {self.dropout})")
        if self.loss_weight < 0:
            out.append(f"masking.mapnet.loss_weight must be >= 0 (got {self.loss_weight})")
        if not 0.0 <= self.mix_uniform <= 1.0:
            out.append(f"masking.mapnet.mix_uniform must be in [0, 1] (got {self.mix_uniform})")
        if self.temperature <= 0:
            out.append(f"masking.mapnet.temperature must be > 0 (got {self.temperature})")
        if self.lr < 0:
            out.append(f"masking.mapnet.lr must be >= 0 (got {self.lr})")
        if not 0.0 <= self.learnability_decay < 1.0:
            out.append(f"masking.mapnet.learnability_decay must be in [0, 1) (got {self.learnability_decay})")
        if self.target_floor <= 0:
            out.append(f"masking.mapnet.target_floor must be > 0 (got {self.target_floor})")
        if self.hidden > 0 and self.heads > 0 and self.hidden % self.heads:
            out.append(
                f"masking.mapnet.hidden ({self.hidden}) must be divisible by masking.mapnet.heads ({self.heads})"
            )
        return out


@dataclass(frozen=True, kw_only=True)
class StratifiedSettings:
    copies: int = setting(
        2,
        "each sequence fills this many batch slots, masked with that many disjoint strata (Zheng et al. use all of "
        "them)",
    )

    def unused(self) -> dict[str, str]:
        return {}

    def problems(self) -> list[str]:
        return [f"masking.stratified.copies must be >= 1 (got {self.copies})"] if self.copies < 1 else []


@dataclass(frozen=True, kw_only=True)
class FrequencySettings:
    power: float = setting(0.5, "the proposal is proportional to count(token type)^-power")
    mix_uniform: float = setting(
        0.0, "alpha of the defensive mixture pi = alpha K/n + (1-alpha) pi_proposal (bounds every HT weight by 1/alpha)"
    )

    def unused(self) -> dict[str, str]:
        return {}

    def problems(self) -> list[str]:
        out = [f"masking.frequency.power must be >= 0 (got {self.power})"] if self.power < 0 else []
        if not 0.0 <= self.mix_uniform <= 1.0:
            out.append(f"masking.frequency.mix_uniform must be in [0, 1] (got {self.mix_uniform})")
        return out


@dataclass(frozen=True, kw_only=True)
class AdaptiveSettings:
    score: Literal["hard", "soft"] = setting(
        "hard",
        "a token type's score, over the positions of it masked since the last update: hard = the model's accuracy "
        "there (argmax), soft = the mean probability it gave the true token (the paper's hard and soft decay)",
    )
    decay: float = setting(
        0.2,
        "lambda, the share of the old table kept at each update, w <- lambda w + (1 - lambda) mask_prob (1 - score) "
        "(paper: 0.2)",
    )
    every: int = setting(
        200,
        "T, optimizer steps between table updates (paper: 200 batches; scale it down for short runs, docs/masking.md)",
    )
    weights: Literal["none", "ht"] = setting(
        "none",
        "none = unweighted, the published (biased) objective; ht = per-position Horvitz-Thompson weights (K/n)/pi_i, "
        "unbiased for uniform masking's loss (mapnet; needs mix_uniform > 0)",
    )
    mix_uniform: float = setting(
        0.0, "alpha of the defensive mixture pi = alpha K/n + (1-alpha) pi_table (bounds every HT weight by 1/alpha)"
    )

    def unused(self) -> dict[str, str]:
        return {}

    def problems(self) -> list[str]:
        out = []
        if not 0.0 <= self.decay < 1.0:
            out.append(f"masking.adaptive.decay must be in [0, 1) (got {self.decay})")
        if self.every < 1:
            out.append(f"masking.adaptive.every must be >= 1 (got {self.every})")
        if not 0.0 <= self.mix_uniform <= 1.0:
            out.append(f"masking.adaptive.mix_uniform must be in [0, 1] (got {self.mix_uniform})")
        elif self.weights == "ht" and self.mix_uniform <= 0.0:
            # A type the model always gets right decays toward weight 0 (lambda^j p): pi_i -> 0 and (K/n)/pi_i -> inf.
            out.append(
                "masking.adaptive.weights 'ht' needs masking.adaptive.mix_uniform > 0: a learned token's table "
                "entry decays toward 0 and its HT weight (K/n)/pi_i without bound (0.5 bounds every weight by 2)"
            )
        return out


@dataclass(frozen=True, kw_only=True)
class SpanSettings:
    p: float = setting(0.2, "p of the geometric span-length distribution in words, p(1-p)^(l-1) (SpanBERT: 0.2)")
    max_words: int = setting(
        10, "longest span in words; the geometric is truncated there and renormalised (SpanBERT: 10, mean 3.8)"
    )

    def unused(self) -> dict[str, str]:
        return {}

    def problems(self) -> list[str]:
        out = [f"masking.span.p must be in (0, 1] (got {self.p})"] if not 0.0 < self.p <= 1.0 else []
        if self.max_words < 1:
            out.append(f"masking.span.max_words must be >= 1 (got {self.max_words})")
        return out


@dataclass(frozen=True, kw_only=True)
class PmiSettings:
    vocab: str = setting(
        "",
        "the PMI vocabulary file of mapnet pmi-vocab (empty: pmi.tsv in the shard folder, else in the corpus the "
        "shards were made from)",
    )

    def unused(self) -> dict[str, str]:
        return {}

    def problems(self) -> list[str]:
        return []


@dataclass(frozen=True, kw_only=True)
class HybridSettings:
    causal_every: int = setting(
        16,
        "one batch slot in this many is a causal row, the others masked (masking/hybrid.py; GPT-BERT's 1:15 "
        "causal-to-masked share is 16)",
    )

    def unused(self) -> dict[str, str]:
        return {}

    def problems(self) -> list[str]:
        if self.causal_every < 1:
            return [f"masking.hybrid.causal_every must be >= 1 (got {self.causal_every})"]
        return []


# The strategies with a table of their own, by the table's name (= the strategy's).
STRATEGY_TABLES = ("mapnet", "stratified", "frequency", "adaptive", "span", "pmi", "hybrid")


@dataclass(frozen=True, kw_only=True)
class MaskingSettings:
    strategy: Literal[
        "uniform", "mapnet", "stratified", "frequency", "adaptive", "whole-word", "span", "pmi", "hybrid"
    ] = setting(
        "uniform",
        "uniform RandMask baseline; MAP-Net proposals; stratified (fully-explored, Zheng et al. 2020: disjoint "
        "masks of one sequence); frequency (static proposal from token counts, HT weights); adaptive (AMLM, "
        "Edman & Fraser 2025: a per-token table moved by the model's own scores); whole-word; span (SpanBERT "
        "random spans); pmi (PMI-Masking n-grams, needs mapnet pmi-vocab); hybrid (GPT-BERT's masked and causal "
        "rows in one encoder)",
    )
    mask_prob: float = setting(0.15, "fraction of eligible tokens masked (paper: 0.15)")
    mask_count: Literal["exact", "bernoulli"] = setting(
        "exact",
        "exact: round(mask_prob x eligible) positions per sequence, as MAP-Net's K (mapnet choice: same K for both "
        "strategies); bernoulli: each position independently",
    )
    replace_mask: float = setting(0.8, "share of chosen positions replaced by [MASK]")
    replace_random: float = setting(0.1, "share replaced by a random token (the rest stay unchanged)")
    mapnet: MapnetSettings = field(default_factory=MapnetSettings)
    stratified: StratifiedSettings = field(default_factory=StratifiedSettings)
    frequency: FrequencySettings = field(default_factory=FrequencySettings)
    adaptive: AdaptiveSettings = field(default_factory=AdaptiveSettings)
    span: SpanSettings = field(default_factory=SpanSettings)
    pmi: PmiSettings = field(default_factory=PmiSettings)
    hybrid: HybridSettings = field(default_factory=HybridSettings)

    @property
    def mix_uniform(self) -> float:
        """The defensive mixture alpha of this run's strategy (MAP-Net's HT, frequency, adaptive; 0 for the others):
        what every design that mixes with uniform masking uses, the variance measurement's schemes included."""
        table = getattr(self, self.strategy, None) if self.strategy in STRATEGY_TABLES else None
        return getattr(table, "mix_uniform", 0.0)

    def problems(self, ignored: bool = True) -> list[str]:
        """Every bad masking setting; `ignored=False` leaves out the keys this run would ignore (`compare`'s base,
        whose arms each take the ones they use: `without_ignored`)."""
        out = []
        if not 0.0 < self.mask_prob < 1.0:
            out.append(f"masking.mask_prob must be in (0, 1) (got {self.mask_prob})")
        if self.replace_mask < 0 or self.replace_random < 0 or self.replace_mask + self.replace_random > 1.0:
            out.append("masking.replace_mask and masking.replace_random must be >= 0 and sum to <= 1")
        if self.strategy != "uniform" and self.mask_count != "exact":
            # MAP-Net draws exactly K positions, and its importance ratio compares K-position masks.
            out.append(f"masking.mask_count must be 'exact' with masking.strategy '{self.strategy}'")
        for name in STRATEGY_TABLES:
            out += getattr(self, name).problems()
        return out + [
            f"masking.{key} = {value!r} only applies with {where}; here it would be ignored"
            for key, (value, where) in (self.ignored() if ignored else {}).items()
        ]

    def ignored(self) -> dict[str, tuple[object, str]]:
        """{dotted key under masking: (its value, where it applies)} of every key set that this run would ignore:
        another strategy's table, or a key of its own table its other values leave unused."""
        out = {}
        for name in STRATEGY_TABLES:
            table = getattr(self, name)
            keys = (
                {key: f"masking.strategy '{name}'" for key in _defaults_differ(table)}
                if name != self.strategy
                else table.unused()
            )
            out |= {f"{name}.{key}": (getattr(table, key), where) for key, where in keys.items()}
        return out

    def without_ignored(self) -> MaskingSettings:
        """These settings with every ignored key back at its default (`compare` gives each arm the keys it uses)."""
        from dataclasses import replace

        tables = {}
        for dotted in self.ignored():
            name, key = dotted.split(".", 1)
            table = tables.get(name, getattr(self, name))
            tables[name] = replace(table, **{key: getattr(type(table)(), key)})
        return replace(self, **tables)
