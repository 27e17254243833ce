"""What `mapnet blimp` scores: checkpoints, exported Hugging Face folders and their controls, each with
the text path its pretraining used.

    targets = find_targets([Path("runs/tiny")])          # every complete checkpoint of a run: a curve
    targets = find_targets([Path("hf/tiny")])            # a `mapnet export` (or any local BERT MLM folder)
    controls, links, notes = control_targets(targets)   # random weights + the unigram model, per architecture
    model = targets[0].build()                           # BertForMLM, or None for the unigram control
    seqs = targets[0].text.tokenise(["The cat sat."])   # ids, no specials

Text: a mapnet checkpoint reads raw text through `TextEncoder` (its recorded preprocess settings, then its
tokenizer), an exported folder through its own `tokenizer.json`. The controls are `finetune-glue`'s: random
weights (BERT's init from `random_init_seed(pretraining seed, 0)`, so two pretraining seeds get independent
controls) and the frequencies-only model of the checkpoint's training shards (run.json's, or `--shards`), each
scored through the same text path as the model it controls. The guide:
docs/evaluation.md#zero-shot-grammar-at-every-checkpoint-mapnet-blimp.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...atomic import sha256_file
from ...errors import MapnetError


@dataclass
class TextPath:
    """Raw sentence -> token ids (no specials), as one model's pretraining read text."""

    key: str  # identity: tokenizer bytes + cleaning
    tokenise: Callable[[list[str]], list[np.ndarray]]
    cls_id: int
    sep_id: int
    mask_id: int
    word_start: np.ndarray  # (V,) bool, `scoring.word_starts`


def _specials(tok, where: Path) -> tuple[int, int, int]:
    from ...data.bpe import special_ids

    ids = special_ids(tok, where)
    return ids["[CLS]"], ids["[SEP]"], ids["[MASK]"]


def mapnet_text(ckpt: Path, settings, rows: int | None = None) -> TextPath:
    """`ckpt`'s cleaning and tokenizer; `rows`: its model's embedding rows, which every id must index (None: a
    tokenizer with no model yet, `compare`'s shards before training)."""
    from ...data.bpe import check_fits
    from ...data.cleaning import cleaning_settings
    from ..glue.encode import TextEncoder
    from .scoring import word_starts

    encoder = TextEncoder(ckpt / "tokenizer.json", settings.preprocess, max_len=1 << 30)
    if rows is not None:
        check_fits(encoder.tokenizer, ckpt / "tokenizer.json", rows, f"checkpoint {ckpt}")
    clean = cleaning_settings(settings.preprocess)
    key = hashlib.sha256(
        json.dumps({"tok": sha256_file(ckpt / "tokenizer.json"), "clean": clean}, sort_keys=True).encode()
    ).hexdigest()
    cls_id, sep_id, mask_id = _specials(encoder.tokenizer, ckpt / "tokenizer.json")
    return TextPath(key, encoder.tokenise, cls_id, sep_id, mask_id, word_starts(encoder.tokenizer))


def hf_text(folder: Path, rows: int) -> TextPath:
    """`folder`'s own tokenizer; `rows`: the model's embedding rows, which every id it gives must index."""
    from tokenizers import Tokenizer

    from ...data.bpe import check_fits
    from .scoring import word_starts

    path = folder / "tokenizer.json"
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise MapnetError(f"cannot read tokenizer {path}: {exc}") from None
    cls_id, sep_id, mask_id = _specials(tok, path)
    check_fits(tok, path, rows, f"the model in {folder}")  # a swapped tokenizer.json: not IndexError mid-scoring

    def tokenise(texts: list[str]) -> list[np.ndarray]:
        return [np.asarray(e.ids, dtype=np.int64) for e in tok.encode_batch(texts, add_special_tokens=False)]

    return TextPath(sha256_file(path), tokenise, cls_id, sep_id, mask_id, word_starts(tok))


@dataclass
class Target:
    """One scored model: a checkpoint, an exported folder, or a control of one of them."""

    run: str
    step: int | None
    sha: str  # weights sha256 (a control: its identity)
    path: Path
    init: str  # "pretrained" | "random" | "unigram"
    text: TextPath
    build: Callable[[], object] = field(repr=False)  # -> BertForMLM (pretrained, random), or (V,) log p (unigram)
    arch: dict = field(default_factory=dict, repr=False)
    pretraining_seed: int = 0
    shards: Path | None = None  # training shards, for the unigram control
    origin: int = 0  # which of the paths given it came from
    tokenizer_sha: str | None = None  # the pretraining tokenizer's (shards must match it)

    @property
    def label(self) -> str:
        return self.run if self.step is None else f"{self.run}@{self.step}"


