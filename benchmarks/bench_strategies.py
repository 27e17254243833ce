"""Step time of every masking arm against uniform: the real training step, side by side, one run.

    uv run python benchmarks/bench_strategies.py                               # tiny and mini, 32 x 128 tokens
    uv run python benchmarks/bench_strategies.py --presets mini --seq-len 512 --batch 8
    uv run python benchmarks/bench_strategies.py --data runs/real-text-x5/shards --arms uniform whole-word span pmi
    uv run python benchmarks/bench_strategies.py --recipe fast --arms uniform uniform-bf16 uniform-modern   # step
    levers
    python benchmarks/bench_strategies.py --device cuda --presets base --batch 64   # GPU: bf16 autocast

Each arm is built through `train.training_strategy` with the settings `mapnet compare` gives
it, and timed through `train.train_step` exactly as the loop runs it: the strategy's micro-batch
(masks, weights), forward, backward, AdamW (and MAP-Net, and the learnability reference update).
Logging-step statistics are off and nothing is read back (the loop does both every `logging.log_every`
steps only).
The arms run round-robin, step by step, on the same batches, so drift in a shared machine's load
hits all of them alike; run it on an otherwise idle machine (the load average is printed).
Prints the median step time of each arm and its ratio to uniform. `mapnet-ht-1layer` is the HT
arm with a one-block proposal (`masking.mapnet.layers = 1`): whether a smaller proposal suffices is
a question of its cost, and this is that cost. The `adaptive*` arms time the table's draws and its
score gathering; their table updates (every `masking.adaptive.every` = 200 steps) fall outside so
few steps, so `adaptive-T1` updates after every step: the bound on what the update can add.
`mapnet-ht-lite` (a `compare` arm) also learns on every 4th step only (`masking.mapnet.train_every`); an arm that
learns every k-th step is timed per
cycle: the median over windows of k consecutive steps of their mean (one learning step in each),
so its figure is its average step, not its cheaper frozen one. `--data SHARDS` takes the batches from real shards
(their sequence length and vocabulary) instead of a random Zipf corpus; the unit arms (whole-word,
span, pmi) need it: they read word boundaries from the shards' tokenizer, pmi its PMI vocabulary.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from types import SimpleNamespace

import numpy as np
import torch

from mapnet_cli import compare, distributed
from mapnet_cli.masking.strategy import to_device
from mapnet_cli.masking.uniform import TRAIN_MASKS, sequence_keys
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import apply, preset
from mapnet_cli.settings.recipes import recipe_layer
from mapnet_cli.train import rank_micro_slots, train_step, training_strategy
from mapnet_cli.train.loop import HOST
from mapnet_cli.train.optim import build_optimizer, build_scheduler
from mapnet_cli.train.step import precision_context

SPECIAL = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
ARMS = [
    "uniform",
    "uniform@0.3",
    "uniform@0.4",
    "stratified",
    "frequency-ht",
    "adaptive",
    "adaptive-soft",
    "adaptive-ht",
    "adaptive-soft-ht",
    "adaptive-T1",
    "mapnet",
    "mapnet-ht",
    "mapnet-ht-learnability",
    "mapnet-ht-1layer",
    "mapnet-ht-lite",
]
STEP_ARMS = ["uniform-bf16", "uniform-modern"]  # not masking arms: the same uniform step at another precision or block
UNIT_ARMS = ["whole-word", "span", "pmi"]  # --data only


class RandomCorpus:
    """What a strategy reads from the shards: ids with a Zipf-like type distribution (frequency needs counts)."""

    def __init__(self, sequences: int, seq_len: int, vocab: int, seed: int = 0):
        rng = np.random.default_rng(seed)
        ranks = np.arange(1, vocab - 4)
        p = 1.0 / ranks
        self.ids = 5 + rng.choice(len(ranks), size=(sequences, seq_len), p=p / p.sum())
        self.ids[:, 0] = SPECIAL["cls"]
        self.vocab_size, self.special_ids, self.token_kinds, self.max_seq_len = vocab, SPECIAL, None, seq_len

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, rows) -> np.ndarray:
        return self.ids[np.asarray(rows)]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


# Arms that are a `compare` arm with settings changed, for their cost alone: {arm: (compare arm, {section: {key:
# value}})}.
# `uniform-bf16` runs the step under bf16 autocast on the CPU too (`train.precision = bf16`; `auto` is fp32 there):
# oneDNN's bf16 matmuls are native on CPUs with AVX512-BF16 or AMX and emulated, slower, elsewhere.
VARIANTS = {
    "mapnet-ht-1layer": ("mapnet-ht", {"masking": {"mapnet": {"layers": 1}}}),
    "adaptive-T1": ("adaptive", {"masking": {"adaptive": {"every": 1}}}),
    "uniform-bf16": ("uniform", {"train": {"precision": "bf16"}}),
    "uniform-modern": ("uniform", {"model": {"block": "modern"}}),
}


def build(arm: str, size: str, batch: int, steps: int, data: RandomCorpus, info, recipe: str = "paper"):
    name, changed = VARIANTS.get(arm, (arm, {}))
    layer = {
        "masking": compare.strategy_masking(name, steps),
        "train": {"batch_size": batch, "steps": steps},
        "model": {"max_position": data.max_seq_len},
        "shard": {"max_seq_len": data.max_seq_len},
    }
    for section, values in changed.items():
        layer[section] = {**layer[section], **values}
    s = apply(apply(preset(size), recipe_layer(recipe, size), f"recipe {recipe}"), layer, f"bench {arm}")
    torch.manual_seed(0)
    model = BertForMLM(BertConfig.from_settings(s.model, data.vocab_size, data.special_ids["pad"])).to(info.device)
    strategy = training_strategy(s, model, data, info)
    optimizer = build_optimizer(strategy.optim_modules, s.optim, lrs=strategy.optim_lrs(s.optim.lr))
    return SimpleNamespace(
        settings=s, strategy=strategy, optimizer=optimizer, scheduler=build_scheduler(optimizer, s.optim, steps)
    )


def one_step(run, step: int, data: RandomCorpus, info) -> None:
    s, strategy = run.settings, run.strategy
    t = s.train
    distinct = t.batch_size // strategy.copies
    indices = np.arange(step * distinct, (step + 1) * distinct) % len(data)
    batches = []
    for slots in rank_micro_slots(t.batch_size, 1, 0, t.batch_size):
        keys = sequence_keys(t.seed, step, slots, TRAIN_MASKS)
        batch = strategy.micro_batch(data.take(indices[[x // strategy.copies for x in slots]]), step, slots, keys, HOST)
        batches.append(to_device(batch, info.device))  # as the loop: drawn on the host, sent with its positions
    train_step(
        strategy.net,
        run.optimizer,
        run.scheduler,
        batches,
        scale=1 / t.batch_size,
        grad_clip=0.0,
        autocast=precision_context(t.autocasts_bf16(info.device), info.device),
        info=info,
        batch_size=t.batch_size,
        loss_fn=strategy.loss_fn(step, with_stats=False),
        read=False,
        frozen=strategy.frozen(step),
    )
    strategy.after_step()


def per_cycle(times: list[float], cycle: int) -> float:
    """Median over windows of `cycle` consecutive steps of their mean step time (cycle 1: the median step)."""
    whole = len(times) - len(times) % cycle
    if not whole:
        raise SystemExit(f"--steps must be at least {cycle} (an arm learns every {cycle}th step)")
    return statistics.median(statistics.fmean(times[i : i + cycle]) for i in range(0, whole, cycle))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=["tiny", "mini"])
    ap.add_argument("--arms", nargs="+", default=ARMS, choices=ARMS + UNIT_ARMS + STEP_ARMS)
    ap.add_argument("--data", default=None, help="shard folder: real batches (default: a random Zipf corpus)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument(
        "--recipe",
        default="paper",
        choices=["paper", "fast"],
        help="the model and optimizer settings under every arm (paper: post-LN, dropout 0.1, the tables' "
        "figures; fast: pre-LN, no dropout, what `pretrain` gives tiny and mini)",
    )
    ap.add_argument(
        "--device",
        default="cpu",
        choices=["cpu", "cuda"],
        help="cuda: bf16 autocast, as the loop's precision=auto (uniform-bf16 forces it on the CPU too)",
    )
    args = ap.parse_args()
    info = distributed.DistInfo(device=torch.device(args.device))
    if args.data:
        from mapnet_cli.data.shards import ShardReader

        data = ShardReader(args.data, "train", verify="size")
        args.seq_len, args.vocab = data.max_seq_len, data.vocab_size
    elif set(args.arms) & set(UNIT_ARMS):
        ap.error(
            f"--data is needed by {', '.join(sorted(set(args.arms) & set(UNIT_ARMS)))} (word boundaries come from the "
            "shards)"
        )
    else:
        data = RandomCorpus(4096, args.seq_len, args.vocab)
    where = torch.cuda.get_device_name() if info.device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"{where}; load average {os.getloadavg()[0]:.2f} (1 min) before; "
        f"batch {args.batch} x {args.seq_len} tokens, vocab {args.vocab}, recipe {args.recipe}; "
        f"median of {args.steps} steps, round-robin"
    )
    for size in args.presets:
        runs = {
            arm: build(arm, size, args.batch, args.warmup + args.steps, data, info, args.recipe) for arm in args.arms
        }
        for run in runs.values():
            for i in range(args.warmup):
                one_step(run, i, data, info)
        samples = {arm: [] for arm in runs}
        for i in range(args.warmup, args.warmup + args.steps):
            for arm, run in runs.items():
                sync(info.device)
                t0 = time.perf_counter()
                one_step(run, i, data, info)
                sync(info.device)  # GPU work is asynchronous: time it to its end
                samples[arm].append(time.perf_counter() - t0)
        typical = {arm: per_cycle(v, runs[arm].settings.masking.mapnet.train_every) for arm, v in samples.items()}
        base = typical.get("uniform")
        print(f"\n{size}: {'arm':24} {'ms/step':>9} {'vs uniform':>11}")
        for arm, v in typical.items():
            ms = v * 1e3
            ratio = f"{v / base:.2f}x" if base else "-"
            print(f"{'':{len(size) + 2}}{arm:24} {ms:9.1f} {ratio:>11}")
    print(f"\nload average {os.getloadavg()[0]:.2f} (1 min) after")


if __name__ == "__main__":
    main()
