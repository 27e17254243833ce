"""Pretrained checkpoints as fine-tuning sees them: which ones, and their encoder.

    refs = find_checkpoints(latest=[Path("runs/bert")], every=[Path("runs/mapnet")])
    ref = refs[0]; ref.run, ref.step, ref.sha
    state, cfg, settings = load_encoder_state(ref)

Checkpoint folders and their rules (marker file, newest complete one) belong
to `mapnet_cli.checkpoint`; this module only picks which ones a sweep covers
and names them. Only the encoder's weights are read: the MLM head and MAP-Net
are discarded, as in the paper.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..atomic import sha256_file
from ..errors import MapnetError


@dataclass(frozen=True)
class CheckpointRef:
    path: Path
    run: str        # the pretraining run's folder name (a row of the paper's Table 2)
    step: int       # a column of Table 2
    sha: str        # sha256 of model.safetensors: results are keyed by it, not by the path

    @property
    def key(self) -> str:
        return f"{self.sha[:12]}@{self.step}"

    @property
    def label(self) -> str:
        return f"{self.run}@{self.step}"


def _describe(path: Path) -> CheckpointRef:
    from ..checkpoint import WEIGHTS, read_config, verify

    verify(path)  # a corrupt checkpoint stops the sweep before any run, by name
    step = int(read_config(path)["step"])
    run = path.parent.parent.name if path.parent.name == "checkpoints" else path.name
    weights = path / WEIGHTS
    if not weights.is_file():
        raise MapnetError(f"checkpoint {path} lacks {WEIGHTS}")
    return CheckpointRef(path=path.resolve(), run=run, step=step, sha=sha256_file(weights))


def find_checkpoints(latest: list[Path] | tuple[Path, ...] = (), every: list[Path] | tuple[Path, ...] = ()) -> list[CheckpointRef]:
    """`latest`: each path's newest complete checkpoint (or the checkpoint folder itself);
    `every`: every complete checkpoint of each run folder (a checkpoint folder counts as itself).

    De-duplicated by weights hash; ordered by run, then step.
    """
    from ..checkpoint import list_checkpoints, resolve_checkpoint

    paths = [resolve_checkpoint(p) for p in latest]
    for p in map(Path, every):
        if p.is_dir() and (p / "checkpoints").is_dir():
            found = [c for _, c in list_checkpoints(p)]
            if not found:
                raise MapnetError(f"run folder {p} has no complete checkpoint yet")
            paths.extend(found)
        else:
            paths.append(resolve_checkpoint(p))
    refs: dict[str, CheckpointRef] = {}
    for p in paths:
        ref = _describe(Path(p))
        refs.setdefault(ref.sha, ref)
    return sorted(refs.values(), key=lambda r: (r.run, r.step))


def load_encoder_state(ref: CheckpointRef):
    """(encoder state dict on CPU, BertConfig, the checkpoint's Settings)."""
    from ..checkpoint import TOKENIZER, WEIGHTS, load_settings, load_weights, read_config
    from ..model import BertConfig, Encoder

    if not (ref.path / TOKENIZER).is_file():
        raise MapnetError(f"checkpoint {ref.path} lacks {TOKENIZER}")
    cfg = BertConfig.from_dict(read_config(ref.path)["model"])
    encoder = Encoder(cfg)
    load_weights(ref.path / WEIGHTS, {"encoder": encoder})
    return encoder.state_dict(), cfg, load_settings(ref.path)