def _is_hf_folder(path: Path) -> bool:
    """`--init-from`'s rule, through its reader: a config.json that is not JSON is named as such, never taken
    for an incomplete mapnet checkpoint."""
    from ...model.hf_layout import folder_kind

    return not (path / "COMPLETE").is_file() and folder_kind(path) == "huggingface"


def _hf_target(folder: Path) -> Target:
    import torch

    from ...data.export_record import read_export_record
    from ...model.bert import BertConfig, BertForMLM
    from ...train.init_from import has_mlm_head, load_into, open_source

    source = open_source(
        folder, role=""
    )  # what --init-from accepts: a BERT or pre-LN RoBERTa MLM folder, safetensors only
    if not has_mlm_head(source):  # refused here, before any model is scored: never a partial output
        raise MapnetError(f"{folder} has no MLM head (a BertModel): BLiMP scores the masked-LM's own predictions")
    a = source.arch
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    init_std = config.get("initializer_range", 0.02)
    cfg = BertConfig(
        vocab_size=a["vocab_size"],
        layers=a["layers"],
        hidden=a["hidden"],
        heads=a["heads"],
        intermediate=a["intermediate"],
        max_position=a["max_position"],
        dropout=float(config.get("hidden_dropout_prob", config.get("embedding_dropout", 0.1))),  # BERT's, ModernBERT's
        attention_dropout=float(config.get("attention_probs_dropout_prob", config.get("attention_dropout", 0.1))),
        layer_norm_eps=a["layer_norm_eps"],
        init_std=float(init_std),
        pad_id=a["pad_id"],
        norm=a["norm"],
        block=a["block"],
        rope_theta=a["rope_theta"],
    )
    # A mapnet export records its pretraining seed: its random control is then the checkpoint's own.
    record = read_export_record(folder)  # damaged: one line naming it, as everywhere
    seed, tokenizer_sha = (record.pretraining_seed, record.tokenizer_sha256) if record else (0, None)

    def build():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = BertForMLM(cfg)
        load_into(source, model)
        return model

    # Loaded once here and dropped: weights that do not fit config.json (a tensor of another shape, a layer
    # missing) were found when this model's turn came, after every model before it had been scored.
    build()
    return Target(
        folder.name,
        None,
        sha256_file(source.weights),
        folder.resolve(),
        "pretrained",
        hf_text(folder, cfg.vocab_size),
        build,
        cfg.to_dict(),
        seed,
        None,
        tokenizer_sha=tokenizer_sha,
    )


def _mapnet_targets(path: Path) -> list[Target]:
    from ...data.cleaning import cleaning_settings
    from ...model.bert import BertConfig
    from ...model.checkpoint import load_settings, read_config
    from ...train.run_loader import load_run, recorded_shards
    from ..glue.pretrained import find_checkpoints

    out = []
    texts: dict[tuple, TextPath] = {}
    for ref in find_checkpoints(every=[path]):
        settings = load_settings(ref.path)
        arch = BertConfig.from_dict({"norm": "post", **read_config(ref.path)["model"]}).to_dict()
        cleaning = (
            sha256_file(ref.path / "tokenizer.json"),
            arch["vocab_size"],
            *cleaning_settings(settings.preprocess).values(),
        )
        text = texts.get(cleaning) or texts.setdefault(cleaning, mapnet_text(ref.path, settings, arch["vocab_size"]))

        def build(p=ref.path):
            return load_run(p, with_proposal=False).model

        shards = recorded_shards(ref.path.parent.parent / "run.json")
        out.append(
            Target(
                ref.run,
                ref.step,
                ref.sha,
                ref.path,
                "pretrained",
                text,
                build,
                arch,
                settings.train.seed,
                shards,
                tokenizer_sha=read_config(ref.path).get("tokenizer_sha256"),
            )
        )
    return out


def find_targets(paths: list[Path]) -> list[Target]:
    """Run folders (every complete checkpoint), checkpoint folders and exported Hugging Face folders, in the
    order given, each checkpoint once (by weights hash)."""
    seen, out = set(), []
    for origin, p in enumerate(map(Path, paths)):
        if not p.is_dir():
            raise MapnetError(f"{p}: no such folder (a run, a checkpoint or an exported Hugging Face folder)")
        for t in [_hf_target(p)] if _is_hf_folder(p) else _mapnet_targets(p):
            if t.sha not in seen:
                seen.add(t.sha)
                t.origin = origin
                out.append(t)
    return out


