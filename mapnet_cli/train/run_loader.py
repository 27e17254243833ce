"""One way to open a trained run: a checkpoint or run folder -> model, MAP-Net, settings, tokenizer, shards.

    run = load_run("runs/mapnet")              # a run folder means its newest complete checkpoint
    run.model, run.proposal                    # encoder + MLM head; MAP-Net, or None for another strategy
    run.settings, run.tokenizer, run.shards    # settings.toml, tokenizer.json, the shards run.json names
    run = load_run(ckpt, weights=False)        # found and verified, nothing built (pretrain --resume)

Every command that reads a checkpoint (export, inspect-masks, variance, finetune-glue, pretrain --resume,
--init-from) opens it here, so they cannot drift apart on the rules, which are `model/checkpoint.py`'s: the folder
is found (`resolve_checkpoint`: a marker file, the newest complete one of a run) and verified against its manifest
before anything is read; weights come only from safetensors (`load_weights`), training state only through
`torch.load(weights_only=True)` (`load_state`); a damaged file is a one-line `MapnetError` naming it.

MAP-Net is rebuilt at the size the checkpoint recorded (config.json's "mapnet"), which is what its weights were
trained at; a MAP-Net checkpoint without that entry is refused in one line.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import torch
from safetensors import safe_open

from ..errors import MapnetError
from ..masking.mapnet.proposal import ProposalConfig, ProposalNetwork, has_proposal_weights
from ..model import checkpoint
from ..model.bert import BertForMLM


@dataclass
class LoadedRun:
    """A verified checkpoint and what was built from it (`model` / `proposal` are None when not asked for)."""

    checkpoint: Path  # the checkpoint folder (a run folder resolves to its newest complete one)
    meta: dict  # config.json, plus "path": the checkpoint folder as a string
    model: BertForMLM | None = None
    proposal: ProposalNetwork | None = None

    @property
    def step(self) -> int:
        return int(self.meta["step"])

    @property
    def tokenizer(self) -> Path:
        return self.checkpoint / checkpoint.TOKENIZER

    @cached_property
    def settings(self):
        """The run's resolved settings as saved beside the weights; parsed on first use only."""
        return checkpoint.load_settings(self.checkpoint)

    @property
    def run_json(self) -> Path:
        return self.checkpoint.parent.parent / "run.json"

    @property
    def shards(self) -> Path | None:
        """The shard folder the run trained on, as its run.json records it; None when it does not say."""
        return recorded_shards(self.run_json)

    def load_into(self, modules) -> None:
        """The checkpoint's weights into already-built `modules` ({prefix: module}, as `checkpoint.load_weights`)."""
        checkpoint.load_weights(self.checkpoint / checkpoint.WEIGHTS, modules)

    def state(self, map_location: str | torch.device = "cpu") -> dict:
        """Optimizer, scheduler, RNG and data position (`state.pt`, tensors and primitives only)."""
        return checkpoint.load_state(self.checkpoint, map_location)


def load_run(
    path: str | os.PathLike,
    *,
    weights: bool = True,
    with_proposal: bool = True,
    device: str | torch.device = "cpu",
    verify: str = "full",
) -> LoadedRun:
    """Open the checkpoint `path` names (or a run folder's newest), verified (`verify` as shard.verify).

    `weights`: build the encoder + MLM head; `with_proposal`: and MAP-Net, when the checkpoint holds
    one. Models are left in train mode, as built, on `device`.
    """
    ckpt = checkpoint.resolve_checkpoint(path, verify)
    if not weights:
        return LoadedRun(ckpt, {**checkpoint.read_config(ckpt), "path": str(ckpt)})
    # On the CPU first: MAP-Net borrows the encoder's token embedding, and both move to `device` together.
    model, meta = checkpoint.load_model(ckpt, "cpu", verify)  # verified above: its hashes are remembered
    run = LoadedRun(ckpt, meta, model)
    if with_proposal and has_proposal_weights(weight_names(ckpt / checkpoint.WEIGHTS)):
        if not isinstance(meta.get("mapnet"), dict):
            raise MapnetError(
                f'{ckpt / checkpoint.CONFIG} has MAP-Net weights but no "mapnet" entry (its size); '
                "every mapnet checkpoint with MAP-Net records it"
            )
        run.proposal = ProposalNetwork(ProposalConfig(**meta["mapnet"]), model.encoder.tok_embeddings)
        run.load_into({"mapnet": run.proposal})
        run.proposal.to(device)
    model.to(device)
    return run


def weight_names(path: Path) -> list[str]:
    """The tensor names in a safetensors file, read from its header only."""
    try:
        with safe_open(str(path), framework="pt") as fh:
            return list(fh.keys())
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise MapnetError(f"{path} is not a readable safetensors file ({exc}); truncated or corrupt?") from None


def recorded_shards(run_json: Path) -> Path | None:
    """shards.path of a run.json, or None when the file is missing, unreadable or silent about it."""
    try:
        return Path(json.loads(run_json.read_text(encoding="utf-8"))["shards"]["path"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


__all__ = ["LoadedRun", "load_run", "recorded_shards", "weight_names"]
