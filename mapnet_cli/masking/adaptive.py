"""Loss-adaptive masking without a network: AMLM (Edman & Fraser, "Mask and You Shall Receive",
BabyLM 2025, arXiv 2510.20475), with the number of masks held at the base rate and optional HT weights.

    mapnet pretrain shards/ --out runs/amlm --masking adaptive                          # the published method
    mapnet pretrain shards/ --out runs/amlm-ht --masking adaptive --set masking.adaptive.weights=ht \\
        --set masking.adaptive.mix_uniform=0.5
    mapnet compare shards/ --out cmp --strategies uniform,adaptive,adaptive-soft,adaptive-ht,adaptive-soft-ht

One weight w_v per vocabulary entry (p = `masking.mask_prob` at the start); every `masking.adaptive.every` steps
each type seen moves as w_v <- lam w_v + (1 - lam) p (1 - score_v), the score from the step's own logits. Every
sequence gets exactly K = round(p n) masks, pi_i = min(1, c w_{x_i}) with sum_i pi_i = K, by systematic PPS;
`weights = "ht"` weights position i by (K/n) / pi_i, so E_S[(1/K) sum_{i in S} w_i l_i] = (1/n) sum_i l_i for any
table. A new table masks one step late (`train.prefetch` changes nothing); integer sums make it the same on any
split. Derivations, costs, measurements: docs/masking.md#loss-adaptive-masking-without-a-network-masking-adaptive;
the implementation notes: docs/internals.md#maskingadaptivepy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import distributed
from ..errors import MapnetError
from .strategy import MicroBatch, UniformTraining, loss_terms, mlm_output, pps_micro_batch

# Scores in [0, 1] are summed as integers in units of 2^-24 (float32's precision; per-position rounding
# 3e-8). The largest sum a period can hold is count x 2^24: 5e11 masked positions before int64 overflows.
SCORE_SCALE = 1 << 24
# No entry falls below FLOOR x p when masks are drawn: every eligible position keeps pi > 0.
FLOOR = 1e-6
# The settings that give the table's state its meaning: a resumed run keeps them (`check_resume`). Recorded in
# config.json under their mapnet 0.1 names (masking.adaptive_score, ...), which every checkpoint since carries.
FIXED = {"adaptive_score": "score", "adaptive_every": "every"}


class AdaptiveTable(nn.Module):
    """The per-type masking weights and the scores gathered since their last update (module doc).

    Buffers (the checkpoint's `adaptive.*`): `table` (V,) float64, the newest weights; `previous`, the
    weights before them; `takes_effect`, the first step `table` masks (earlier steps use `previous`);
    `pending` (2, V) int64 on the training device, (count, fixed-point score sum) per type since the
    last update; `observed` (V,) int64, masked positions folded into the table so far; `updates`; and
    `last_score`, the pooled score of the last update (NaN before one).
    """

    def __init__(
        self,
        vocab_size: int,
        base_rate: float,
        *,
        decay: float,
        every: int,
        score: str,
        device: torch.device | str = "cpu",
    ):
        super().__init__()
        if score not in ("hard", "soft"):
            raise ValueError(f"score must be 'hard' or 'soft' (got {score!r})")
        self.base_rate, self.decay, self.every, self.score = base_rate, decay, every, score
        f64 = dict(dtype=torch.float64)
        self.register_buffer("table", torch.full((vocab_size,), base_rate, **f64))
        self.register_buffer("previous", torch.full((vocab_size,), base_rate, **f64))
        self.register_buffer("takes_effect", torch.zeros((), dtype=torch.int64))
        self.register_buffer("pending", torch.zeros(2, vocab_size, dtype=torch.int64, device=device))
        self.register_buffer("observed", torch.zeros(vocab_size, dtype=torch.int64))
        self.register_buffer("updates", torch.zeros((), dtype=torch.int64))
        self.register_buffer("last_score", torch.full((), float("nan"), **f64))
        self._publish()
        # A checkpoint loads into the buffers in place: the masking thread's snapshot is rebuilt after it.
        self.register_load_state_dict_post_hook(lambda module, keys: module._publish())

    def _publish(self, takes_effect: int | None = None) -> None:
        """Replace the snapshot the masks are drawn from (one attribute assignment: a thread drawing
        masks sees the old snapshot or the new one, whole)."""
        floor = FLOOR * self.base_rate
        start = int(self.takes_effect.numpy()) if takes_effect is None else takes_effect
        self._snapshot = (start, self.previous.clamp(min=floor), self.table.clamp(min=floor))

    def scores_for(self, step: int) -> torch.Tensor:
        """(V,) float64 on the host: the (floored) weights that mask optimizer step `step`. Valid for the
        steps from the last update on (the loop's next steps); earlier steps are not kept."""
        takes_effect, previous, table = self._snapshot
        return table if step >= takes_effect else previous

    @torch.no_grad()
    def observe(self, logits: torch.Tensor, token_losses: torch.Tensor, labels: torch.Tensor) -> None:
        """Add one micro-batch's masked positions (the model's `MLMOutput` fields) to the pending sums.
        Device work only: nothing is read back."""
        if self.score == "hard":
            score = (logits.detach().argmax(-1) == labels).to(torch.int64) * SCORE_SCALE
        else:
            score = torch.round(torch.exp(-token_losses.detach().double()) * SCORE_SCALE).to(torch.int64)
        self.pending[0].index_add_(0, labels, torch.ones_like(labels))
        self.pending[1].index_add_(0, labels, score)

    def due(self, step: int) -> bool:
        """Whether the table is updated after optimizer step `step` (it then masks from step + 2 on)."""
        return (step + 2) % self.every == 0

    @torch.no_grad()
    def update(self, info: distributed.DistInfo, takes_effect: int) -> None:
        """Fold the pending sums of every rank into the table (a collective: every rank, at the same step),
        for the steps from `takes_effect` on. The strategy's one device-to-host read (`tolist`, which the
        sync counter sees on every device); the rest is numpy on the host."""
        totals = distributed.all_reduce_sum(self.pending.clone(), info)
        counts, sums = (np.asarray(row, dtype=np.int64) for row in totals.tolist())  # the read
        score = sums / (np.maximum(counts, 1) * float(SCORE_SCALE))
        table = self.table.numpy()
        moved = self.decay * table + (1.0 - self.decay) * self.base_rate * (1.0 - score)
        new = np.where(counts > 0, moved, table)
        self.previous.copy_(self.table)
        self.table.copy_(torch.from_numpy(new))
        self.takes_effect.fill_(takes_effect)
        self.observed.add_(torch.from_numpy(counts))
        self.updates.add_(1)
        total = int(counts.sum())
        self.last_score.fill_(float(sums.sum()) / (total * SCORE_SCALE) if total else float("nan"))
        self.pending.zero_()
        self._publish(takes_effect)

    def relative(self) -> torch.Tensor:
        """(V,) the newest weights over the base rate: > 1 masked more than uniform would, < 1 less."""
        return self.table / self.base_rate


class AdaptiveTraining(UniformTraining):
    """`masking.strategy = "adaptive"`: masks from the per-type table (systematic PPS, exactly K per
    sequence), unweighted or HT-weighted; the table learns from the step's own scores (module doc)."""

    def __init__(self, settings, model: torch.nn.Module, data, info: distributed.DistInfo | None = None):
        super().__init__(settings, model, data)
        self.info = info or distributed.DistInfo()
        m = settings.masking
        self.table = AdaptiveTable(
            self.vocab_size,
            m.mask_prob,
            decay=m.adaptive.decay,
            every=m.adaptive.every,
            score=m.adaptive.score,
            device=self.info.device,
        )
        self.kinds = {k: np.asarray(v, dtype=np.int64) for k, v in (data.token_kinds or {}).items()}
        self._step: int | None = None  # the step the last loss_fn was made for: after_step follows it

    @property
    def modules(self) -> dict[str, torch.nn.Module]:
        return {"": self.model, "adaptive": self.table}

    def micro_batch(self, ids, step, slots, keys, device) -> MicroBatch:
        """Exactly K positions per row by systematic PPS from the table of `step` (draws as `frequency`)."""
        return pps_micro_batch(
            self,
            ids,
            step,
            slots,
            keys,
            device,
            lambda on: self.table.scores_for(step).to(on),  # the host: a no-op where masks are drawn
            ht_weights=self.settings.masking.adaptive.weights == "ht",
        )

    def loss_fn(self, step: int, with_stats: bool, pieces: int = 1):
        self._step = step

        def adaptive_loss(model, batch: MicroBatch, scale: float):
            out = mlm_output(model, batch)
            self.table.observe(out.logits, out.token_losses, out.labels)
            return loss_terms(out, batch, scale)

        return adaptive_loss

    def after_step(self) -> None:
        if self._step is not None and self.table.due(self._step):
            self.table.update(self.info, self._step + 2)

    def metrics(self) -> dict[str, Any]:
        """`adaptive/...`: the table over the types it has seen, relative to the base rate (host numbers:
        every rank holds the same table, so nothing is reduced). The same keys at every log step."""
        rel = self.table.relative().numpy()
        seen = self.table.observed.numpy() > 0
        score = float(self.table.last_score.numpy())
        out: dict[str, Any] = {
            "adaptive/updates": int(self.table.updates.numpy()),
            "adaptive/score": None if np.isnan(score) else score,
        }
        for name, fn in (("min", np.min), ("max", np.max), ("mean", np.mean)):
            out[f"adaptive/weight_{name}"] = float(fn(rel[seen])) if seen.any() else None
        for kind, ids in self.kinds.items():  # the synthetic corpus: how each kind of token is treated
            out[f"adaptive/weight/{kind}"] = float(rel[ids].mean()) if len(ids) else None
        return out

    def checkpoint_extra(self) -> dict[str, Any]:
        table = self.settings.masking.adaptive
        return {"adaptive": {record: getattr(table, key) for record, key in FIXED.items()}}

    def check_resume(self, meta: dict, ckpt: Path) -> None:
        saved = meta.get("adaptive")
        if not isinstance(saved, dict):
            raise MapnetError(
                f'--resume: {ckpt}/config.json lacks "adaptive", which every adaptive-masking checkpoint '
                "records; it cannot be continued"
            )
        table = self.settings.masking.adaptive
        for record, key in FIXED.items():
            if saved.get(record) != getattr(table, key):
                raise MapnetError(
                    f"--resume: {ckpt} was trained with masking.adaptive.{key} = {saved.get(record)!r}, "
                    f"not {getattr(table, key)!r}; it cannot change on resume (the table's running sums "
                    "and update steps depend on it)"
                )


__all__ = ["SCORE_SCALE", "FLOOR", "AdaptiveTable", "AdaptiveTraining"]
