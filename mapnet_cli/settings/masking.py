"""Settings of how pretraining masks: the strategy, MAP-Net's proposal and its importance weights."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Literal

from .field import setting


# Strategies that mask whole units (masking/units.py, masking/pmi_units.py): unweighted, so importance settings do not apply.
UNIT_STRATEGIES = ("whole-word", "span", "pmi")


@dataclass(frozen=True, kw_only=True)
class MaskingSettings:
    strategy: Literal["uniform", "mapnet", "stratified", "frequency", "adaptive", "whole-word", "span", "pmi"] = setting(
        "uniform", "uniform RandMask baseline; MAP-Net proposals; stratified (fully-explored, Zheng et al. 2020: disjoint masks of one sequence); frequency (static proposal from token counts, HT weights); adaptive (AMLM, Edman & Fraser 2025: a per-token table moved by the model's own scores); whole-word; span (SpanBERT random spans); pmi (PMI-Masking n-grams, needs mapnet pmi-vocab)")
    mask_prob: float = setting(0.15, "fraction of eligible tokens masked (paper: 0.15)")
    mask_count: Literal["exact", "bernoulli"] = setting(
        "exact", "exact: round(mask_prob x eligible) positions per sequence, as MAP-Net's K (mapnet choice: same K for both strategies); bernoulli: each position independently")
    replace_mask: float = setting(0.8, "share of chosen positions replaced by [MASK]")
    replace_random: float = setting(0.1, "share replaced by a random token (the rest stay unchanged)")
    importance: Literal["clipped", "unclipped", "none", "ht"] = setting(
        "clipped", "MAP-Net's importance weights: per sequence, the paper's clipped / unclipped ratio or none; ht: per-position Horvitz-Thompson weights (K/n)/pi_i with systematic PPS sampling (mapnet, unbiased for any proposal)")
    mix_uniform: float = setting(0.0, "alpha of the per-token defensive mixture pi = alpha K/n + (1-alpha) pi_proposal (ht, frequency and adaptive; bounds every HT weight by 1/alpha)")
    proposal_target: Literal["loss", "gradnorm", "learnability"] = setting(
        "loss", "what MAP-Net learns: loss = the paper's eq. 10; gradnorm = regress log p on log ||softmax - onehot|| at masked positions; learnability = on log of how fast the token type's loss falls (slow minus fast per-type average)")
    proposal_temperature: float = setting(1.0, "masks are drawn from p^(1/T) renormalised (T > 1 flattens the proposal toward uniform)")
    map_lr: float = setting(0.0, "MAP-Net's own peak learning rate (0: optim.lr); same schedule as the encoder's")
    learnability_decay: float = setting(0.99, "learnability: per-step decay of the slow per-token-type loss average (the fast one uses decay^20)")
    target_floor: float = setting(1e-3, "gradnorm / learnability targets are floored at this before the log (keeps every position's mass > 0)")
    strata_copies: int = setting(2, "stratified: each sequence fills this many batch slots, masked with that many disjoint strata (Zheng et al. use all of them)")
    frequency_power: float = setting(0.5, "frequency: the proposal is proportional to count(token type)^-power")
    adaptive_score: Literal["hard", "soft"] = setting(
        "hard", "adaptive: a token type's score, over the positions of it masked since the last update: hard = the model's accuracy there (argmax), soft = the mean probability it gave the true token (the paper's hard and soft decay)")
    adaptive_decay: float = setting(
        0.2, "adaptive: lambda, the share of the old table kept at each update, w <- lambda w + (1 - lambda) mask_prob (1 - score) (paper: 0.2)")
    adaptive_every: int = setting(
        200, "adaptive: T, optimizer steps between table updates (paper: 200 batches; scale it down for short runs, docs/masking.md)")
    adaptive_weights: Literal["none", "ht"] = setting(
        "none", "adaptive: none = unweighted, the published (biased) objective; ht = per-position Horvitz-Thompson weights (K/n)/pi_i, unbiased for uniform masking's loss (mapnet; needs mix_uniform > 0)")
    span_p: float = setting(0.2, "span: p of the geometric span-length distribution in words, p(1-p)^(l-1) (SpanBERT: 0.2)")
    span_max_words: int = setting(10, "span: longest span in words; the geometric is truncated there and renormalised (SpanBERT: 10, mean 3.8)")
    pmi_vocab: str = setting("", "pmi: the PMI vocabulary file of mapnet pmi-vocab (empty: pmi.tsv in the shard folder, else in the corpus the shards were made from)")
    clip_epsilon: float = setting(0.2, "weights are clipped to [1-eps, 1+eps] (paper gives no value; mapnet choice)")
    explore_start: float = setting(1.0, "probability of uniform masking at step 0 (paper: 100%)")
    explore_end: float = setting(0.33, "probability of uniform masking at the end of the schedule (paper: 33%)")
    explore_steps: int = setting(0, "length of the linear exploration schedule in steps (0: the whole run)")
    map_layers: int = setting(0, "MAP-Net blocks (0: as many as the encoder, as in the paper)")
    map_hidden: int = setting(0, "MAP-Net width (0: half the encoder's, as in the paper)")
    map_heads: int = setting(0, "MAP-Net heads (0: half the encoder's)")
    map_dropout: float = setting(
        0.0, "MAP-Net's hidden and attention dropout (paper silent; mapnet choice: 0, so the distribution masks are drawn from is the one inspect-masks shows, and CPU attention keeps its fused kernel)")
    map_loss_weight: float = setting(1e-2, "lambda of the paper's combined loss (paper: 1e-2)")
    map_loss_on: Literal["map", "encoder"] = setting(
        "map", "which term lambda scales: 'map' = L_enc + lambda*L_MAP (mapnet choice, see docs/masking.md), 'encoder' = L_MAP + lambda*L_enc as printed")
    train_map_on_uniform: bool = setting(True, "uniformly masked sequences also train MAP-Net (mapnet choice: more signal early)")
    map_train_every: int = setting(
        1, "MAP-Net learns on every k-th step only; in between it only draws masks (forward without autograd, no update): a cheaper step (mapnet choice; 1: every step, as in the paper)")

    def problems(self, ignored: bool = True) -> list[str]:
        """Every bad masking setting; `ignored=False` leaves out settings this strategy would ignore
        (`compare` gives each arm the ones it uses and resets the rest, `ignored_keys`)."""
        out = []
        if not 0.0 < self.mask_prob < 1.0:
            out.append(f"masking.mask_prob must be in (0, 1) (got {self.mask_prob})")
        if self.replace_mask < 0 or self.replace_random < 0 or self.replace_mask + self.replace_random > 1.0:
            out.append("masking.replace_mask and masking.replace_random must be >= 0 and sum to <= 1")
        if not 0.0 < self.clip_epsilon < 1.0:
            out.append(f"masking.clip_epsilon must be in (0, 1) (got {self.clip_epsilon})")
        for name in ("explore_start", "explore_end"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                out.append(f"masking.{name} must be in [0, 1] (got {getattr(self, name)})")
        if self.map_train_every < 1:
            out.append(f"masking.map_train_every must be >= 1 (got {self.map_train_every})")
        for name in ("explore_steps", "map_layers", "map_hidden", "map_heads"):
            if getattr(self, name) < 0:
                out.append(f"masking.{name} must be >= 0 (got {getattr(self, name)})")
        if not 0.0 <= self.map_dropout < 1.0:
            out.append(f"masking.map_dropout must be in [0, 1) (got {self.map_dropout})")
        if self.map_loss_weight < 0:
            out.append(f"masking.map_loss_weight must be >= 0 (got {self.map_loss_weight})")
        if not 0.0 <= self.mix_uniform <= 1.0:
            out.append(f"masking.mix_uniform must be in [0, 1] (got {self.mix_uniform})")
        if self.proposal_temperature <= 0:
            out.append(f"masking.proposal_temperature must be > 0 (got {self.proposal_temperature})")
        if self.map_lr < 0:
            out.append(f"masking.map_lr must be >= 0 (got {self.map_lr})")
        if not 0.0 <= self.learnability_decay < 1.0:
            out.append(f"masking.learnability_decay must be in [0, 1) (got {self.learnability_decay})")
        if self.target_floor <= 0:
            out.append(f"masking.target_floor must be > 0 (got {self.target_floor})")
        if self.strata_copies < 1:
            out.append(f"masking.strata_copies must be >= 1 (got {self.strata_copies})")
        if self.frequency_power < 0:
            out.append(f"masking.frequency_power must be >= 0 (got {self.frequency_power})")
        if not 0.0 <= self.adaptive_decay < 1.0:
            out.append(f"masking.adaptive_decay must be in [0, 1) (got {self.adaptive_decay})")
        if self.adaptive_every < 1:
            out.append(f"masking.adaptive_every must be >= 1 (got {self.adaptive_every})")
        if self.strategy == "adaptive" and self.adaptive_weights == "ht" and self.mix_uniform <= 0.0:
            # A type the model always gets right decays toward weight 0 (lambda^j p): pi_i -> 0 and (K/n)/pi_i -> inf.
            out.append("masking.adaptive_weights 'ht' needs masking.mix_uniform > 0: a learned token's table entry decays "
                       "toward 0 and its HT weight (K/n)/pi_i without bound (0.5 bounds every weight by 2)")
        if self.strategy == "adaptive" and self.importance != "clipped":
            out.append(f"masking.importance {self.importance!r} weights MAP-Net; adaptive masking's weights are "
                       "masking.adaptive_weights ('none' or 'ht')")
        if not 0.0 < self.span_p <= 1.0:
            out.append(f"masking.span_p must be in (0, 1] (got {self.span_p})")
        if self.span_max_words < 1:
            out.append(f"masking.span_max_words must be >= 1 (got {self.span_max_words})")
        if self.strategy in UNIT_STRATEGIES and self.importance in ("unclipped", "none", "ht"):
            out.append(f"masking.importance {self.importance!r} does not apply to masking.strategy '{self.strategy}': unit masks "
                       "(whole words, spans, n-grams) are unweighted; importance weights need a proposal's inclusion "
                       "probabilities (use masking.strategy 'mapnet' or 'frequency' for weighted masking)")
        out += self._ignored() if ignored else []
        if self.strategy != "uniform" and self.mask_count != "exact":
            # MAP-Net draws exactly K positions, and its importance ratio compares K-position masks.
            out.append(f"masking.mask_count must be 'exact' with masking.strategy '{self.strategy}'")
        if self.map_hidden > 0 and self.map_heads > 0 and self.map_hidden % self.map_heads:
            out.append(f"masking.map_hidden ({self.map_hidden}) must be divisible by masking.map_heads ({self.map_heads})")
        return out

    def _ignored(self) -> list[str]:
        """Settings given a non-default value that this strategy would silently ignore: refused by name."""
        return [f"masking.{name} = {getattr(self, name)!r} only applies with {where}; here it would be ignored"
                for name, where in self.ignored_keys().items()]

    def ignored_keys(self) -> dict[str, str]:
        """{name: where it applies} of the settings given a non-default value that this strategy ignores."""
        ht = self.strategy == "mapnet" and self.importance == "ht"
        regressed = self.strategy == "mapnet" and self.proposal_target != "loss"
        used = {
            "proposal_temperature": (ht, "masking.importance 'ht' (the paper's Gumbel-top-k draws from p itself)"),
            "mix_uniform": (ht or self.strategy in ("frequency", "adaptive"),
                            "masking.importance 'ht' or masking.strategy 'frequency' or 'adaptive'"),
            "proposal_target": (self.strategy == "mapnet", "masking.strategy 'mapnet'"),
            "map_lr": (self.strategy == "mapnet", "masking.strategy 'mapnet'"),
            "map_train_every": (self.strategy == "mapnet", "masking.strategy 'mapnet'"),
            "learnability_decay": (self.strategy == "mapnet" and self.proposal_target == "learnability",
                                   "masking.proposal_target 'learnability'"),
            "target_floor": (regressed, "masking.proposal_target 'gradnorm' or 'learnability'"),
            "strata_copies": (self.strategy == "stratified", "masking.strategy 'stratified'"),
            "frequency_power": (self.strategy == "frequency", "masking.strategy 'frequency'"),
            **{name: (self.strategy == "adaptive", "masking.strategy 'adaptive'")
               for name in ("adaptive_score", "adaptive_decay", "adaptive_every", "adaptive_weights")},
            "span_p": (self.strategy == "span", "masking.strategy 'span'"),
            "span_max_words": (self.strategy == "span", "masking.strategy 'span'"),
            "pmi_vocab": (self.strategy == "pmi", "masking.strategy 'pmi'"),
        }
        defaults = {f.name: f.default for f in fields(self)}
        return {name: where for name, (applies, where) in used.items() if not applies and getattr(self, name) != defaults[name]}

