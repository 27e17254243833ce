"""MLM pretraining: data order, micro-batches, `train_step`, evaluation, the loop.

    mapnet pretrain shards/ --out runs/tiny --preset tiny --set train.steps=2000
    mapnet pretrain shards/ --out runs/base --gpus 8
    mapnet pretrain shards/ --out runs/mapnet --preset base --masking mapnet
    torchrun --nproc-per-node 8 -m mapnet_cli.cli pretrain shards/ --out runs/base

Library entry point: `pretrain(settings, shards, out, resume=..., on_report=...)`.

Data order. Epoch e visits the training sequences in the permutation seeded
by train.seed + e; the run is one stream through the epochs, and a step takes
the next `train.batch_size` sequences of it. The data position (sequences
consumed) is saved in every checkpoint.

Splitting. The global batch's slots are cut into equal contiguous parts, one
per rank, and each part into micro-batches. Masks come from per-sequence
streams keyed by (seed, step, slot) (`masking.SequenceRNG`), so neither the
data nor the masks depend on how the batch is split.

Loss normalisation (mapnet choice). The objective of a step is the mean over
the global batch's B sequences of each sequence's mean masked-token loss — the
paper's per-sentence loss l(theta; x^M, x), the quantity MAP-Net's importance
weight multiplies. Each micro-batch contributes sum(l_s) x world / B; DDP
averages over ranks, so the summed gradient is exactly that of one big batch,
with no extra communication (B is a constant). Per-token normalisation would
need the global masked count and would let long sequences outweigh short ones,
which breaks per-sequence importance weighting.

Masking strategy. A strategy object (`strategy.py`: uniform, stratified,
frequency; `mapnet.training.MapnetTraining`) owns what differs — how a
micro-batch is masked and weighted, the modules DDP wraps and the checkpoint
stores, the loss of a step, extra metrics — so the loop below is the same for
all of them.

Dropout. The RNG is reseeded at each step from (seed, step, rank), which makes
a resumed run bit-identical to an uninterrupted one whatever the world size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import resource
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import numpy as np
import torch

from .. import __version__ as mapnet_version
from .. import atomic, checkpoint, distributed, init_from, tracking
from ..errors import MapnetError
from ..masking import (DROPOUT, EVAL_MASKS, TRAIN_MASKS, SequenceRNG, apply_replacement, eligible_positions, mix_seed,
                      sequence_keys, uniform_mask)
from ..model import BertConfig, BertForMLM
from ..optim import build_optimizer, build_scheduler
from ..mapnet.training import MapnetTraining
from ..strategy import FrequencyTraining, MicroBatch, StratifiedTraining, Strategy, UniformTraining, mlm_loss
from ..word_masking import UNIT_STRATEGIES
Report = Callable[[str, dict], None]


# ---------------------------------------------------------------- data
class DataOrder:
    """Sequence indices at stream positions: epoch e is permutation(seed + e)."""

    def __init__(self, n: int, seed: int):
        self.n, self.seed, self._cache = n, seed, (None, None)

    def _perm(self, epoch: int) -> np.ndarray:
        if self._cache[0] != epoch:  # a permutation of millions costs ~0.1 s: once per epoch
            self._cache = (epoch, np.random.default_rng(self.seed + epoch).permutation(self.n))
        return self._cache[1]

    def take(self, position: int, count: int) -> np.ndarray:
        out = []
        while count:
            epoch, offset = divmod(position, self.n)
            part = self._perm(epoch)[offset:offset + count]
            out.append(part)
            position, count = position + len(part), count - len(part)
        return np.concatenate(out) if out else np.empty(0, np.int64)


def rank_micro_slots(batch_size: int, world: int, rank: int, micro: int) -> list[range]:
    """The global-batch slots each of this rank's micro-batches holds."""
    per_rank = batch_size // world
    start = rank * per_rank
    return [range(s, min(s + micro, start + per_rank)) for s in range(start, start + per_rank, micro)]


def make_batch(ids: np.ndarray, keys: Sequence[int], special_ids: dict, vocab_size: int, masking,
               device: torch.device, slots: range | None = None) -> MicroBatch:
    """Uniform masks + 80/10/10 replacement for `ids`, each row from its own keyed stream (the uniform
    strategy's micro-batch; benchmarks and tests build batches without a run)."""
    data = SimpleNamespace(special_ids=special_ids, vocab_size=vocab_size)
    strategy = UniformTraining(SimpleNamespace(masking=masking), None, data)
    return strategy.micro_batch(ids, 0, slots, keys, device)


