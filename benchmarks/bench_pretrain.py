"""Training-step throughput: mapnet's BERT vs the usual Hugging Face setup, side by side.

    uv run python benchmarks/bench_pretrain.py                        # CPU: mini and small, seq 128
    uv run python benchmarks/bench_pretrain.py --threads 4 --batch 32
    uv run python benchmarks/bench_pretrain.py --device cuda          # GPU: tokens/s and MFU (bf16)
    uv run python benchmarks/bench_pretrain.py --sizes small --compile   # + both models under torch.compile
    uv run python benchmarks/bench_pretrain.py --sizes mini --vocab 8192 --batch 32 --dropout 0 --bf16
                                                    # the fast recipe's step (no dropout), + both arms in CPU bf16

Both arms do the same work per step: uniform 15% masking with 80/10/10
replacement of a batch of B x T tokens (mapnet: `train.make_batch`; HF:
`DataCollatorForLanguageModeling`), forward, backward, fused AdamW step, with the
same sizes, vocabulary (32,768, the paper's), batch, dropout and thread
count. The arms run interleaved in rounds after warm-up iterations, so a
noisy (shared) machine slows both alike; the median round is reported.

Where the difference comes from: mapnet runs the MLM head (a V x H matmul)
and its last block (all but keys and values) only at the ~15% masked
positions, attends through SDPA with no T x T mask when nothing is padded,
fuses Q/K/V into one matmul, and has no token-type embedding; HF computes the
last block and the logits at every position and discards 85% of both.

MFU (GPU mode) counts each arm's own matmul FLOPs (`model.flops_per_token`;
the HF arm's head at every position) against an assumed peak, printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

import numpy as np
import torch

from mapnet_cli import distributed
from mapnet_cli.masking.strategy import to_device
from mapnet_cli.masking.uniform import sequence_keys
from mapnet_cli.model.bert import BertConfig, BertForMLM, flops_per_token
from mapnet_cli.settings import MaskingSettings, OptimSettings, preset
from mapnet_cli.train import make_batch, train_step
from mapnet_cli.train.loop import HOST
from mapnet_cli.train.optim import build_optimizer

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SPECIAL_IDS = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}  # bf16 dense, per GPU


def corpus(batch: int, seq_len: int, vocab: int, seed: int) -> np.ndarray:
    ids = np.random.default_rng(seed).integers(len(SPECIALS), vocab, size=(batch, seq_len))
    ids[:, 0], ids[:, -1] = SPECIAL_IDS["cls"], SPECIAL_IDS["sep"]
    return ids


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


class MapnetArm:
    name = "mapnet"

    def __init__(self, cfg: BertConfig, device: torch.device, autocast):
        self.cfg, self.device, self.autocast = cfg, device, autocast
        self.model = BertForMLM(cfg).to(device)
        self.optimizer = build_optimizer([self.model], OptimSettings())
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: 1.0)
        self.info = distributed.DistInfo(device=device)
        self.step_no = 0

    def step(self, ids: np.ndarray) -> None:
        keys = sequence_keys(0, self.step_no, range(len(ids)))
        # As the loop: masks drawn on the host, sent with their positions; a step between logging steps (no read).
        batch = to_device(make_batch(ids, keys, SPECIAL_IDS, self.cfg.vocab_size, MaskingSettings(), HOST), self.device)
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

    def flops_per_token(self, seq_len: int) -> float:
        return flops_per_token(self.cfg, seq_len, 0.15)


class HFArm:
    """transformers BertForMaskedLM + DataCollatorForLanguageModeling + torch AdamW: the usual recipe."""

    name = "hf"

    def __init__(self, cfg: BertConfig, device: torch.device, autocast):
        import transformers
        from tokenizers import Tokenizer, models

        vocab = {t: i for i, t in enumerate(SPECIALS)} | {f"w{i}": i for i in range(len(SPECIALS), cfg.vocab_size)}
        tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        tokenizer = transformers.PreTrainedTokenizerFast(
            tokenizer_object=tok,
            pad_token="[PAD]",
            unk_token="[UNK]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
        self.collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
        hf_cfg = transformers.BertConfig(
            vocab_size=cfg.vocab_size,
            hidden_size=cfg.hidden,
            num_hidden_layers=cfg.layers,
            num_attention_heads=cfg.heads,
            intermediate_size=cfg.intermediate,
            max_position_embeddings=cfg.max_position,
            hidden_dropout_prob=cfg.dropout,
            attention_probs_dropout_prob=cfg.attention_dropout,
            type_vocab_size=2,
        )
        self.model = transformers.BertForMaskedLM(hf_cfg).to(device).train()
        o = OptimSettings()
        # Fused, as mapnet's `build_optimizer` (CPU and CUDA): the arms differ in the model, not the optimizer.
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=o.lr, betas=o.betas, eps=o.eps, weight_decay=o.weight_decay, fused=True
        )
        self.cfg, self.device, self.autocast = cfg, device, autocast
        self.attn_impl = getattr(self.model.config, "_attn_implementation", "?")

    def step(self, ids: np.ndarray) -> None:
        batch = self.collator([{"input_ids": row.tolist()} for row in ids])
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with self.autocast:
            loss = self.model(**batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        loss.item()  # as a training loop that logs its loss

    def flops_per_token(self, seq_len: int) -> float:
        return flops_per_token(self.cfg, seq_len, 1.0)


def time_steps(arm, ids: np.ndarray, iters: int) -> tuple[float, float]:
    """(tokens per wall-clock second, tokens per CPU-second of this process). On a
    shared machine the CPU-time figure is the steadier one: it does not count
    the time the scheduler gave to other processes."""
    sync(arm.device)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(iters):
        arm.step(ids)
    sync(arm.device)
    tokens = ids.size * iters
    return tokens / (time.perf_counter() - t0), tokens / (time.process_time() - c0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["mini", "small"])
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--threads", type=int, default=0, help="torch threads for both arms (0: torch's default)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=4, help="timed steps per arm per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="GPU peak for MFU (0: look up by device name)")
    ap.add_argument(
        "--dropout",
        type=float,
        default=None,
        help="hidden and attention dropout of both models (default: the preset's, 0.1, the paper's; the "
        "fast recipe, which tiny and mini train with, has 0)",
    )
    ap.add_argument(
        "--bf16",
        action="store_true",
        help="CPU: also time both arms under bf16 autocast (`train.precision = bf16`), as two more arms; "
        "native only on CPUs with AVX512-BF16 or AMX",
    )
    ap.add_argument(
        "--compile",
        action="store_true",
        help="also time both models under torch.compile (mapnet per block, as train.compile; HF whole), as two more "
        "arms",
    )
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else torch.autocast("cpu", enabled=False)
    )
    peak = args.peak_tflops
    if device.type == "cuda" and not peak:
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0)
    print(
        f"device {device}{' ' + torch.cuda.get_device_name() if device.type == 'cuda' else ''}, torch "
        f"{torch.__version__}, "
        f"threads {torch.get_num_threads()}, batch {args.batch} x seq {args.seq_len}, vocab {args.vocab}, "
        f"{args.rounds} interleaved rounds x {args.iters} steps after {args.warmup} warm-up; "
        f"dropout {'as the preset' if args.dropout is None else args.dropout}; "
        f"load average {os.getloadavg()[0]:.2f} (1 min) before"
    )
    if device.type == "cuda":
        print(
            f"MFU against an assumed peak of {peak:g} TFLOP/s (bf16 dense)"
            if peak
            else "MFU: unknown GPU, pass --peak-tflops"
        )

    for size in args.sizes:
        m = preset(size).model
        if args.dropout is not None:
            m = replace(m, dropout=args.dropout, attention_dropout=args.dropout)
        cfg = BertConfig.from_settings(m, args.vocab, 0)
        ids = corpus(args.batch, args.seq_len, args.vocab, seed=0)
        torch.manual_seed(0)
        arms = [MapnetArm(cfg, device, autocast), HFArm(cfg, device, autocast)]
        if args.bf16 and device.type == "cpu":
            for cls in (MapnetArm, HFArm):
                arm = cls(cfg, device, torch.autocast("cpu", dtype=torch.bfloat16))
                arm.name += "+bf16"
                arms.append(arm)
        if args.compile:
            for cls in (MapnetArm, HFArm):
                arm = cls(cfg, device, autocast)
                if cls is MapnetArm:  # as `train.compile` does it: each block in place
                    for block in arm.model.encoder.blocks:
                        block.compile()
                else:  # the usual way for a Hugging Face model
                    arm.model = torch.compile(arm.model)
                arm.name += "+compile"
                arms.append(arm)
        for arm in arms:
            for _ in range(args.warmup):
                arm.step(ids)
        wall = {arm.name: [] for arm in arms}
        cpu = {arm.name: [] for arm in arms}
        for r in range(args.rounds):
            for arm in arms if r % 2 == 0 else arms[::-1]:  # alternate who goes first
                w, c = time_steps(arm, ids, args.iters)
                wall[arm.name].append(w)
                cpu[arm.name].append(c)
        med = {k: statistics.median(v) for k, v in wall.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        line = (
            f"{size:>6} (L{cfg.layers}/H{cfg.hidden}/A{cfg.heads}, {arms[0].model.num_parameters() / 1e6:.1f}M "
            "params): "
            f"mapnet {med['mapnet']:,.0f} tok/s | hf {med['hf']:,.0f} tok/s (attn={arms[1].attn_impl}) | "
            f"ratio {med['mapnet'] / med['hf']:.2f}x"
        )
        if device.type == "cuda" and peak:
            mfu = {a.name: med[a.name] * a.flops_per_token(args.seq_len) / (peak * 1e12) for a in arms}
            line += f" | MFU mapnet {mfu['mapnet']:.1%}, hf {mfu['hf']:.1%}"
        print(line, flush=True)
        if device.type == "cpu":
            print(
                f"        per CPU-second: mapnet {med_cpu['mapnet']:,.0f} | hf {med_cpu['hf']:,.0f} | "
                f"ratio {med_cpu['mapnet'] / med_cpu['hf']:.2f}x"
            )
        if "mapnet+bf16" in med:
            print(
                f"        CPU bf16: mapnet {med['mapnet+bf16']:,.0f} tok/s ({med['mapnet+bf16'] / med['mapnet']:.2f}x "
                "its fp32) | "
                f"hf {med['hf+bf16']:,.0f} tok/s ({med['hf+bf16'] / med['hf']:.2f}x) | "
                f"mapnet+bf16 / hf {med['mapnet+bf16'] / med['hf']:.2f}x | mapnet+bf16 / hf+bf16 "
                f"{med['mapnet+bf16'] / med['hf+bf16']:.2f}x"
            )
        if args.compile:
            line = (
                f"        torch.compile: mapnet {med['mapnet+compile']:,.0f} tok/s | hf {med['hf+compile']:,.0f} "
                "tok/s | "
                f"mapnet+compile / hf {med['mapnet+compile'] / med['hf']:.2f}x | "
                f"mapnet+compile / hf+compile {med['mapnet+compile'] / med['hf+compile']:.2f}x"
            )
            if device.type == "cuda" and peak:
                line += f" | MFU mapnet+compile {mfu['mapnet+compile']:.1%}, hf+compile {mfu['hf+compile']:.1%}"
            print(line)
        print("        wall tok/s by round: " + ", ".join(f"{k} {[round(x) for x in v]}" for k, v in wall.items()))

    print(f"load average {os.getloadavg()[0]:.2f} (1 min) after")


if __name__ == "__main__":
    main()
