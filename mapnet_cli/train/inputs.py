"""What a run needs besides its settings, checked before any work, every problem in one line.

    check_run_inputs(settings, reader, shards)     # Run, before the eval set and the model; compare, for
                                                   # every arm before the first one trains
    check_world(settings, world_size)              # Run, and the launcher before torchrun starts
    check_resume_steps(settings, run_folder)       # --resume: train.steps not below the newest checkpoint's step

The shards' sequences fit model.max_position, are as long as the recipe's (`recipes.MEASURED_ON`), and the
sequence-length warm-up cuts them into whole pieces; the batch is no larger than the training split and its
activations fit in this machine's memory (`activation_bytes`, a lower bound); an evaluation asked for has a
validation split; a PMI run's vocabulary is found and intact. A run checks
these itself, but `compare` trains its arms one after another: checked only by each arm's Run, a problem of the
last arm (a `pmi` arm without its vocabulary) would be found after the first ones trained, with their files left
behind.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import MapnetError
from ..model.widths import default_intermediate
from ..settings.recipes import MEASURED_ON
from ..settings.training import TrainSettings


def check_run_inputs(settings, data, shards: Path, world_size: int = 1) -> None:
    """Refuse in one `MapnetError` line whatever `settings` cannot train on `data` (the training
    `ShardReader` of `shards`) in `world_size` processes."""
    problems = run_input_problems(settings, data, shards, world_size)
    if problems:
        raise MapnetError("; ".join(problems))


def run_input_problems(settings, data, shards: Path, world_size: int = 1) -> list[str]:
    """Each thing `settings` cannot train on `data`, one message each (`check_run_inputs`)."""
    model, t, problems = settings.model, settings.train, []
    if data.max_seq_len > model.max_position:
        problems.append(
            f"shards {shards} hold {data.max_seq_len}-token sequences but model.max_position is {model.max_position}"
        )
    if t.short_seq.len and (t.short_seq.len >= data.max_seq_len or data.max_seq_len % t.short_seq.len):
        problems.append(
            f"train.short_seq.len ({t.short_seq.len}) must divide the shards' {data.max_seq_len}-token "
            "sequences into at least two pieces (e.g. 32 or 64 for 128)"
        )
    measured_on = MEASURED_ON.get(t.recipe, {}).get("max_seq_len")
    if measured_on and data.max_seq_len != measured_on:
        # The recipe's batch is sized for these sequences (its tokens per step are what the search measured).
        problems.append(
            f"recipe {t.recipe} trains on {measured_on}-token sequences but shards {shards} hold "
            f"{data.max_seq_len}: shard them with `mapnet shard PREP --max-seq-len {measured_on}`, "
            "or name another recipe"
        )
    problems += batch_problems(settings, data, shards, world_size)
    valid = sum(int(f["sequences"]) for f in getattr(data, "manifest", {}).get("files", []) if f["split"] == "valid")
    if valid == 0 and t.eval_every != TrainSettings.eval_every and not t.extra_eval:  # extra_eval: its own line
        # A value the user chose asks for the evaluation curve; the default asks nothing (Run warns instead).
        problems.append(
            f"train.eval_every = {t.eval_every} asks for held-out evaluation, but shards {shards} have no "
            "validation split (sharded with shard.valid_fraction = 0): shard them with --valid-fraction "
            "0.01 (or more), or leave train.eval_every unset to train without evaluation"
        )
    if settings.masking.strategy == "pmi":
        from ..masking import pmi_vocab
        from ..masking.pmi_units import find_pmi_vocab

        try:
            pmi_vocab.read_vocabulary(find_pmi_vocab(settings.masking, data.dir, getattr(data, "manifest", {})))
        except MapnetError as exc:
            problems.append(str(exc))
    return problems


def batch_problems(settings, data, shards: Path, world_size: int = 1) -> list[str]:
    """A batch the training split cannot fill, or whose activations cannot fit in this machine's memory."""
    t, out = settings.train, []
    copies = settings.masking.stratified.copies if settings.masking.strategy == "stratified" else 1
    distinct = t.batch_size // copies  # the sequences one step takes from the data order
    if distinct > len(data):
        # The data order would wrap into later epochs inside one step (one sequence several times in a batch),
        # and a batch of 1e12 spent hours building a step that never fitted in memory.
        out.append(
            f"train.batch_size ({t.batch_size}) asks for {distinct} distinct sequences per step, but shards "
            f"{shards} hold {len(data)} training sequences: use --batch-size {len(data) * copies} or less "
            "(or more data)"
        )
    micro = t.micro_batch_size or max(1, t.batch_size // world_size)
    need, have = activation_bytes(settings, data, micro), machine_memory_bytes()
    if have and need > have:
        out.append(
            f"a micro-batch of {micro} sequences of {data.max_seq_len} tokens keeps at least "
            f"{human_bytes(need)} of activations for its backward pass (a lower-bound estimate), more than "
            f"this machine's {human_bytes(have)} of memory: set --micro-batch-size "
            f"{smaller_micro(micro, need, have)} (the batch is then accumulated), or a smaller --batch-size"
        )
    return out


def smaller_micro(micro: int, need: int, have: int) -> int:
    """The largest divisor of `micro` whose estimate takes at most a quarter of `have` (room for the rest)."""
    bound, best, i = micro * have / (4 * need), 1, 1
    while i * i <= micro:  # the divisors in pairs (i, micro / i): a million steps for a micro-batch of 1e12
        if micro % i == 0:
            best = max([best, *(d for d in (i, micro // i) if d <= bound)])
        i += 1
    return best


def activation_bytes(settings, data, micro: int) -> int:
    """A lower bound on the bytes one forward/backward of `micro` sequences keeps for the backward pass: per token
    and layer the block's input, Q, K, V, attention context and output, the two LayerNorm inputs and the
    feed-forward's input and output (10 H values) and its two intermediate activations (2 I), attention scores left
    out (fused kernels do not keep them); plus the MLM head's logits and their gradient at the masked tokens (2 V
    values each); every value at 2 bytes, as under bf16 autocast (fp32 keeps twice as much). Real use is higher
    (weights, optimizer state, dropout masks, allocator slack): a micro-batch above this cannot run here at all."""
    m = settings.model
    width = m.intermediate or default_intermediate(m.hidden, m.block)
    tokens = micro * data.max_seq_len
    per_token = m.layers * (10 * m.hidden + 2 * width) + 2 * m.hidden  # + the embeddings' sum and LayerNorm
    masked = tokens * max(settings.masking.mask_prob, settings.train.eval_mask_prob)
    return int(2 * (tokens * per_token + masked * 2 * data.vocab_size))


def human_bytes(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**30 else f"{n / 2**20:,.1f} MiB"


def machine_memory_bytes() -> int | None:
    """This machine's physical memory (None where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def world_problems(settings, world_size: int) -> list[str]:
    """What `settings` cannot split among `world_size` processes, as the loop splits a step (`batches.py`): equal
    parts of the batch, and of every ramped batch, per rank. `Run` checks it, and `mapnet pretrain --gpus/--nproc`
    before torchrun starts (there every worker would say it, and torchrun report each)."""
    t, d, out = settings.train, settings.distributed, []
    if t.batch_size % world_size:
        fits = t.batch_size - t.batch_size % world_size or world_size
        out.append(
            f"train.batch_size ({t.batch_size}) must be divisible by the world size ({world_size}): each "
            f"process trains an equal part of the batch (e.g. --batch-size {fits})"
        )
    if t.batch_ramp.start and t.batch_ramp.start % world_size:
        out.append(
            f"train.batch_ramp.start ({t.batch_ramp.start}) must be divisible by the world size ({world_size}): "
            "every ramped batch is split among the processes like the full one"
        )
    micro = t.micro_batch_size or t.batch_size // world_size
    if d.static_graph and micro * world_size < t.batch_size:
        # torch's DDP with static_graph crashes on a first backward under no_sync, and past that stops
        # all-reducing (pytorch/pytorch#143580, #187732): refused, not risked, on one process too.
        out.append(
            "distributed.static_graph cannot be combined with gradient accumulation (train.micro_batch_size "
            f"{micro} x {world_size} processes < train.batch_size {t.batch_size}): torch's "
            "DistributedDataParallel mishandles it; set one of them back"
        )
    return out


def check_world(settings, world_size: int) -> None:
    problems = world_problems(settings, world_size)
    if problems:
        raise MapnetError("; ".join(problems))


def check_launch(settings, shards: Path, world_size: int) -> None:
    """What every worker of a `--gpus/--nproc` job would refuse alike, said once by the launcher before torchrun
    starts (each worker said it, then torchrun reported each failed worker in 30 lines)."""
    from ..data.shards import ShardReader

    check_world(settings, world_size)
    data = ShardReader(shards, "train", verify="size")  # sizes only: the workers verify every byte as they open them
    if len(data) == 0:
        raise MapnetError(f"{shards} has no training sequences")
    check_run_inputs(settings, data, shards, world_size)


def check_resume_steps(settings, out: Path) -> None:
    """`--resume` with a train.steps below the step the run's newest checkpoint is at: the run cannot go back, and
    it used to say "done" and record the smaller train.steps in settings.toml beside the later checkpoint."""
    from ..model import checkpoint

    ckpt = checkpoint.latest_checkpoint(out)
    if ckpt is None or settings.train.time_budget:  # a budget run's steps are the budget's
        return
    step = checkpoint.read_config(ckpt).get("step")
    if isinstance(step, int) and settings.train.steps < step:
        raise MapnetError(
            f"--resume: the run in {out} is at step {step} already ({ckpt.name}), past train.steps = "
            f"{settings.train.steps} (--steps): a run cannot train back; resume with --steps {step} or "
            "more, or read that checkpoint as it is (export, blimp, finetune-glue)"
        )


__all__ = [
    "check_run_inputs",
    "run_input_problems",
    "batch_problems",
    "activation_bytes",
    "machine_memory_bytes",
    "world_problems",
    "check_world",
    "check_launch",
    "check_resume_steps",
]
