"""Settings of a pretraining run: the model, the optimiser, the run itself, its processes and its logging."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from ..errors import MapnetError
from .duration import parse_duration
from .field import seed_setting, setting
from .phases import BatchRampSettings, ShortSeqSettings, WarmupSettings, span_problems


# ---------------------------------------------------------------- model
@dataclass(frozen=True, kw_only=True)
class ModelSettings:
    preset: Literal["tiny", "mini", "small", "medium", "base", "custom"] = setting(
        "base",
        "size preset (paper: base, L12/H768/A12); custom: the sizes below as given (what --init-from records when "
        "SOURCE matches no preset)",
    )
    layers: int = setting(12, "Transformer blocks")
    hidden: int = setting(768, "hidden width H")
    heads: int = setting(12, "attention heads A")
    intermediate: int = setting(
        0, "feed-forward width (0: 4H; modern block: 8H/3 rounded up to a multiple of 32, BERT's parameters in a GeGLU)"
    )
    max_position: int = setting(
        512, "learned position embeddings (modern block: the longest sequence, positions being rotary)"
    )
    dropout: float = setting(0.1, "dropout on embeddings, attention output and feed-forward (paper: 0.1)")
    attention_dropout: float = setting(0.1, "dropout on attention probabilities (BERT: 0.1)")
    norm: Literal["post", "pre"] = setting(
        "post",
        "where each block's LayerNorms sit: post (BERT, the paper) or pre (before attention and feed-forward, plus a "
        "final LayerNorm; trains stably at higher learning rates; exports as RobertaPreLayerNormForMaskedLM)",
    )
    block: Literal["bert", "modern"] = setting(
        "bert",
        "the encoder block: bert (the paper's: learned positions, GELU feed-forward, biases) or modern (ModernBERT's: "
        "rotary positions, GeGLU feed-forward, no biases; pre-LN only; exports as ModernBertForMaskedLM)",
    )
    rope_theta: float = setting(
        10_000.0,
        "rotary embedding base of the modern block (RoFormer's, and ModernBERT's global layers before its "
        "long-context phase)",
    )
    layer_norm_eps: float = setting(1e-12, "LayerNorm epsilon (BERT: 1e-12)")
    init_std: float = setting(0.02, "std of the normal weight init (BERT: 0.02)")
    init_from: str = setting(
        "",
        "start from this encoder: a mapnet run/checkpoint folder or a local Hugging Face BERT folder (empty: random "
        "init); the sizes above come from it (mapnet_cli/train/init_from.py)",
    )

    def problems(self) -> list[str]:
        out = []
        for name in ("layers", "hidden", "heads", "max_position"):
            if getattr(self, name) < 1:
                out.append(f"model.{name} must be >= 1 (got {getattr(self, name)})")
        if self.heads >= 1 and self.hidden % self.heads:
            out.append(f"model.hidden ({self.hidden}) must be divisible by model.heads ({self.heads})")
        if self.intermediate < 0:
            out.append(f"model.intermediate must be >= 0 (got {self.intermediate})")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                out.append(f"model.{name} must be in [0, 1) (got {getattr(self, name)})")
        if self.init_std <= 0:
            out.append(f"model.init_std must be > 0 (got {self.init_std})")
        if self.block == "modern":
            if self.norm != "pre":
                out.append(
                    "model.block 'modern' is pre-LN (ModernBERT's layout): set model.norm = 'pre' (the fast recipe "
                    "does)"
                )
            if self.heads >= 1 and not self.hidden % self.heads and (self.hidden // self.heads) % 2:
                out.append(
                    f"model.block 'modern' rotates pairs of dimensions: model.hidden / model.heads "
                    f"({self.hidden // self.heads}) must be even"
                )
        if not self.rope_theta > 0:
            out.append(f"model.rope_theta must be > 0 (got {self.rope_theta})")
        return out


# ---------------------------------------------------------------- optimisation
@dataclass(frozen=True, kw_only=True)
class OptimSettings:
    lr: float = setting(1e-4, "peak learning rate (paper: 1e-4)")
    betas: tuple[float, float] = setting((0.9, 0.98), "Adam betas (paper: 0.9, 0.98)")
    eps: float = setting(1e-6, "Adam epsilon (paper: 1e-6)")
    weight_decay: float = setting(0.01, "decoupled weight decay, not on biases and LayerNorm (paper: 0.01)")
    warmup: WarmupSettings = field(default_factory=WarmupSettings)  # [optim.warmup] steps, fraction (phases.py)
    schedule: Literal["linear", "constant"] = setting(
        "linear", "after warm-up: linear decay to zero (paper) or constant"
    )
    grad_clip: float = setting(0.0, "clip the global gradient norm to this (0: off)")
    impl: Literal["fused", "foreach"] = setting(
        "fused",
        "AdamW's implementation: fused (one kernel per parameter group; refused where this torch has none for the "
        "device) or foreach (torch's multi-tensor path); the same update to float rounding",
    )

    def problems(self) -> list[str]:
        out = []
        if self.lr <= 0:
            out.append(f"optim.lr must be > 0 (got {self.lr})")
        if not all(0.0 <= b < 1.0 for b in self.betas):
            out.append(f"optim.betas must be in [0, 1) (got {list(self.betas)})")
        if self.eps <= 0:
            out.append(f"optim.eps must be > 0 (got {self.eps})")
        if self.weight_decay < 0:
            out.append(f"optim.weight_decay must be >= 0 (got {self.weight_decay})")
        if self.grad_clip < 0:
            out.append(f"optim.grad_clip must be >= 0 (got {self.grad_clip})")
        return out


# ---------------------------------------------------------------- training run
@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    recipe: Literal["paper", "fast", "hour"] = setting(
        "paper",
        "training recipe, a layer under the config file and flags (settings/recipes.py): paper = the defaults here; "
        "fast = pre-LN, no dropout, eps 1e-12, clipping, a higher LR (the default of the tiny, mini and small "
        "presets); hour = fast with bf16 where the hardware computes it (train.precision=bf16-native), the modern "
        "block, 30% masking, batch 64 and on a CPU the reference attention kernel (train.attention_kernel=math-cpu), "
        "its own shape (L4/H192), for 64-token shards of a 16,384-token BPE (experiments/hour-levers)",
    )
    steps: int = setting(
        1_000_000,
        "optimizer steps (paper: 1M); with train.time_budget the budget decides the steps and this must stay at its "
        "default",
    )
    time_budget: str = setting(
        "",
        'train until this much training time is spent, e.g. "90s", "20m", "2h", "1h30m" (empty: train.steps decides); '
        "evaluation, checkpoints and logging are not counted; the learning-rate schedule and the sequence-length "
        "warm-up are laid out in time (optim.warmup.fraction, train.short_seq.fraction), the last checkpoint "
        "lands when the budget is spent, run.json records the steps it bought, --resume counts the time already "
        "spent (train/budget.py)",
    )
    step_seconds: float = setting(
        0.0,
        "with train.time_budget: count every step as this many seconds of training instead of timing it (0: the wall "
        "clock times each step); a modelled clock makes the budget buy the same steps on any machine under any "
        'load, and a budget run reproducible on one machine (train/budget.py, "The modelled clock"); measure it '
        "with benchmarks/step_costs.py",
    )
    short_step_seconds: float = setting(
        0.0,
        "with train.step_seconds: the seconds a step of the sequence-length warm-up (train.short_seq.fraction) "
        "counts; required when that warm-up is on, refused when it is off",
    )
    batch_size: int = setting(256, "global batch in sequences per optimizer step (paper: 256)")
    micro_batch_size: int = setting(
        0, "sequences per device per forward pass; accumulation fills the global batch (0: global batch / world size)"
    )
    batch_ramp: BatchRampSettings = field(default_factory=BatchRampSettings)  # [train.batch_ramp] (phases.py)
    short_seq: ShortSeqSettings = field(default_factory=ShortSeqSettings)  # [train.short_seq] (phases.py)
    seed: int = seed_setting(0, "seed of initial weights, data order and masks")
    precision: Literal["auto", "fp32", "bf16", "bf16-native"] = setting(
        "auto",
        "auto: bf16 autocast on CUDA, fp32 on CPU; bf16-native: bf16 autocast where the device computes bf16 natively "
        "(a CUDA GPU from Ampere on; a CPU with AVX512-BF16, AMX or Arm BF16), fp32 elsewhere (the `hour` "
        "recipe's: an emulated bf16 step cost 18x its fp32 step on an AMD EPYC without them); run.json records "
        "which ran",
    )
    attention_kernel: Literal["auto", "math", "math-cpu"] = setting(
        "auto",
        "SDPA's kernel in the training steps: auto (PyTorch's pick: its flash kernels where they apply), math (its "
        "reference kernel; the same function: on the 2-core Xeon the `hour` step's 64-token rows took 0.86-0.90x "
        "the time with it, `mini` fast's 128-token ones 1.01-1.04x, experiments/profile-cpu) or math-cpu (math on a "
        "CPU, auto elsewhere: the `hour` recipe's, experiments/hour-wall); held-out evaluation keeps auto",
    )
    compile: Literal["auto", True, False] = setting(
        "auto",
        "compile with torch.compile (what and how: train.compile_scope, train.compile_mode): auto = on CUDA "
        "(1.05-1.10x faster at base on an H100, RESULTS 4a), off on CPU (-1% to +2%, docs/performance.md); true / "
        "false force it",
    )
    compile_scope: Literal["blocks", "model"] = setting(
        "blocks",
        "what train.compile compiles: blocks = each Transformer block on its own (state_dict keys unchanged), model = "
        "the whole encoder and head as one graph (Python between the blocks compiled too; the last block's "
        "queries pad to the sequence length); which is faster on a GPU is measured by "
        "experiments/gpu-h100/gpu_step.sh",
    )
    compile_mode: Literal["default", "max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead"] = setting(
        "default",
        "torch.compile mode of train.compile: default; max-autotune (GEMM autotuning and CUDA graphs; minutes to "
        "compile); max-autotune-no-cudagraphs; reduce-overhead (CUDA graphs: one launch per graph, for a "
        "host-bound step)",
    )
    prefetch: bool = setting(
        False,
        "make the next step's batches (data, masks, host-to-device copies) in a background thread while this step "
        "runs; off by default: on a 2-core CPU it made a step 2-14% slower (docs/performance.md), on a GPU it is "
        "unmeasured (experiments/gpu-h100/gpu_step.sh)",
    )
    device: Literal["auto", "cpu", "cuda"] = setting("auto", "where to train")
    eval_every: int = setting(2000, "held-out evaluation every N steps (0: only at the end)")
    eval_sequences: int = setting(
        512, "validation sequences per evaluation set (fixed set, fixed masks), the main one and each train.extra_eval"
    )
    eval_mask_prob: float = setting(
        0.15,
        "masking rate of the fixed evaluation masks, apart from masking.mask_prob so runs trained at 15% and 40% "
        "answer the same questions",
    )
    eval_seed: int = seed_setting(
        1234, "seed of the evaluation masks: the same for every run so strategies answer identical questions"
    )
    eval_replace: Literal["mask", "bert"] = setting(
        "mask",
        "what the evaluation puts at its masked positions: mask = [MASK] everywhere, so held-out loss measures "
        "prediction from context and a context-blind model scores exactly the unigram level; bert = 80/10/10 as "
        "in training (mapnet <= 0.1 and RESULTS sections 1-6: the unchanged 10% let a model that ignores context "
        "score below the unigram level)",
    )
    eval_pick: Literal["first", "spread"] = setting(
        "first",
        "which validation sequences form each eval set: the first eval_sequences, or that many evenly spread over the "
        "split (for held-out sets of whole files)",
    )
    extra_eval: tuple[str, ...] = setting(
        (),
        "more held-out sets, each NAME=SHARD_FOLDER (its validation split, same tokenizer), evaluated beside the main "
        'one and logged as eval_loss@NAME, e.g. ["books=shards/books-heldout"]',
    )
    checkpoint_every: int = setting(10_000, "write a checkpoint every N steps (0: only at the end)")
    keep_last: int = setting(2, "periodic checkpoints kept (older ones are deleted)")
    keep_steps: tuple[int, ...] = setting(
        (400_000, 600_000, 800_000, 1_000_000), "checkpoints kept for good (paper's sweep)"
    )

    @property
    def budget_seconds(self) -> float | None:
        """train.time_budget in seconds (None: no budget; `problems` names a bad one)."""
        return parse_duration(self.time_budget, "train.time_budget") if self.time_budget else None

    def _budget_problems(self) -> list[str]:
        if not self.time_budget:
            return [
                f"train.{name} applies to a train.time_budget (it is what each step counts toward one); "
                "without one train.steps decides"
                for name in ("step_seconds", "short_step_seconds")
                if getattr(self, name)
            ]
        try:
            _ = self.budget_seconds  # the property parses train.time_budget and raises on a bad one
        except MapnetError as exc:
            return [str(exc)]
        out = []
        if self.steps != TrainSettings.steps:  # the budget is the stopping rule: a second one would contradict it
            out.append(
                f"train.steps ({self.steps}) and train.time_budget ({self.time_budget}) are two stopping rules: a "
                "budget run trains until its time is spent; leave train.steps unset (--stop-at N stops early, "
                "--resume continues)"
            )
        return out + self._clock_problems()

    def _clock_problems(self) -> list[str]:
        """A budget run's modelled clock: both costs positive where a step of their kind is taken, none ignored."""
        out = [
            f"train.{name} must be >= 0 (got {getattr(self, name)})"
            for name in ("step_seconds", "short_step_seconds")
            if getattr(self, name) < 0
        ]
        if out:
            return out
        if not self.step_seconds:
            return (
                [
                    "train.short_step_seconds needs train.step_seconds (a modelled clock counts every step; 0 times "
                    "them all)"
                ]
                if self.short_step_seconds
                else []
            )
        if self.short_seq.fraction > 0 and not self.short_step_seconds:
            return [
                "train.step_seconds models the clock, but the sequence-length warm-up's steps "
                "(train.short_seq.fraction) "
                "have no cost: give train.short_step_seconds (benchmarks/step_costs.py measures both)"
            ]
        if self.short_step_seconds and not self.short_seq.fraction:
            return [
                f"train.short_step_seconds ({self.short_step_seconds}) would be ignored: this run has no "
                "sequence-length warm-up (train.short_seq.fraction is 0)"
            ]
        return []

    def _phase_problems(self) -> list[str]:
        """The sequence-length warm-up and the batch-size ramp (the one rule of `phases.span_problems`), then what only
        a ramp asks: a start that divides the batch, a length inside the run."""
        budgeted = bool(self.time_budget)
        # Where the 0 came from: a user who lowers the fast recipe's steps under --recipe paper believes it is on.
        off = "; the paper recipe has none, the fast recipe's pieces are 16 tokens" if self.recipe == "paper" else ""
        out = span_problems(
            "train.short_seq", self.short_seq, budgeted, "sequence-length warm-up", on="len", off_because=off
        )
        ramp = span_problems(
            "train.batch_ramp", self.batch_ramp, budgeted, "batch-size ramp", on="start", whole_run=True
        )
        start = self.batch_ramp.start
        if not ramp and start and (start >= self.batch_size or self.batch_size % start):
            ramp.append(
                f"train.batch_ramp.start ({start}) must be smaller than train.batch_size ({self.batch_size}) and "
                "divide it: the ramp grows in whole multiples of it"
            )
        if not ramp and not budgeted and self.batch_ramp.steps > self.steps:
            ramp.append(
                f"train.batch_ramp.steps ({self.batch_ramp.steps}) is longer than the run (train.steps "
                f"{self.steps}): the batch would never reach train.batch_size"
            )
        return out + ramp

    def compiles(self, device) -> bool:
        """Whether the blocks are compiled on `device` (a torch.device)."""
        return device.type == "cuda" if self.compile == "auto" else bool(self.compile)

    def autocasts_bf16(self, device) -> bool:
        """Whether steps and evaluations on `device` (a torch.device) run under bf16 autocast. `bf16-native` asks
        the hardware: on a CPU without bf16 instructions oneDNN emulates bf16 through fp32, and the conversions made
        the `hour` recipe's step 18x slower than fp32 on an AMD EPYC (experiments/hour-masking, precision-costs), so
        there it trains in fp32; a CPU whose /proc/cpuinfo cannot be read is not claimed to have them."""
        if self.precision in ("bf16", "fp32"):
            return self.precision == "bf16"
        if device.type == "cuda":
            import torch

            if self.precision == "auto":
                return True
            if device.index is None:  # "cuda": the current GPU, the one the run uses
                return torch.cuda.is_bf16_supported(including_emulation=False)
            with torch.cuda.device(device.index):  # the GPU this run uses, not whichever is current
                return torch.cuda.is_bf16_supported(including_emulation=False)
        if self.precision == "bf16-native" and device.type == "cpu":
            from ..cpu_features import cpu_native_bf16

            return cpu_native_bf16() is True
        return False

    def attention_kernel_on(self, device) -> str:
        """The kernel training steps on `device` (a torch.device) run with: "auto" or "math". `math-cpu` is the
        `hour` recipe's: the reference kernel paid on the CPU it was measured on, and on a GPU the flash kernels are
        the fast ones, so there it stays PyTorch's pick."""
        if self.attention_kernel == "math-cpu":
            return "math" if device.type == "cpu" else "auto"
        return self.attention_kernel

    def pieces_per_sequence(self, step: int, seq_len: int) -> int:
        """Pieces each training sequence of `seq_len` tokens is cut into at `step` of a step run (1: whole)."""
        return seq_len // self.short_seq.len if self.short_seq.len and step < self.short_seq.steps else 1

    def problems(self) -> list[str]:
        out = []
        for name in ("steps", "batch_size", "eval_sequences", "keep_last"):
            if getattr(self, name) < 1:
                out.append(f"train.{name} must be >= 1 (got {getattr(self, name)})")
        for name in ("micro_batch_size", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                out.append(f"train.{name} must be >= 0 (got {getattr(self, name)})")
        out += self._budget_problems()
        out += self._phase_problems()
        names = [entry.partition("=")[0] for entry in self.extra_eval]
        for entry, name in zip(self.extra_eval, names):
            # The name becomes part of metric keys and plot file names: plain ASCII only.
            if "=" not in entry or not entry.partition("=")[2] or not re.fullmatch(r"[A-Za-z0-9_-]+", name):
                out.append(
                    "train.extra_eval entries are NAME=SHARD_FOLDER with NAME of letters, digits, - and _ (got "
                    f"{entry!r})"
                )
        if len(set(names)) != len(names):
            out.append(f"train.extra_eval names must be unique (got {names})")
        return out


# ---------------------------------------------------------------- distributed
@dataclass(frozen=True, kw_only=True)
class DistributedSettings:
    gpus: int = setting(0, "GPUs on this node: start one process per GPU with torchrun (0: no launch)")
    nproc: int = setting(0, "CPU processes on this node (gloo), for tests and debugging (0: no launch)")
    nnodes: int = setting(1, "nodes in the job (passed to torchrun)")
    node_rank: int = setting(0, "this node's rank (passed to torchrun)")
    rdzv_endpoint: str = setting("", "rendezvous host:port for multi-node jobs (passed to torchrun)")
    backend: Literal["auto", "nccl", "gloo"] = setting(
        "auto", "process-group backend (auto: nccl on CUDA, gloo on CPU)"
    )
    bucket_cap_mb: float = setting(
        25.0,
        "DistributedDataParallel's gradient bucket size in MiB (torch's default 25): larger buckets, fewer all-reduces",
    )
    static_graph: bool = setting(
        False,
        "tell DistributedDataParallel the graph is the same every step (it may then skip its per-step search for "
        "unused parameters and overlap better)",
    )

    def problems(self) -> list[str]:
        out = []
        for name in ("gpus", "nproc", "node_rank"):
            if getattr(self, name) < 0:
                out.append(f"distributed.{name} must be >= 0 (got {getattr(self, name)})")
        if self.nnodes < 1:
            out.append(f"distributed.nnodes must be >= 1 (got {self.nnodes})")
        if self.bucket_cap_mb <= 0:
            out.append(f"distributed.bucket_cap_mb must be > 0 (got {self.bucket_cap_mb})")
        if self.gpus and self.nproc:
            out.append("distributed.gpus and distributed.nproc cannot both be set")
        if self.node_rank >= self.nnodes:
            out.append(f"distributed.node_rank ({self.node_rank}) must be < distributed.nnodes ({self.nnodes})")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            out.append("distributed.rdzv_endpoint is required when distributed.nnodes > 1")
        return out


# ---------------------------------------------------------------- logging / output
@dataclass(frozen=True, kw_only=True)
class LoggingSettings:
    log_every: int = setting(10, "write a metrics line every N steps")
    progress: bool = setting(True, "show rich progress bars (off when not a terminal)")
    metrics_file: str = setting("metrics.jsonl", "JSON-lines metrics file inside the run folder")
    plain_every_s: float = setting(
        0.0,
        "when stderr is not a terminal: at most one plain progress line per N seconds "
        "(0: one per logging.log_every steps)",
    )
    tensorboard: bool = setting(
        False, "also write every metric as a TensorBoard scalar in RUN/tb (pip install 'mapnet[tensorboard]')"
    )
    wandb: bool = setting(
        False,
        "also log every metric to Weights & Biases (pip install 'mapnet[wandb]'; "
        "WANDB_MODE=offline works without a network)",
    )
    wandb_project: str = setting("mapnet", "W&B project")
    wandb_name: str = setting("", "W&B run name ('' = the run folder's name)")
    wandb_mode: Literal["auto", "online", "offline"] = setting("auto", "W&B mode (auto = WANDB_MODE, else online)")

    def problems(self) -> list[str]:
        out = [f"logging.log_every must be >= 1 (got {self.log_every})"] if self.log_every < 1 else []
        if self.plain_every_s < 0:
            out.append(f"logging.plain_every_s must be >= 0 (got {self.plain_every_s})")
        if self.wandb and not self.wandb_project:
            out.append("logging.wandb_project must not be empty when logging.wandb is true")
        return out
