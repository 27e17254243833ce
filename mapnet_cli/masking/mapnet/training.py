"""MAP-Net in the pretraining loop: what `train.Run` does differently with `masking.strategy = "mapnet"`.

    mapnet pretrain shards/ --out runs/mapnet --preset base --masking mapnet
    mapnet pretrain shards/ --out runs/mapnet-unclipped --masking mapnet --set masking.mapnet.importance=unclipped

`MapnetTraining` implements `strategy.Strategy`, so the loop itself never asks which strategy it runs. The
proposal is built after the encoder (whose initial weights then equal a uniform run's with the same seed) and
holds its token embedding; one `MapnetJoint` module carries both networks (one DDP wrapper, one optimizer, one
clip). Batches arrive unmasked; masks are drawn in the forward pass from streams keyed by (seed, step, slot). The
encoder term is the mean of w * l_s over the B sequences; the MAP-Net term is scaled by the M sequences that train
it (counted from the seeded coins: no collective); the logged loss is unweighted. Checkpoints hold MAP-Net under
`mapnet.` and need no RNG state. Each hook in full (build, micro_batch, loss, metrics, checkpoint, cheaper steps,
learning rate): docs/internals.md#maskingmapnettrainingpy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ... import distributed
from ...errors import MapnetError
from ..strategy import MicroBatch, batch_tensors
from ..uniform import SequenceRNG, piece_slots
from .host_draws import draw_on_host
from .objective import MapnetJoint, map_training_sequences
from .proposal import ProposalConfig, ProposalNetwork
from .stats import MapnetStats, summary_keys
from .targets import TokenLossReference


class MapnetTraining:
    """The MAP-Net strategy: proposal + encoder trained jointly, statistics for the metrics file."""

    copies = 1

    def __init__(self, settings, model: torch.nn.Module, data, info: distributed.DistInfo):
        self.settings, self.model, self.info = settings, model, info
        self.special_ids, self.vocab_size, self.seq_len = data.special_ids, data.vocab_size, data.max_seq_len
        self.proposal_cfg = ProposalConfig.from_settings(settings.model, settings.masking)
        self.proposal = ProposalNetwork(self.proposal_cfg, model.encoder.tok_embeddings).to(info.device)
        self.net = MapnetJoint(model, self.proposal)  # what DDP wraps: one all-reduce for both networks
        kinds = data.token_kinds or {}
        self.kinds = {k: torch.as_tensor(v, device=info.device) for k, v in kinds.items()} or None
        self.keys = summary_keys(sorted(kinds))
        self.stats = MapnetStats()
        m = settings.masking
        # Held apart from the DDP-wrapped module: a buffer-only average every rank updates identically.
        self.reference = (
            TokenLossReference(self.vocab_size, m.mapnet.learnability_decay).to(info.device)
            if m.mapnet.target == "learnability"
            else None
        )

    @property
    def modules(self) -> dict[str, torch.nn.Module]:
        """Checkpoint layout: the encoder un-prefixed (export reads only that), MAP-Net under `mapnet.`."""
        out = {"": self.model, "mapnet": self.proposal}
        if self.reference is not None:
            out["mapnet_reference"] = self.reference
        return out

    @property
    def optim_modules(self) -> list[torch.nn.Module]:
        # This order on every run and resume: the optimizer state is matched to parameters by position.
        return [self.model, self.proposal]

    def optim_lrs(self, lr: float) -> list[float]:
        return [lr, self.settings.masking.mapnet.lr or lr]

    def micro_batch(self, ids, step, slots, keys, device) -> MicroBatch:
        """Unmasked: MAP-Net draws the masks in the forward pass; their randomness (the rows' keyed
        streams, the coins, K) is drawn here, on the host (`host_draws`), and travels with the batch."""
        targets, attn, tokens = batch_tensors(ids, self.special_ids, device)
        t = self.settings.train
        draws = draw_on_host(
            targets.cpu(),
            None if attn is None else attn.cpu(),
            special_ids=self.special_ids,
            vocab_size=self.vocab_size,
            step=step,
            total_steps=t.steps,
            seed=t.seed,
            slots=slots,
            masking=self.settings.masking,
            rng=SequenceRNG(keys),
        ).to(targets.device)
        return MicroBatch(None, targets, None, attn, tokens, slots=slots, keys=list(keys), draws=draws)

    def learns(self, step: int) -> bool:
        return step % self.settings.masking.mapnet.train_every == 0

    def frozen(self, step: int) -> list[torch.nn.Parameter]:
        return [] if self.learns(step) else list(self.proposal.parameters())

    def after_step(self) -> None:
        if self.reference is not None:
            self.reference.update(self.info)  # a collective: every rank, every step

    def compile(self) -> None:
        for block in self.proposal.blocks:
            block.compile()  # per block, in place, as the encoder's: state_dict keys stay unchanged

    def loss_fn(self, step: int, with_stats: bool, pieces: int = 1):
        """The `train_step` loss of optimizer step `step`, whose sequences are cut into `pieces` each (the
        schedule's sequence-length warm-up): (loss to backpropagate, sum of l_s, masked count)."""
        s, t = self.settings, self.settings.train
        # Counted over the whole global batch from the seeded coins: every rank gets the same M with no collective;
        # the warm-up's pieces are the sequences.
        m = map_training_sequences(
            step, t.steps, t.seed, piece_slots(range(t.batch_size), pieces, t.batch_size), s.masking
        )
        map_scale = self.info.world_size / max(m, 1)
        learn = self.learns(step)

        def mapnet_loss(ddp, batch, scale: float):
            part, st = ddp(
                batch.targets,
                batch.attention_mask,
                special_ids=self.special_ids,
                vocab_size=self.vocab_size,
                step=step,
                total_steps=t.steps,
                seed=t.seed,
                slots=batch.slots,
                masking=s.masking,
                draws=batch.draws,
                token_kinds=self.kinds,
                with_stats=with_stats,
                reference=self.reference,
                learn=learn,
            )
            if st is not None:
                self.stats.add(st)
            return part.total(s.masking, enc_scale=scale, map_scale=map_scale), part.loss_sum, part.masked

        return mapnet_loss

    def metrics(self) -> dict[str, Any]:
        """The `mapnet/...` numbers of the steps since the last call, over all ranks (a collective: every rank calls
        it).

        Every key is present at every log step; a number with nothing to average
        (e.g. `log_ratio` while every sequence is still masked uniformly) is None.
        Plus, when a TensorBoard or W&B sink is on, the main process's histograms
        (`mapnet/histogram/...`, numpy arrays): `MetricsLog` hands them to the sinks and
        keeps them out of metrics.jsonl.
        """
        names = self.stats.names()
        flat = distributed.all_reduce_sum(self.stats.as_tensor(self.info.device), self.info)
        summary = MapnetStats.from_tensor(names, flat).summary()
        lg = self.settings.logging
        # Only the main process logs, and only a sink shows histograms: no device-to-host copy otherwise.
        histograms = self.stats.histograms() if self.info.is_main and (lg.tensorboard or lg.wandb) else {}
        self.stats = MapnetStats()
        return {**{key: summary.get(key) for key in self.keys}, **histograms}

    def checkpoint_extra(self) -> dict[str, Any]:
        m = self.settings.masking
        return {"mapnet": self.proposal_cfg.to_dict(), "map_lr": m.mapnet.lr, "proposal_target": m.mapnet.target}

    def check_resume(self, meta: dict, ckpt: Path) -> None:
        m = self.settings.masking.mapnet
        missing = [key for key in ("map_lr", "proposal_target", "mapnet") if key not in meta]
        if missing:  # every MAP-Net checkpoint records them (under their mapnet 0.1 names)
            raise MapnetError(
                f"--resume: {ckpt}/config.json lacks {', '.join(missing)}, which every MAP-Net checkpoint "
                "records; it cannot be continued"
            )
        for record, key in (("map_lr", "lr"), ("proposal_target", "target")):
            if meta[record] != getattr(m, key):
                raise MapnetError(
                    f"--resume: {ckpt} was trained with masking.mapnet.{key} = {meta[record]!r}, not "
                    f"{getattr(m, key)!r}; masking.mapnet.{key} cannot change on resume (the optimizer's "
                    "groups and the proposal's training state depend on it)"
                )
        saved, now = meta["mapnet"], self.proposal_cfg.to_dict()
        if saved != now:
            changed = {
                k: (saved.get(k), now.get(k)) for k in sorted(set(saved) | set(now)) if saved.get(k) != now.get(k)
            }
            raise MapnetError(
                f"--resume: {ckpt} has a different MAP-Net (checkpoint vs now: {changed}); "
                "the proposal's size (masking.mapnet.layers, hidden, heads, dropout) cannot change"
            )


__all__ = ["MapnetTraining"]
