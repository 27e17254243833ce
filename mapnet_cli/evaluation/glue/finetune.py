"""One fine-tuning run: one task, one (batch size, learning rate), one seed.

    result = finetune_run(make_encoder, spec, train, devs, RunConfig(batch_size=32, lr=2e-5, seed=0, epochs=10))
    result.epochs[-1]["score"], result.best_epoch

The paper's recipe (its fine-tuning table; the rest "as in pretraining"):
AdamW with betas (0.9, 0.98), eps 1e-6, decoupled weight decay 0.1 (not on
biases and LayerNorm), linear warm-up over the first 6% of all steps, then
linear decay to zero at the end of the last epoch. Every epoch ends with a
full dev evaluation, all of which are returned.

Speed: batches are grouped by length (each shuffled chunk of `length_group`
batches is sorted, then batch order is shuffled) and padded only to their
longest member; evaluation runs sorted by length in large batches under
`inference_mode`; on CUDA the forward pass runs in bf16 autocast.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from . import metrics as M
from .encode import Encoded
from .model import SequenceClassifier, no_decay, task_loss
from .tasks import TaskSpec


@dataclass(frozen=True)
class RunConfig:
    batch_size: int
    lr: float
    seed: int
    epochs: int
    warmup_ratio: float = 0.06
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    length_group: int = 50
    eval_batch_size: int = 256
    dropout: float = 0.1  # before the output layer (the encoder's own dropout is its config's)
    pooling: str = "cls"


@dataclass
class RunResult:
    epochs: list[dict]  # per epoch: {"epoch", "train_loss", "entries": {entry: {"metrics", "score"}}, "score"}
    seconds: float
    steps: int


def steps_per_epoch(n: int, batch_size: int) -> int:
    return math.ceil(n / batch_size)


def length_grouped_batches(
    lengths: np.ndarray, batch_size: int, group: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Shuffle, sort by length inside chunks of `group` batches, batch, shuffle the batches.

    Sorting inside a chunk keeps padding low; chunking keeps the order random
    (a global sort would feed all short examples first).
    """
    perm = rng.permutation(len(lengths))
    chunk = batch_size * max(group, 1)
    batches = []
    for start in range(0, len(perm), chunk):
        idx = perm[start : start + chunk]
        if group > 1:
            idx = idx[np.argsort(lengths[idx], kind="stable")]
        batches.extend(idx[i : i + batch_size] for i in range(0, len(idx), batch_size))
    return [batches[i] for i in rng.permutation(len(batches))]


def collate(data: Encoded, idx: np.ndarray, pad_id: int, device: torch.device, regression: bool):
    width = int(data.lengths[idx].max())
    ids = np.full((len(idx), width), pad_id, dtype=np.int64)
    for row, i in enumerate(idx):
        seq = data.ids[i]
        ids[row, : len(seq)] = seq
    input_ids = torch.from_numpy(ids)
    lengths = data.lengths[idx]
    # Built from lengths, not `ids != pad_id`: correct even if a text contains the pad token.
    # No padding at all -> None, which lets SDPA take its fastest kernel.
    mask = None if lengths.min() == width else torch.from_numpy(np.arange(width)[None, :] < lengths[:, None])
    targets = torch.from_numpy(data.labels[idx].astype(np.float32 if regression else np.int64))
    if mask is not None:
        mask = mask.to(device, non_blocking=True)
    return input_ids.to(device, non_blocking=True), mask, targets.to(device, non_blocking=True)


def lr_lambda(total: int, warmup: int) -> Callable[[int], float]:
    """Linear warm-up to the peak, then linear decay; never exactly 0 for an update that happens."""

    def f(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return f


def autocast(device: torch.device, precision: str):
    use_bf16 = precision == "bf16" or (precision == "auto" and device.type == "cuda")
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16)


