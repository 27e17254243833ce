"""Held-out evaluation: fixed validation sequences under fixed masks, the same questions for every run.

The main set comes from the training shards' validation split; `train.extra_eval`
adds named sets from other shard folders (held-out books beside held-out
Wikipedia), each reported as eval_loss@NAME.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import atomic, distributed
from ..data.unigram import unigram_level
from ..errors import MapnetError
from ..masking.uniform import (
    EVAL_MASKS,
    SequenceRNG,
    apply_replacement,
    eligible_positions,
    sequence_keys,
    uniform_mask,
)
from ..model.bert import BertForMLM


@dataclass
class EvalSet:
    """N validation sequences (train.eval_pick) under fixed masks from train.eval_seed."""

    ids: np.ndarray
    inputs: torch.Tensor
    mask: torch.Tensor
    sha256: str
    source: dict | None = None  # train.extra_eval sets: their folder and manifest hash, for run.json
    unigram: float | None = None  # the plateau on these questions: -mean log p_train(masked target) (data/unigram.py)

    def set_unigram_level(self, log_p: np.ndarray) -> None:
        self.unigram = unigram_level(log_p, self.ids[self.mask.numpy()])


def build_eval_set(
    valid,
    count: int,
    eval_seed: int,
    masking,
    pick: str = "first",
    mask_prob: float | None = None,
    replace: str = "bert",
) -> EvalSet | None:
    """`pick`: "first" N sequences (fine when held-out documents are a hashed random sample), or
    N evenly "spread" over the split (a held-out set of whole files is stored file after file, so
    its first N sequences would all come from the first file). `mask_prob`: the evaluation masking
    rate (train.eval_mask_prob), default masking.mask_prob. `replace` (train.eval_replace): "mask"
    puts [MASK] at every masked position, "bert" replaces as training does (masking.replace_*)."""
    if pick not in ("first", "spread"):
        raise ValueError(f"unknown eval pick {pick!r}")
    n = min(count, len(valid))
    if n == 0:
        return None
    rows = np.arange(n) if pick == "first" else np.linspace(0, len(valid) - 1, n).round().astype(np.int64)
    ids = valid.take(rows)
    targets = torch.from_numpy(ids.astype(np.int64))
    rng = SequenceRNG(sequence_keys(eval_seed, 0, range(n), EVAL_MASKS))
    # Always exact-K uniform masks, whatever the run's strategy: every run answers the same questions.
    rate = masking.mask_prob if mask_prob is None else mask_prob
    mask = uniform_mask(targets, eligible_positions(targets, valid.special_ids), rate, "exact", rng)
    # The replacement draws are made either way, so "mask" and "bert" ask about the same positions.
    shares = (1.0, 0.0) if replace == "mask" else (masking.replace_mask, masking.replace_random)
    if replace not in ("mask", "bert"):
        raise ValueError(f"unknown eval replacement {replace!r}")
    inputs = apply_replacement(targets, mask, valid.vocab_size, valid.special_ids, *shares, rng)
    digest = hashlib.sha256()
    for t in (targets, inputs, mask):
        digest.update(t.numpy().tobytes())
    return EvalSet(ids, inputs, mask, digest.hexdigest())


@torch.no_grad()
def evaluate(
    model: BertForMLM,
    data: EvalSet,
    micro: int,
    autocast,
    info: distributed.DistInfo,
    pad_id: int,
    token_kinds: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Token-level MLM loss and accuracy over the eval set, split across ranks.

    With `token_kinds` (the synthetic corpus's {kind: token ids}) also the loss
    on the masked tokens of each kind: where a masking strategy's training
    helped, under the same questions for every run.
    """
    was_training = model.training
    model.eval()
    kinds = {k: torch.as_tensor(v, dtype=torch.long, device=info.device) for k, v in (token_kinds or {}).items()}
    sums = torch.zeros(3 + 2 * len(kinds), dtype=torch.float64, device=info.device)  # loss, correct, count, per kind
    mine = np.arange(info.rank, len(data.ids), info.world_size)
    for start in range(0, len(mine), micro):
        rows = torch.from_numpy(mine[start : start + micro])
        targets = torch.from_numpy(data.ids[rows.numpy()].astype(np.int64)).to(info.device)
        attn = targets != pad_id if (data.ids[rows.numpy()] == pad_id).any() else None
        with autocast:
            out = model(data.inputs[rows].to(info.device), attn, data.mask[rows].to(info.device), targets=targets)
        correct = (out.logits.argmax(-1) == out.labels).sum()
        parts = [
            out.token_losses.double().sum(),
            correct.double(),
            torch.tensor(float(len(out.labels)), device=info.device, dtype=torch.float64),
        ]
        for ids in kinds.values():
            of_kind = torch.isin(out.labels, ids)
            parts += [out.token_losses.double()[of_kind].sum(), of_kind.sum().double()]
        sums += torch.stack(parts)
    loss, correct, count, *per_kind = distributed.all_reduce_sum(sums, info).tolist()
    model.train(was_training)
    result = {
        "eval_loss": loss / max(count, 1),
        "eval_accuracy": correct / max(count, 1),
        "eval_masked_tokens": int(count),
        "eval_sequences": len(data.ids),
        "eval_sha256": data.sha256,
    }
    for i, kind in enumerate(kinds):
        kind_loss, kind_count = per_kind[2 * i], per_kind[2 * i + 1]
        result[f"eval_loss/{kind}"] = kind_loss / kind_count if kind_count else None
        result[f"eval_tokens/{kind}"] = int(kind_count)
    return result


def extra_eval_sets(settings, tokenizer_sha: str, max_position: int, has_main_set: bool) -> dict[str, EvalSet]:
    """train.extra_eval: NAME -> eval_sequences of that shard folder's validation split (train.eval_pick).

    Same eval seed and masks recipe as the main set, so e.g. held-out books and held-out
    Wikipedia can be reported separately while training on both. The folder must use the
    training shards' tokenizer, or its token ids would mean other words.
    """
    from ..data.shards import ShardReader

    s, t = settings, settings.train
    if t.extra_eval and not has_main_set:
        # evaluate() reports the extra sets beside the main one; without it they would silently vanish.
        raise MapnetError(
            "train.extra_eval needs a validation split in the training shards too "
            "(shard them with shard.valid_fraction > 0)"
        )
    sets = {}
    for entry in t.extra_eval:
        name, _, folder = entry.partition("=")
        reader = ShardReader(folder, "valid", verify=s.shard.verify)
        if reader.tokenizer_sha256 != tokenizer_sha:
            raise MapnetError(
                f"train.extra_eval {name}: {folder} was encoded with another tokenizer than the training shards "
                "(preprocess it with --tokenizer pointing at the training corpus's tokenizer.json)"
            )
        if reader.max_seq_len > max_position:
            raise MapnetError(
                f"train.extra_eval {name}: {folder} holds {reader.max_seq_len}-token sequences "
                f"but model.max_position is {max_position}"
            )
        data = build_eval_set(
            reader, t.eval_sequences, t.eval_seed, s.masking, t.eval_pick, t.eval_mask_prob, t.eval_replace
        )
        if data is None:
            raise MapnetError(f"train.extra_eval {name}: {folder} has no validation sequences")
        data.source = {
            "path": str(Path(folder).resolve()),
            "manifest_sha256": atomic.sha256_file(reader.dir / "manifest.json"),
        }
        sets[name] = data
    return sets


__all__ = ["EvalSet", "build_eval_set", "evaluate", "extra_eval_sets"]