STRATEGIES = {"uniform": UniformTraining, "stratified": StratifiedTraining, "frequency": FrequencyTraining,
              "mapnet": MapnetTraining, **UNIT_STRATEGIES}


def training_strategy(settings, model: BertForMLM, data, info: distributed.DistInfo) -> Strategy:
    """The strategy object for `settings.masking.strategy`; call it right after building the encoder
    (a MAP-Net run then starts from the same encoder weights as a uniform run with the same seed)."""
    return STRATEGIES[settings.masking.strategy](settings, model, data, info)


# ---------------------------------------------------------------- one optimizer step
class NonFiniteLoss(Exception):
    pass


@dataclass
class StepStats:
    loss: float        # mean per-sequence loss over the global batch
    grad_norm: float   # before clipping
    lr: float
    masked: int
    tokens: int


def train_step(model, optimizer, scheduler, batches: list[MicroBatch], *, scale: float, grad_clip: float,
               autocast, info: distributed.DistInfo, batch_size: int, loss_fn=mlm_loss) -> StepStats:
    """Forward/backward every micro-batch (gradients all-reduced on the last), clip, step."""
    model.train()
    totals = torch.zeros(3, dtype=torch.float64, device=info.device)
    for i, batch in enumerate(batches):
        with distributed.no_sync(model, sync=i == len(batches) - 1):
            with autocast:
                loss, seq_sum, masked = loss_fn(model, batch, scale)
            loss.backward()
        totals += torch.stack([seq_sum.double(), masked.double(), torch.tensor(float(batch.tokens), device=info.device, dtype=torch.float64)])
    params = [p for p in model.parameters() if p.grad is not None]
    grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params])  # logged every step
    if grad_clip:  # not clip_grad_norm_(inf): it would still multiply every gradient by 1.0, a full pass for nothing
        torch.nn.utils.clip_grads_with_norm_(params, grad_clip, grad_norm)
    distributed.all_reduce_sum(totals, info)
    seq_sum, masked, tokens, norm = torch.cat([totals, grad_norm.double().view(1)]).tolist()  # the one sync
    lr = optimizer.param_groups[0]["lr"]
    if not (np.isfinite(seq_sum) and np.isfinite(norm)):
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteLoss(f"loss {seq_sum / batch_size:.4g}, gradient norm {norm:.4g}")
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return StepStats(seq_sum / batch_size, norm, lr, int(masked), int(tokens))


# ---------------------------------------------------------------- evaluation
@dataclass
class EvalSet:
    """N validation sequences (train.eval_pick) under fixed masks from train.eval_seed."""

    ids: np.ndarray
    inputs: torch.Tensor
    mask: torch.Tensor
    sha256: str
    source: dict | None = None  # train.extra_eval sets: their folder and manifest hash, for run.json


def build_eval_set(valid, count: int, eval_seed: int, masking, pick: str = "first",
                   mask_prob: float | None = None) -> EvalSet | None:
    """`pick`: "first" N sequences (fine when held-out documents are a hashed random sample), or
    N evenly "spread" over the split (a held-out set of whole files is stored file after file, so
    its first N sequences would all come from the first file). `mask_prob`: the evaluation masking
    rate (train.eval_mask_prob), default masking.mask_prob."""
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
    inputs = apply_replacement(targets, mask, valid.vocab_size, valid.special_ids, masking.replace_mask,
                               masking.replace_random, rng)
    digest = hashlib.sha256()
    for t in (targets, inputs, mask):
        digest.update(t.numpy().tobytes())
    return EvalSet(ids, inputs, mask, digest.hexdigest())


