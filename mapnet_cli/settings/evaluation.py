"""Settings of what is measured on a pretrained encoder: GLUE fine-tuning and the gradient variance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .field import seed_setting, setting


# ---------------------------------------------------------------- fine-tuning (GLUE)
@dataclass(frozen=True, kw_only=True)
class FinetuneSettings:
    batch_sizes: tuple[int, ...] = setting((16, 32), "batch-size grid (paper: 16, 32)")
    learning_rates: tuple[float, ...] = setting(
        (1e-5, 2e-5, 3e-5, 4e-5, 5e-5, 6e-5, 7e-5, 8e-5), "learning-rate grid (paper: 1e-5 ... 8e-5)"
    )
    epochs: int = setting(10, "maximum epochs (paper: 10)")
    warmup_ratio: float = setting(0.06, "warm-up as a fraction of all steps (paper: 0.06)")
    weight_decay: float = setting(0.1, "weight decay (paper: 0.1)")
    betas: tuple[float, float] = setting((0.9, 0.98), "Adam betas (paper: 0.9, 0.98)")
    eps: float = setting(1e-6, "Adam epsilon (as pretraining)")
    seeds: int = setting(10, "seeds per configuration (paper: 10)")
    max_seq_len: int = setting(
        512,
        "longest input in tokens, specials included; longer pairs lose tokens from the longer side first (also capped "
        "by the model's max_position)",
    )
    seed: int = seed_setting(0, "first fine-tuning seed; the runs of a configuration use seed, seed+1, ...")
    run_score: Literal["best_epoch", "last_epoch"] = setting(
        "best_epoch",
        "a run's dev score: its best epoch (early stopping within 'maximum epoch 10', as RoBERTa, whose protocol the "
        "paper follows) or its last epoch (mapnet choice; every epoch is recorded either way)",
    )
    max_train: int = setting(0, "train on at most N examples, a fixed random subset shared by all runs (0: all)")
    max_dev: int = setting(
        0,
        "evaluate on at most N examples per dev set, a fixed random subset (0: all; capped scores are not comparable "
        "with published ones)",
    )
    eval_batch_size: int = setting(256, "sequences per evaluation batch")
    length_group: int = setting(
        50,
        "length-grouped batching: shuffled chunks of this many batches are sorted by length before batching (1: plain "
        "shuffle)",
    )
    malformed_rows: Literal["task", "error", "skip"] = setting(
        "task",
        "malformed TSV rows: each task's known convention (QQP: skip and count; others: error), or error / "
        "skip-and-count everywhere",
    )
    precision: Literal["auto", "fp32", "bf16"] = setting("auto", "auto: bf16 autocast on CUDA, fp32 on CPU")
    device: Literal["auto", "cpu", "cuda"] = setting("auto", "where to fine-tune")
    dropout: float = setting(
        -1.0,
        "dropout in the encoder (hidden and attention) and before the output layer while fine-tuning; -1: the "
        "checkpoint's own (paper: 0.1, as pretraining; a `fast`-recipe checkpoint carries 0)",
    )
    pooling: Literal["cls", "mean"] = setting(
        "mean",
        "what the classifier reads: the mean of the last layer's states over the real tokens (default: no pretraining "
        "task trains [CLS] here, and with [CLS] a pretrained encoder scored below its random-init control, "
        "experiments/pooling-default), or the [CLS] state through a fresh pooler (BERT; the `paper` protocol's)",
    )

    def problems(self) -> list[str]:
        out = []
        if not 8 <= self.max_seq_len <= 8192:
            out.append(f"finetune.max_seq_len must be in [8, 8192] (got {self.max_seq_len})")
        for name in ("max_train", "max_dev"):  # finetune.seed: its declared minimum
            if getattr(self, name) < 0:
                out.append(f"finetune.{name} must be >= 0 (got {getattr(self, name)})")
        for name in ("eval_batch_size", "length_group"):
            if getattr(self, name) < 1:
                out.append(f"finetune.{name} must be >= 1 (got {getattr(self, name)})")
        if not (self.dropout == -1.0 or 0.0 <= self.dropout < 1.0):
            out.append(f"finetune.dropout must be in [0, 1), or -1 for the checkpoint's own (got {self.dropout})")
        if self.weight_decay < 0:
            out.append(f"finetune.weight_decay must be >= 0 (got {self.weight_decay})")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            out.append(f"finetune.betas must be in [0, 1) (got {list(self.betas)})")
        if self.eps <= 0:
            out.append(f"finetune.eps must be > 0 (got {self.eps})")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            out.append("finetune.batch_sizes must be a non-empty list of positive integers")
        if not self.learning_rates or min(self.learning_rates) <= 0:
            out.append("finetune.learning_rates must be a non-empty list of positive numbers")
        if self.epochs < 1:
            out.append(f"finetune.epochs must be >= 1 (got {self.epochs})")
        if not 0.0 <= self.warmup_ratio < 1.0:
            out.append(f"finetune.warmup_ratio must be in [0, 1) (got {self.warmup_ratio})")
        if self.seeds < 1:
            out.append(f"finetune.seeds must be >= 1 (got {self.seeds})")
        return out


# ---------------------------------------------------------------- gradient variance (`mapnet variance`)
@dataclass(frozen=True, kw_only=True)
class VarianceSettings:
    sentences: int = setting(
        64, "validation sequences S, drawn without replacement (the outer level of the two-level design)"
    )
    masks: int = setting(8, "masks M drawn per sequence and scheme (>= 2: a within-sentence variance needs two)")
    project_dim: int = setting(
        0,
        "0: exact per-example gradients; D > 0: a seeded sparse Rademacher sketch to D dimensions (unbiased inner "
        "products)",
    )
    params: tuple[str, ...] = setting(
        (),
        'fnmatch patterns of parameter names whose gradient is measured, e.g. ["encoder.blocks.0.*"] (empty: every '
        "parameter of the MLM model)",
    )
    batch_sizes: tuple[int, ...] = setting(
        (1, 8, 32), "mini-batch sizes B for the batch-mean view (B sequences x 1 mask)"
    )
    bootstrap: int = setting(1000, "bootstrap replicates behind the 95% intervals (0: no intervals)")
    bootstrap_masks: bool = setting(
        False,
        "also resample masks within each resampled sentence (two-stage; counts the mask noise twice, so intervals are "
        "wider; mapnet choice: off)",
    )
    batch_draws: int = setting(2000, "random pairs of disjoint mini-batches for the direct mini-batch measurement")
    seed: int = seed_setting(0, "seed of the sentence choice, the masks and the bootstrap")
    memory_gb: float = setting(
        4.0, "exact gradients: GiB of per-example gradients held at once; beyond it they are recomputed in panels"
    )
    method: Literal["loop", "vmap"] = setting(
        "loop",
        "per-example gradients by a loop of backward passes, or torch.func vmap(grad) (slower on CPU, where attention "
        "has no batching rule)",
    )
    every: int = setting(0, "pretrain: record a cheap decomposition in the metrics file every N steps (0: off)")
    snapshot_sentences: int = setting(8, "pretrain snapshots: validation sequences S (fixed across steps)")
    snapshot_masks: int = setting(4, "pretrain snapshots: masks M per sequence (fixed seed across steps)")
    snapshot_project_dim: int = setting(4096, "pretrain snapshots: sketch dimension D (0: exact gradients)")
    schemes: tuple[
        Literal[
            "uniform",
            "mapnet_clipped",
            "mapnet_unclipped",
            "mapnet_unweighted",
            "ht",
            "stratified",
            "frequency",
            "oracle",
        ],
        ...,
    ] = setting(
        (),
        "mapnet variance: masking schemes to measure (empty: uniform, mapnet_clipped/unclipped/unweighted, ht, and "
        "the checkpoint's own stratified or frequency; --oracle adds oracle). Pretrain snapshots always measure "
        "uniform + the run's own scheme",
    )
    oracle_rounds: int = setting(
        4,
        "oracle scheme: random partitions (each ~n/K masked rows) whose per-position scores are combined by root mean "
        "square",
    )
    oracle_basis: Literal["proxy", "gradient"] = setting(
        "proxy",
        "oracle scheme: pi proportional to the encoder's ||softmax - onehot|| (proxy: one forward per row) or to the "
        "exact per-position gradient norm (gradient: one backward per position)",
    )

    def problems(self) -> list[str]:
        out = []
        if self.oracle_rounds < 1:
            out.append(f"variance.oracle_rounds must be >= 1 (got {self.oracle_rounds})")
        if self.sentences < 2 or self.snapshot_sentences < 2:
            out.append(
                "variance.sentences and variance.snapshot_sentences must be >= 2 (a between-sentence variance needs "
                "two)"
            )
        if self.masks < 2 or self.snapshot_masks < 2:
            out.append("variance.masks and variance.snapshot_masks must be >= 2 (a within-sentence variance needs two)")
        for name in ("project_dim", "snapshot_project_dim", "bootstrap", "batch_draws", "every"):
            if getattr(self, name) < 0:
                out.append(f"variance.{name} must be >= 0 (got {getattr(self, name)})")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            out.append("variance.batch_sizes must be a non-empty list of positive integers")
        if any(not pattern for pattern in self.params):
            out.append("variance.params must not contain empty patterns")
        if self.memory_gb <= 0:
            out.append(f"variance.memory_gb must be > 0 (got {self.memory_gb})")
        return out
