"""Pretrained checkpoints as fine-tuning sees them: which ones, and their encoder.

    refs = find_checkpoints(latest=[Path("runs/bert")], every=[Path("runs/mapnet")])
    ref = refs[0]; ref.run, ref.step, ref.sha
    state, cfg, settings = load_encoder_state(ref)
    refs, controls = with_controls(refs, "both")    # + the random-init control of each architecture

Checkpoint folders and their rules (marker file, newest complete one) are `model.checkpoint`'s; this module picks
which ones a sweep covers and names them. Only encoder weights are read (MLM head and MAP-Net dropped, as the paper).

The random-init control (`finetune-glue --init random|both`, `compare`'s control row, `mapnet probe`) fine-tunes a
checkpoint's architecture, tokenizer and cleaning from random weights: for fine-tuning seed s of a checkpoint
pretrained with `train.seed` p, BERT's init under `torch.manual_seed(random_init_seed(p, s))`, built in a forked
RNG so the two arms differ only in the encoder weights (paired by seed). Why, and the seed's derivation:
docs/evaluation.md#the-random-init-control-init-random-init-both.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

from ...atomic import sha256_file
from ...errors import MapnetError

CONTROL = "random-init"  # the run name of a random-init control (a row of every table)


@dataclass(frozen=True)
class CheckpointRef:
    path: Path
    run: str  # the pretraining run's folder name (a row of the paper's Table 2)
    step: int  # a column of Table 2
    sha: str  # sha256 of model.safetensors: results are keyed by it, not by the path
    # "pretrained": the checkpoint's weights; "random": its architecture from random weights
    # (a control: `sha` then identifies architecture + tokenizer + cleaning + pretraining seed, not a file).
    init: str = "pretrained"
    init_seed: int | None = None  # random: the pretraining seed p that random_init_seed(p, s) mixes in

    @property
    def key(self) -> str:
        return f"{self.sha[:12]}@{self.step}"

    @property
    def label(self) -> str:
        return f"{self.run}@{self.step}"


def _describe(path: Path) -> CheckpointRef:
    from ...model.checkpoint import WEIGHTS, read_config, verify

    verify(path)  # a corrupt checkpoint stops the sweep before any run, by name
    step = int(read_config(path)["step"])
    run = path.parent.parent.name if path.parent.name == "checkpoints" else path.name
    weights = path / WEIGHTS
    if not weights.is_file():
        raise MapnetError(f"checkpoint {path} lacks {WEIGHTS}")
    return CheckpointRef(path=path.resolve(), run=run, step=step, sha=sha256_file(weights))


def find_checkpoints(
    latest: list[Path] | tuple[Path, ...] = (), every: list[Path] | tuple[Path, ...] = ()
) -> list[CheckpointRef]:
    """`latest`: each path's newest complete checkpoint (or the checkpoint folder itself);
    `every`: every complete checkpoint of each run folder (a checkpoint folder counts as itself).

    De-duplicated by weights hash; ordered by run, then step.
    """
    from ...model.checkpoint import list_checkpoints, resolve_checkpoint

    paths = [resolve_checkpoint(p) for p in latest]
    for p in map(Path, every):
        if p.is_dir() and (p / "checkpoints").is_dir():
            found = [c for _, c in list_checkpoints(p)]
            if not found:
                raise MapnetError(f"run folder {p} has no complete checkpoint yet")
            # Verified here, every one: a damaged checkpoint of a curve is refused before the first is evaluated,
            # not after (each file is hashed once per process, so loading it later costs no second hash).
            paths.extend(resolve_checkpoint(c) for c in found)
        else:
            paths.append(resolve_checkpoint(p))
    refs: dict[str, CheckpointRef] = {}
    for p in paths:
        ref = _describe(Path(p))
        refs.setdefault(ref.sha, ref)
    return sorted(refs.values(), key=lambda r: (r.run, r.step))


def random_init_seed(pretraining_seed: int, finetune_seed: int) -> int:
    """The torch seed of the random encoder for (pretraining seed p, fine-tuning seed s): 63 bits of sha256."""
    digest = hashlib.sha256(f"mapnet.random-init/{pretraining_seed}/{finetune_seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def random_encoder(cfg, pretraining_seed: int, finetune_seed: int):
    """A freshly initialised `Encoder` of architecture `cfg`, deterministic per (pretraining seed, fine-tuning seed).

    Built exactly as pretraining builds its model (`BertForMLM`, BERT's init), in a forked RNG: the
    caller's random state is left as found, so the head, dropout and data order that follow are
    those of the same fine-tuning seed on the pretrained checkpoint.
    """
    import torch

    from ...model.bert import BertForMLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(random_init_seed(pretraining_seed, finetune_seed))
        return BertForMLM(cfg).encoder


def random_init_ref(ref: CheckpointRef, run: str = CONTROL) -> CheckpointRef:
    """The random-init control of `ref`: its architecture, tokenizer, cleaning and pretraining seed."""
    from ...model.checkpoint import TOKENIZER, load_settings, read_config

    if not (ref.path / TOKENIZER).is_file():
        raise MapnetError(f"checkpoint {ref.path} lacks {TOKENIZER}")
    settings = load_settings(ref.path)
    identity = {
        "init": "random",
        "version": 1,
        "model": read_config(ref.path)["model"],
        "tokenizer": sha256_file(ref.path / TOKENIZER),
        "clean": {k: getattr(settings.preprocess, k) for k in ("lowercase", "normalize_punctuation", "moses_lang")},
        "pretraining_seed": settings.train.seed,
    }
    sha = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return CheckpointRef(path=ref.path, run=run, step=0, sha=sha, init="random", init_seed=settings.train.seed)


def with_controls(refs: list[CheckpointRef], init: str) -> tuple[list[CheckpointRef], dict[str, str]]:
    """What `--init` fine-tunes, and each checkpoint's control: (refs, {checkpoint key: control key}).

    "pretrained": `refs` unchanged, no controls. "random": only the controls, one per distinct
    (architecture, tokenizer, cleaning, pretraining seed) among `refs` (the checkpoints of one run
    share one). "both": the checkpoints, then their controls, and the mapping used for margins.
    A single control is called "random-init"; several are "random-init/<run>".
    """
    if init not in ("pretrained", "random", "both"):
        raise MapnetError(f"--init must be pretrained, random or both (got {init!r})")
    if init == "pretrained":
        return list(refs), {}
    controls, of = {}, {}
    for ref in refs:
        ctl = random_init_ref(ref)
        controls.setdefault(ctl.sha, (ctl, ref.run))
        of[ref.key] = ctl.key
    names: dict[str, str] = {}
    for sha, (_, run) in controls.items():
        name = CONTROL if len(controls) == 1 else f"{CONTROL}/{run}"
        names[sha] = name if name not in names.values() else f"{name}/{sha[:8]}"
    made = [replace(ctl, run=names[sha]) for sha, (ctl, _) in controls.items()]
    return (made if init == "random" else [*refs, *made]), (of if init == "both" else {})


def load_architecture(ref: CheckpointRef):
    """(BertConfig, the checkpoint's Settings) without reading its weights."""
    from ...model.bert import BertConfig
    from ...model.checkpoint import TOKENIZER, load_settings, read_config

    if not (ref.path / TOKENIZER).is_file():
        raise MapnetError(f"checkpoint {ref.path} lacks {TOKENIZER}")
    return BertConfig.from_dict(read_config(ref.path)["model"]), load_settings(ref.path)


def load_encoder_state(ref: CheckpointRef):
    """(encoder state dict on CPU, BertConfig, the checkpoint's Settings). The MLM head is read and
    dropped with the rest: fine-tuning starts from the encoder alone, as in the paper."""
    from ...model.checkpoint import TOKENIZER
    from ...train.run_loader import load_run

    if not (ref.path / TOKENIZER).is_file():
        raise MapnetError(f"checkpoint {ref.path} lacks {TOKENIZER}")
    run = load_run(
        ref.path, with_proposal=False
    )  # verified on read, as everywhere (hashed once per process while unchanged)
    return run.model.encoder.state_dict(), run.model.cfg, run.settings
