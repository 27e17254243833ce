"""What `mapnet variance` measures: a checkpoint on disk, its MAP-Net, and validation shards."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from ...errors import MapnetError


@dataclass
class Target:
    """What `mapnet variance` measures: a checkpoint's model (+ MAP-Net) and its validation sequences."""

    model: torch.nn.Module
    proposal: torch.nn.Module | None
    reader: object  # ShardReader of the validation split
    settings: object  # the checkpoint's own settings (masking as trained)
    meta: dict  # config.json + path


def load_target(path, data=None) -> Target:
    """Load a checkpoint (or a run's newest), its MAP-Net when it has one, and the validation shards.

    The shards are `data`, else the folder recorded in the run's run.json.
    Refuses shards encoded with another tokenizer than the checkpoint's.
    """
    from ...data.shards import ShardReader
    from ...train.run_loader import load_run

    run = load_run(path)
    ckpt, settings, meta = run.checkpoint, run.settings, run.meta
    if data is None:
        data = run.shards
        if data is None:
            raise MapnetError(
                f"cannot tell which shards {ckpt} was trained on ({run.run_json} is missing or has no "
                "shards.path); pass --data SHARDS"
            )
    reader = ShardReader(Path(data), "valid", verify=settings.shard.verify)
    if len(reader) == 0:
        raise MapnetError(
            f"{reader.dir} has no validation sequences (shard.valid_fraction was 0); the variance is measured on "
            "held-out data"
        )
    if reader.manifest.get("tokenizer_sha256") != meta.get("tokenizer_sha256"):
        raise MapnetError(f"{reader.dir} was encoded with another tokenizer than {ckpt}")
    return Target(run.model, run.proposal, reader, settings, meta)


__all__ = ["Target", "load_target"]