@torch.no_grad()
def evaluate(model: BertForMLM, data: EvalSet, micro: int, autocast, info: distributed.DistInfo,
             pad_id: int, token_kinds: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
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
        rows = torch.from_numpy(mine[start:start + micro])
        targets = torch.from_numpy(data.ids[rows.numpy()].astype(np.int64)).to(info.device)
        attn = targets != pad_id if (data.ids[rows.numpy()] == pad_id).any() else None
        with autocast:
            out = model(data.inputs[rows].to(info.device), attn, data.mask[rows].to(info.device), targets=targets)
        correct = (out.logits.argmax(-1) == out.labels).sum()
        parts = [out.token_losses.double().sum(), correct.double(), torch.tensor(float(len(out.labels)), device=info.device, dtype=torch.float64)]
        for ids in kinds.values():
            of_kind = torch.isin(out.labels, ids)
            parts += [out.token_losses.double()[of_kind].sum(), of_kind.sum().double()]
        sums += torch.stack(parts)
    loss, correct, count, *per_kind = distributed.all_reduce_sum(sums, info).tolist()
    model.train(was_training)
    result = {"eval_loss": loss / max(count, 1), "eval_accuracy": correct / max(count, 1),
              "eval_masked_tokens": int(count), "eval_sequences": len(data.ids), "eval_sha256": data.sha256}
    for i, kind in enumerate(kinds):
        kind_loss, kind_count = per_kind[2 * i], per_kind[2 * i + 1]
        result[f"eval_loss/{kind}"] = kind_loss / kind_count if kind_count else None
        result[f"eval_tokens/{kind}"] = int(kind_count)
    return result


# ---------------------------------------------------------------- run bookkeeping
def memory_bytes(device: torch.device) -> int:
    """Peak CUDA memory allocated, or the process's peak resident set on CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


class MetricsLog:
    """JSON lines in RUN/metrics.jsonl, appended and flushed line by line (rank 0 only); each record also
    goes to the TensorBoard / W&B sinks (`tracking.py`), so they show exactly what the file holds."""

    def __init__(self, path: Path, enabled: bool, resume_step: int | None, sinks: Sequence = ()):
        self.path, self.enabled, self.sinks = path, enabled, list(sinks)
        if enabled and path.exists():
            # Resumed: lines past the checkpoint were written by the interrupted run, which this one rewrites.
            # Fresh: every line is from an earlier run that never checkpointed, none of them this run's.
            lines = path.read_text(encoding="utf-8").splitlines() if resume_step is not None else []
            keep = [ln for ln in lines if _line_step(ln) <= resume_step]
            atomic.write_text(path, "".join(ln + "\n" for ln in keep))

    def write(self, record: dict) -> None:
        if self.enabled:
            # A full disk may leave a torn last line: _line_step drops it on resume.
            with atomic.full_disk_is_an_error(self.path), open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
            if self.sinks:  # flattening the record is only for TensorBoard / W&B
                values = list(tracking.scalars(record))
                for sink in self.sinks:
                    sink.write(int(record["step"]), values)

    def close(self, failed: bool = False) -> None:
        """Close every sink. After a failed run a sink's own close error (a full disk, a dead W&B service) is
        swallowed, so the error that stopped the run is the one the user sees."""
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            if failed:
                with contextlib.suppress(Exception):
                    sink.close(True)
            else:
                sink.close(False)


def _line_step(line: str) -> float:
    try:
        return json.loads(line).get("step", float("inf"))
    except ValueError:
        return float("inf")  # a torn last line from a killed run


def versions() -> dict[str, str]:
    import safetensors

    return {"python": platform.python_version(), "mapnet": mapnet_version, "torch": torch.__version__,
            "numpy": np.__version__, "safetensors": safetensors.__version__}


def precision_context(precision: str, device: torch.device):
    bf16 = precision == "bf16" or (precision == "auto" and device.type == "cuda")
    return torch.autocast(device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


# ---------------------------------------------------------------- the run
def pretrain(settings, shards: str | os.PathLike, out: str | os.PathLike, *, resume: bool = False,
             stop_at: int | None = None, command_line: Sequence[str] = (), on_report: Report | None = None) -> Path:
    """Train (or continue) the run in `out` on `shards`; return the last checkpoint's path."""
    with distributed.process_group(settings.train.device, settings.distributed.backend) as info:
        run = Run(settings, Path(shards), Path(out), info, resume, list(command_line))
        quiet = not info.is_main or on_report is None  # one progress display per job
        failed = True
        try:
            last = run.train(stop_at, (lambda kind, data: None) if quiet else on_report)
            failed = False
            return last
        finally:
            run.metrics.close(failed)


class Run:
    """Everything a training run holds: data, model, optimizer, position, output folder."""

    def __init__(self, settings, shards: Path, out: Path, info: distributed.DistInfo, resume: bool, argv: list[str]):
        from ..data.shards import ShardReader

        s, t = settings, settings.train
        self.settings, self.out, self.info = settings, out, info
        tracking.require(s.logging)  # every rank, before any work: a missing extra is one line, not a hang
        if t.batch_size % info.world_size:
            raise MapnetError(f"train.batch_size ({t.batch_size}) must be divisible by the world size ({info.world_size})")
        self.micro = t.micro_batch_size or t.batch_size // info.world_size
        self.data = ShardReader(shards, "train", verify=s.shard.verify)
        if len(self.data) == 0:
            raise MapnetError(f"{shards} has no training sequences")
        self.valid = ShardReader(shards, "valid", verify=s.shard.verify)
        self.eval_set = build_eval_set(self.valid, t.eval_sequences, t.eval_seed, s.masking, t.eval_pick, t.eval_mask_prob)
        self.cfg = BertConfig.from_settings(s.model, self.data.vocab_size, self.data.special_ids["pad"])
        if self.data.max_seq_len > self.cfg.max_position:
            raise MapnetError(f"shards hold {self.data.max_seq_len}-token sequences but model.max_position is {self.cfg.max_position}")
        self.tokenizer_sha = self.data.tokenizer_sha256
        self.extra_eval = self._extra_eval_sets()
        self.order = DataOrder(len(self.data), t.seed)

        # model.init_from: SOURCE's weights on a fresh start; --resume restores the run's own checkpoint instead.
        self.source = init_from.open_source(s.model.init_from) if s.model.init_from and not resume else None
        if self.source is not None:
            init_from.check_tokenizer(self.source, self.data.tokenizer_path, f"the shards in {shards}")
        model, notes = init_from.start_model(self.cfg, t.seed, self.source)  # the same weights on every rank
        self.init_record = self.source.record(notes) if self.source is not None and info.is_main else None
        self.model = model.to(info.device)
        # After the encoder: a MAP-Net run starts from the same encoder weights as a uniform run with this seed.
        self.strategy = training_strategy(s, self.model, self.data, info)
        self.optimizer = build_optimizer(self.strategy.optim_modules, s.optim, lrs=self.strategy.optim_lrs(s.optim.lr))
        self.scheduler = build_scheduler(self.optimizer, s.optim, t.steps)
        self.step, self.position, self.elapsed = 0, 0, 0.0
        self.resumed_from = self._restore() if resume else None
        # Rank 0 decides and tells the others, so no rank is left waiting in a collective.
        if not resume and distributed.broadcast_object(info.is_main and bool(checkpoint.list_checkpoints(out)), info):
            raise MapnetError(f"{out} already holds checkpoints; pass --resume to continue it or choose another --out")
        if t.compile:
            for block in self.model.encoder.blocks:
                block.compile()  # per block, in place: state_dict keys stay unchanged
            self.strategy.compile()
        self.ddp = distributed.wrap_model(self.strategy.net, info)
        self.autocast = precision_context(t.precision, info.device)
        resume_step = self.step if resume else None
        self.metrics = MetricsLog(out / s.logging.metrics_file, info.is_main, resume_step)
        if info.is_main:
            self._write_run_files(shards, argv)
            self.metrics.sinks = tracking.open_sinks(s, out, resume_step)  # after the folder exists

    def _restore(self) -> Path:
        ckpt = checkpoint.latest_checkpoint(self.out)
        if ckpt is None:
            raise MapnetError(f"--resume: {self.out} has no complete checkpoint to continue from")
        checkpoint.verify(ckpt, self.settings.shard.verify)  # a flipped byte is refused by name, as in the shards
        meta = checkpoint.read_config(ckpt)
        if meta["model"] != self.cfg.to_dict():
            raise MapnetError(f"--resume: {ckpt} was trained with a different model ({meta['model']}); model settings cannot change")
        if meta["tokenizer_sha256"] != self.tokenizer_sha:
            raise MapnetError(f"--resume: {ckpt} used another tokenizer than these shards")
        wanted = self.settings.masking.strategy
        if meta.get("masking", "uniform") != wanted:
            raise MapnetError(f"--resume: {ckpt} was trained with {meta.get('masking')} masking, not {wanted}; "
                              "masking.strategy cannot change")
        self.strategy.check_resume(meta, ckpt)
        checkpoint.load_weights(ckpt / checkpoint.WEIGHTS, self.strategy.modules)
        state = checkpoint.load_state(ckpt, self.info.device)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        checkpoint.set_rng_state(state["rng"])
        self.step, self.position, self.elapsed = state["step"], state["data_position"], state["elapsed"]
        return ckpt

    def _write_run_files(self, shards: Path, argv: list[str]) -> None:
        t = self.settings.train
        atomic.make_dirs(self.out)
        checkpoint.clean_leftovers(self.out)
        atomic.write_text(self.out / "settings.toml", self.settings.to_toml())
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        this = {"command": argv, "started": now, "world_size": self.info.world_size, "device": str(self.info.device)}
        path = self.out / "run.json"
        if self.resumed_from is not None and path.exists():
            info = json.loads(path.read_text(encoding="utf-8"))
            info.setdefault("resumes", []).append({**this, "from": str(self.resumed_from), "step": self.step})
        else:
            info = {**this, "versions": versions(), "seeds": {"train": t.seed, "eval": t.eval_seed},
                    "model": self.cfg.to_dict(), "parameters": self.model.num_parameters(), "init_from": self.init_record,
                    "shards": {"path": str(shards.resolve()), "manifest_sha256": atomic.sha256_file(self.data.dir / "manifest.json"),
                               "train_sequences": len(self.data), "max_seq_len": self.data.max_seq_len},
                    "eval_set": {"sequences": len(self.eval_set.ids), "sha256": self.eval_set.sha256} if self.eval_set else None,
                    "extra_eval": {name: {"sequences": len(d.ids), "sha256": d.sha256, **d.source}
                                   for name, d in self.extra_eval.items()},
                    **getattr(self.strategy, "run_info", dict)()}  # e.g. the PMI vocabulary's path and sha256
        atomic.write_json(path, info)

    @property
    def sequences_per_step(self) -> int:
        """Distinct sequences a step consumes: the batch, or fewer when a strategy repeats each one (stratified)."""
        return self.settings.train.batch_size // self.strategy.copies

    def batches(self, step: int) -> list[MicroBatch]:
        t = self.settings.train
        indices = self.order.take(self.position, self.sequences_per_step)
        out = []
        for slots in rank_micro_slots(t.batch_size, self.info.world_size, self.info.rank, self.micro):
            keys = sequence_keys(t.seed, step, slots, TRAIN_MASKS)
            ids = self.data.take(indices[[s // self.strategy.copies for s in slots]])
            out.append(self.strategy.micro_batch(ids, step, slots, keys, self.info.device))
        return out

    def save(self) -> Path | None:
        path = None
        if self.info.is_main:
            state = {"optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                     "rng": checkpoint.rng_state(), "data_position": self.position, "elapsed": self.elapsed,
                     "world_size": self.info.world_size}
            extra = {"data_position": self.position, "masking": self.settings.masking.strategy,
                     **self.strategy.checkpoint_extra()}
            path = checkpoint.save_checkpoint(self.out, self.step, self.strategy.modules, state, self.cfg,
                                              self.settings.to_toml(), self.data.tokenizer_path, self.tokenizer_sha, extra)
            t = self.settings.train
            checkpoint.prune(self.out, t.keep_last, t.keep_steps)
        distributed.barrier(self.info)
        return path

    def _extra_eval_sets(self) -> dict[str, EvalSet]:
        """train.extra_eval: NAME -> eval_sequences of that shard folder's validation split (train.eval_pick).

        Same eval seed and masks recipe as the main set, so e.g. held-out books and held-out
        Wikipedia can be reported separately while training on both. The folder must use the
        training shards' tokenizer, or its token ids would mean other words.
        """
        from ..data.shards import ShardReader

        s, t = self.settings, self.settings.train
        if t.extra_eval and self.eval_set is None:
            # evaluate() reports the extra sets beside the main one; without it they would silently vanish.
            raise MapnetError("train.extra_eval needs a validation split in the training shards too "
                              "(shard them with shard.valid_fraction > 0)")
        sets = {}
        for entry in t.extra_eval:
            name, _, folder = entry.partition("=")
            reader = ShardReader(folder, "valid", verify=s.shard.verify)
            if reader.tokenizer_sha256 != self.tokenizer_sha:
                raise MapnetError(f"train.extra_eval {name}: {folder} was encoded with another tokenizer than the training shards "
                                  "(preprocess it with --tokenizer pointing at the training corpus's tokenizer.json)")
            if reader.max_seq_len > self.cfg.max_position:
                raise MapnetError(f"train.extra_eval {name}: {folder} holds {reader.max_seq_len}-token sequences "
                                  f"but model.max_position is {self.cfg.max_position}")
            data = build_eval_set(reader, t.eval_sequences, t.eval_seed, s.masking, t.eval_pick, t.eval_mask_prob)
            if data is None:
                raise MapnetError(f"train.extra_eval {name}: {folder} has no validation sequences")
            data.source = {"path": str(Path(folder).resolve()), "manifest_sha256": atomic.sha256_file(reader.dir / "manifest.json")}
            sets[name] = data
        return sets

    def evaluate(self) -> dict | None:
        if self.eval_set is None:
            return None
        result = evaluate(self.model, self.eval_set, self.micro, self.autocast, self.info, self.cfg.pad_id,
                          self.data.token_kinds)
        for name, data in self.extra_eval.items():
            on_set = evaluate(self.model, data, self.micro, self.autocast, self.info, self.cfg.pad_id)
            result.update({f"{key}@{name}": value for key, value in on_set.items()})
        return result

    def _log_eval(self, report: Report) -> None:
        ev = self.evaluate()
        if ev is not None:
            self.metrics.write({"kind": "eval", "step": self.step, **ev})
            report("eval", {"step": self.step, **ev})

    def _log_variance(self) -> None:
        """`variance.every`: the cheap gradient-variance decomposition on fixed validation sentences.

        Rank 0 measures on the bare model (no DDP hooks); the others wait at the next collective.
        """
        if not self.info.is_main:
            return
        from ..variance.measure import variance_snapshot  # lazily: only runs that ask for it pay the import

        snap = variance_snapshot(self.model, getattr(self.strategy, "proposal", None), self.valid, self.settings, self.step)
        self.metrics.write({"kind": "variance", **snap})

    def train(self, stop_at: int | None, report: Report) -> Path:
        t, lg = self.settings.train, self.settings.logging
        end = min(t.steps, stop_at or t.steps)
        if self.resumed_from is not None:
            report("resume", {"path": str(self.resumed_from), "step": self.step})
        if self.init_record is not None:
            report("init_from", self.init_record)
        last = checkpoint.latest_checkpoint(self.out)
        every_variance = self.settings.variance.every
        if self.step == 0 and self.resumed_from is None:
            self._log_eval(report)  # the starting point: steps-to-target and loss curves need step 0
            if every_variance:
                self._log_variance()
        window_tokens, window_time = 0, 0.0
        while self.step < end:
            t0 = time.perf_counter()
            torch.manual_seed(mix_seed(DROPOUT, t.seed, self.step, self.info.rank))
            log_step = (self.step + 1) % lg.log_every == 0 or self.step + 1 == end
            try:
                st = train_step(self.ddp, self.optimizer, self.scheduler, self.batches(self.step),
                                scale=self.info.world_size / t.batch_size, grad_clip=self.settings.optim.grad_clip,
                                autocast=self.autocast, info=self.info, batch_size=t.batch_size,
                                loss_fn=self.strategy.loss_fn(self.step, with_stats=log_step))
            except NonFiniteLoss as exc:
                keep = f"last good checkpoint: {last}" if last else "no checkpoint was written yet"
                raise MapnetError(f"non-finite loss at step {self.step + 1} ({exc}); stopped, {keep}") from None
            self.strategy.after_step()
            dt = time.perf_counter() - t0
            self.step, self.position, self.elapsed = self.step + 1, self.position + self.sequences_per_step, self.elapsed + dt
            window_tokens, window_time = window_tokens + st.tokens, window_time + dt
            record = {"step": self.step, "loss": st.loss, "lr": st.lr, "grad_norm": st.grad_norm,
                      "tokens_per_s": window_tokens / window_time, "masked_tokens": st.masked, "tokens": st.tokens,
                      "memory_bytes": memory_bytes(self.info.device), "elapsed": self.elapsed}
            if log_step:
                record.update(self.strategy.metrics())  # a collective: every rank calls it
                self.metrics.write({"kind": "train", **record})
                window_tokens, window_time = 0, 0.0
            report("step", {**record, "total": t.steps})
            if (t.eval_every and self.step % t.eval_every == 0) or self.step == t.steps:
                self._log_eval(report)
            if every_variance and self.step % every_variance == 0:
                self._log_variance()
            if ((t.checkpoint_every and self.step % t.checkpoint_every == 0) or self.step in t.keep_steps
                    or self.step == end):
                last = self.save() or last
                report("checkpoint", {"step": self.step, "path": str(last)})
        return last or checkpoint.latest_checkpoint(self.out)


__all__ = ["DataOrder", "MicroBatch", "rank_micro_slots", "make_batch", "StepStats", "mlm_loss", "train_step",
           "UniformTraining", "training_strategy", "EvalSet", "build_eval_set", "evaluate", "pretrain", "Run", "NonFiniteLoss"]
