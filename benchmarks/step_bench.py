"""What `bench_ceiling.py` and `bench_step_variants.py` share: the device and its datasheet peak, a timer,
the batch, and one mapnet training step built the way `mapnet pretrain` builds it (a helper, not a script).

The step is the loop's own `train.train_step` over a batch drawn as the loop draws it (uniform 15% masks on
the host, sent with their positions and query width; nothing read back), with the optimizer, compilation
and vocabulary options of the settings tree, so a variant timed here is the variant a run gets.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import torch

from mapnet_cli import distributed
from mapnet_cli.masking.strategy import to_device
from mapnet_cli.masking.uniform import sequence_keys
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import MaskingSettings, OptimSettings, TrainSettings, preset
from mapnet_cli.train import make_batch, train_step
from mapnet_cli.train.compile import compile_model
from mapnet_cli.train.loop import HOST
from mapnet_cli.train.optim import build_optimizer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SPECIAL_IDS = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
# bf16 dense tensor-core peaks from the datasheets, TFLOP/s. The H200 has the H100 SXM's chip (same peak,
# more and faster memory); the PCIe H100 is clocked lower.
DATASHEET = (
    ("H100 PCIe", 756.0, "H100 PCIe"),
    ("H100", 989.0, "H100 SXM"),
    ("H200", 989.0, "H200 (H100 SXM's peak)"),
    ("A100", 312.0, "A100"),
)


def device_peak(device: torch.device) -> tuple[str, float, str]:
    """(device name, datasheet bf16 dense TFLOP/s or 0 when unknown, which datasheet)."""
    if device.type != "cuda":
        return f"CPU ({torch.get_num_threads()} threads)", 0.0, "none (CPU)"
    name = torch.cuda.get_device_name(device)
    for key, tflops, label in DATASHEET:
        if key in name:
            return name, tflops, label
    return name, 0.0, "unknown GPU"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_ms(fn, device: torch.device, repeats: int, warmup: int = 3) -> float:
    """Median wall time of `fn()` in ms, each call timed to its end (CUDA events on a GPU), after `warmup` calls."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def corpus(batch: int, seq_len: int, vocab: int, seed: int = 0) -> np.ndarray:
    """Packed sequences as the shards hold them: [CLS] ... [SEP], no padding (so no attention mask)."""
    ids = np.random.default_rng(seed).integers(len(SPECIALS), vocab, size=(batch, seq_len))
    ids[:, 0], ids[:, -1] = SPECIAL_IDS["cls"], SPECIAL_IDS["sep"]
    return ids


def model_config(size: str, vocab: int, dropout: float | None = None, block: str = "bert") -> BertConfig:
    """The preset's sizes; `block = "modern"`: ModernBERT's block (`model.block`, pre-LN, its default width)."""
    m = preset(size).model
    if dropout is not None:
        m = replace(m, dropout=dropout, attention_dropout=dropout)
    if block != "bert":
        m = replace(m, block=block, norm="pre", intermediate=0)
    return BertConfig.from_settings(m, vocab, SPECIAL_IDS["pad"])


def draw_batch(ids: np.ndarray, step: int, vocab: int, device: torch.device, mask_prob: float = 0.15):
    """One micro-batch as the loop makes it: masks drawn on the host, copied with positions and width."""
    keys = sequence_keys(0, step, range(len(ids)))
    masking = MaskingSettings(mask_prob=mask_prob)
    return to_device(make_batch(ids, keys, SPECIAL_IDS, vocab, masking, HOST), device)


class MapnetStep:
    """One `train_step` of BertForMLM with the given options (`optim.impl`,
    `train.compile`/`compile_scope`/`compile_mode`)."""

    def __init__(
        self,
        cfg: BertConfig,
        device: torch.device,
        *,
        impl: str = "fused",
        compile: bool = False,
        scope: str = "blocks",
        mode: str = "default",
        precision: str = "auto",
        mask_prob: float = 0.15,
    ):
        from mapnet_cli.train.step import precision_context

        torch.manual_seed(0)
        self.cfg, self.device, self.mask_prob = cfg, device, mask_prob
        self.model = BertForMLM(cfg).to(device)
        self.optimizer = build_optimizer([self.model], replace(OptimSettings(), impl=impl))
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: 1.0)
        if compile:  # as the loop: compile.compile_model, with a strategy that compiles nothing of its own
            compile_model(
                self.model,
                SimpleNamespace(compile=lambda: None),
                SimpleNamespace(compile_scope=scope, compile_mode=mode),
            )
        # As train.precision resolves it (auto: bf16 on CUDA only; bf16 / fp32 as named; bf16-native asks the hardware).
        self.autocast = precision_context(replace(TrainSettings(), precision=precision).autocasts_bf16(device), device)
        self.info = distributed.DistInfo(device=device)

        self.step_no = 0

    def __call__(self, ids: np.ndarray) -> None:
        """One step on `ids`, its masks drawn on the host inside the step, as the loop does (without prefetch)."""
        batch = draw_batch(ids, self.step_no, self.cfg.vocab_size, self.device, self.mask_prob)
        train_step(
            self.model,
            self.optimizer,
            self.scheduler,
            [batch],
            scale=1 / len(ids),
            grad_clip=0.0,
            autocast=self.autocast,
            info=self.info,
            batch_size=len(ids),
            read=False,
        )
        self.step_no += 1


def time_steps(step, inputs: list, device: torch.device, rounds: int, per_round: int) -> list[float]:
    """ms per step in each of `rounds` windows of `per_round` steps on `inputs` in turn, each window timed to
    its end (the loop syncs only on its read steps, so a window, not a single step, is what a run sees)."""
    out = []
    for r in range(rounds):
        sync(device)
        t0 = time.perf_counter()
        for i in range(per_round):
            step(inputs[(r * per_round + i) % len(inputs)])
        sync(device)
        out.append((time.perf_counter() - t0) * 1e3 / per_round)
    return out


__all__ = [
    "SPECIALS",
    "SPECIAL_IDS",
    "device_peak",
    "sync",
    "median_ms",
    "corpus",
    "model_config",
    "draw_batch",
    "MapnetStep",
    "time_steps",
]