def _random_control(t: Target, name: str) -> Target:
    from ...model.bert import BertConfig, BertForMLM
    from ..glue.pretrained import random_init_seed

    cfg = BertConfig.from_dict(t.arch)

    def build():
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(random_init_seed(t.pretraining_seed, 0))
            return BertForMLM(cfg)

    identity = json.dumps(
        {"init": "random", "arch": t.arch, "text": t.text.key, "seed": t.pretraining_seed}, sort_keys=True
    )
    return Target(
        name,
        None,
        hashlib.sha256(identity.encode()).hexdigest(),
        t.path,
        "random",
        t.text,
        build,
        t.arch,
        t.pretraining_seed,
        t.shards,
    )


def _training_shards_manifest(t: Target, shards: Path) -> str:
    """The sha256 of `shards`' manifest, once they are checked to be `t`'s training data (its tokenizer): checked
    before any model is scored, so a wrong --shards never leaves a partial output."""
    from ...data.shards import ShardReader

    with ShardReader(shards, "train") as reader:
        if reader.vocab_size != t.arch["vocab_size"] or t.tokenizer_sha not in (None, reader.tokenizer_sha256):
            raise MapnetError(
                f"shards {shards} were made with another tokenizer than {t.path} was pretrained "
                "with: not its training data"
            )
        return sha256_file(reader.dir / "manifest.json")


def _unigram_control(t: Target, shards: Path, name: str, manifest: str) -> Target:
    from ...data.shards import ShardReader
    from ...data.unigram import unigram_log_probs

    def build():
        with ShardReader(shards, "train") as reader:
            return unigram_log_probs(reader)

    # By the shards' contents (their manifest), not their path: shards rebuilt in place are another control.
    identity = json.dumps({"init": "unigram", "shards": manifest, "text": t.text.key}, sort_keys=True)
    return Target(
        name,
        None,
        hashlib.sha256(identity.encode()).hexdigest(),
        shards,
        "unigram",
        t.text,
        build,
        t.arch,
        t.pretraining_seed,
        shards,
        tokenizer_sha=t.tokenizer_sha,
    )


def control_targets(
    targets: list[Target], shards: Path | None = None, random: bool = True, unigram: bool = True
) -> tuple[list[Target], dict[str, dict[str, str]], list[str]]:
    """The controls of `targets`, one per distinct architecture + text path + pretraining seed (random) and
    per shards + text path (unigram), {target sha: {"random": control sha, "unigram": control sha}}, and
    notes on controls that could not be made. `shards` overrides the recorded training shards (an
    exported folder records none)."""
    made: dict[str, Target] = {}
    of: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    randoms = [t for t in targets if t.init == "pretrained"]
    manifests: dict[tuple, str] = {}  # every checkpoint of a run names the same shards: read and check them once
    for t in randoms:
        links = of.setdefault(t.sha, {})
        if random:
            ctl = _random_control(t, "random-init")
            made.setdefault(ctl.sha, ctl)
            links["random"] = ctl.sha
        where = shards or t.shards
        if unigram and where is None:
            notes.append(f"no unigram control for {t.label}: it records no training shards (give --shards)")
        if unigram and where is not None:
            if not Path(where).is_dir():
                raise MapnetError(
                    f"training shards {where} of {t.label}: no such folder (give --shards, or --no-unigram)"
                )
            key = (Path(where), t.arch["vocab_size"], t.tokenizer_sha)
            if key not in manifests:
                manifests[key] = _training_shards_manifest(t, Path(where))
            ctl = _unigram_control(t, Path(where), "unigram", manifests[key])
            made.setdefault(ctl.sha, ctl)
            links["unigram"] = ctl.sha
    controls = list(made.values())
    for kind in ("random", "unigram"):  # several controls of one kind: name each by its first model's run
        group = [c for c in controls if c.init == kind]
        if len(group) > 1:
            for c in group:
                first = next(t for t in randoms if of[t.sha].get(kind) == c.sha)
                c.run = f"{c.run}/{first.run}"
    return controls, of, notes


__all__ = ["TextPath", "Target", "find_targets", "control_targets", "mapnet_text", "hf_text"]