@torch.inference_mode()
def predict(
    model: nn.Module,
    data: Encoded,
    pad_id: int,
    device: torch.device,
    precision: str,
    batch_size: int,
    regression: bool,
) -> np.ndarray:
    """Class ids (or scores) for every example, in the split's order."""
    model.eval()
    order = np.argsort(data.lengths, kind="stable")
    out = np.empty(len(data), dtype=np.float32 if regression else np.int64)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        ids, mask, _ = collate(data, idx, pad_id, device, regression)
        with autocast(device, precision):
            logits = model(ids, mask).float()
        res = logits.squeeze(-1) if regression else logits.argmax(-1)
        out[idx] = res.cpu().numpy()
    return out


def evaluate(
    model: nn.Module,
    spec: TaskSpec,
    devs: list[Encoded],
    pad_id: int,
    device: torch.device,
    precision: str,
    batch_size: int,
) -> dict:
    entries = {}
    for dev in devs:
        pred = predict(model, dev, pad_id, device, precision, batch_size, spec.is_regression)
        values = M.compute(spec.metrics, pred, dev.labels)
        entries[dev.entry] = {"metrics": values, "score": M.entry_score(values)}
    # A run's per-epoch score for model selection: the mean over its entries (MNLI: m and mm).
    score = float(np.mean([e["score"] for e in entries.values()]))
    return {"entries": entries, "score": score}


def finetune_run(
    make_encoder: Callable[[], nn.Module],
    spec: TaskSpec,
    train: Encoded,
    devs: list[Encoded],
    cfg: RunConfig,
    pad_id: int,
    device: torch.device,
    precision: str = "auto",
    on_step: Callable[[int], None] | None = None,
) -> RunResult:
    t0 = time.perf_counter()
    torch.manual_seed(cfg.seed)  # head init and dropout
    rng = np.random.default_rng(cfg.seed)  # data order
    encoder = make_encoder()
    model = SequenceClassifier(
        encoder, spec.num_outputs, cfg.dropout, getattr(encoder.cfg, "init_std", 0.02), cfg.pooling
    ).to(device)
    decay = [p for n, p in model.named_parameters() if not no_decay(n, p)]
    keep = [p for n, p in model.named_parameters() if no_decay(n, p)]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": keep, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=cfg.betas,
        eps=cfg.eps,
        fused=device.type == "cuda",
    )
    per_epoch = steps_per_epoch(len(train), cfg.batch_size)
    total = per_epoch * cfg.epochs
    warmup = int(round(cfg.warmup_ratio * total))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(total, warmup))

    epochs = []
    step = 0
    for epoch in range(1, cfg.epochs + 1):
        model.train()
        loss_sum = torch.zeros((), device=device)
        batches = length_grouped_batches(train.lengths, cfg.batch_size, cfg.length_group, rng)
        for idx in batches:
            ids, mask, targets = collate(train, idx, pad_id, device, spec.is_regression)
            with autocast(device, precision):
                logits = model(ids, mask)
            loss = task_loss(logits, targets, spec.is_regression)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            loss_sum += loss.detach()  # no .item() per step: it would sync the GPU
            step += 1
            if on_step is not None:
                on_step(1)
        train_loss = float(loss_sum) / max(1, len(batches))
        if not math.isfinite(train_loss):
            # A diverged run still counts (it is a real outcome of this configuration); say so in the record.
            train_loss = float("nan")
        ev = evaluate(model, spec, devs, pad_id, device, precision, cfg.eval_batch_size)
        epochs.append({"epoch": epoch, "train_loss": train_loss, **ev})
    return RunResult(epochs=epochs, seconds=time.perf_counter() - t0, steps=step)


def select_epoch(epochs: list[dict], rule: str) -> int:
    """Index of the epoch that stands for the run: best dev score ('best_epoch') or the last."""
    if rule == "last_epoch":
        return len(epochs) - 1
    scores = [e["score"] if math.isfinite(e["score"]) else -math.inf for e in epochs]
    return int(np.argmax(scores))
