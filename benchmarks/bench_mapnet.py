"""Step time of MAP-Net vs uniform masking: one full training step, same batch, same model.

    uv run python benchmarks/bench_mapnet.py                              # mini and small, 512 tokens
    uv run python benchmarks/bench_mapnet.py --presets tiny --batch 8 --seq-len 128 --steps 5   # a quick CPU look

A step is what the training loop does: masks (per-sequence keyed streams),
forward, backward, AdamW step. "uniform" masks with `masking.uniform_mask`
and runs the encoder; "mapnet" runs `mapnet_micro_batch_loss` (MAP-Net
forward on the clean batch, Gumbel-top-k, importance weights, encoder,
eq. 10) and steps both networks; "mapnet+stats" also collects the per-step
statistics (the loop only does that on logging steps). bf16 autocast on CUDA,
fp32 on CPU; fused AdamW on both. Prints the median step time of each and
the ratio to uniform (the issue's target: <= 1.3x).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from mapnet_cli.masking.mapnet import MapnetJoint, ProposalConfig, ProposalNetwork
from mapnet_cli.masking.mapnet.host_draws import draw_on_host
from mapnet_cli.masking.uniform import SequenceRNG, apply_replacement, eligible_positions, sequence_keys, uniform_mask
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import MapnetSettings, MaskingSettings, preset
from mapnet_cli.train.optim import build_optimizer

SPECIAL = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def bench(preset_name: str, batch: int, seq_len: int, vocab: int, steps: int, warmup: int, device) -> dict:
    s = preset(preset_name)
    masking = MaskingSettings(
        strategy="mapnet", mapnet=MapnetSettings(explore_start=0.0, explore_end=0.0)
    )  # every row from MAP-Net
    torch.manual_seed(0)
    cfg = BertConfig.from_settings(s.model, vocab, 0)
    model = BertForMLM(cfg).to(device)
    proposal = ProposalNetwork(ProposalConfig.from_settings(s.model, masking), model.encoder.tok_embeddings).to(device)
    joint = MapnetJoint(model, proposal)
    ids = torch.randint(5, vocab, (batch, seq_len), device=device)
    ids[:, 0] = SPECIAL["cls"]
    slots = list(range(batch))
    cuda = device.type == "cuda"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)

    def uniform_step(opt, step):
        rng = SequenceRNG(sequence_keys(0, step, slots, 1))
        mask = uniform_mask(ids, eligible_positions(ids, SPECIAL), 0.15, "exact", rng)
        inputs = apply_replacement(ids, mask, vocab, SPECIAL, 0.8, 0.1, rng)
        with autocast:
            out = model(inputs, None, mask, targets=ids)
        (out.sequence_losses.sum() / batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    host_ids = ids.cpu()

    def mapnet_step(opt, step, with_stats):
        # As the training loop: the masks' randomness drawn on the host and sent with the batch.
        draws = draw_on_host(
            host_ids,
            None,
            special_ids=SPECIAL,
            vocab_size=vocab,
            step=step,
            total_steps=10**6,
            seed=0,
            slots=slots,
            masking=masking,
            rng=SequenceRNG(sequence_keys(0, step, slots, 1)),
        ).to(ids.device)
        with autocast:
            part, _ = joint(
                ids,
                None,
                special_ids=SPECIAL,
                vocab_size=vocab,
                step=step,
                total_steps=10**6,
                seed=0,
                slots=slots,
                masking=masking,
                draws=draws,
                with_stats=with_stats,
            )
        part.total(masking, enc_scale=1 / batch, map_scale=1 / batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    runs = {
        "uniform": (build_optimizer([model], s.optim), lambda o, i: uniform_step(o, i)),
        "mapnet": (build_optimizer([model, proposal], s.optim), lambda o, i: mapnet_step(o, i, False)),
        "mapnet+stats": (build_optimizer([model, proposal], s.optim), lambda o, i: mapnet_step(o, i, True)),
    }
    for opt, fn in runs.values():
        for i in range(warmup):
            fn(opt, i)
    sync(device)
    # Round-robin, so drift in clock speed or in a shared machine's load hits all three alike.
    samples = {name: [] for name in runs}
    for i in range(steps):
        for name, (opt, fn) in runs.items():
            t0 = time.perf_counter()
            fn(opt, warmup + i)
            sync(device)
            samples[name].append(time.perf_counter() - t0)
    times = {name: statistics.median(v) for name, v in samples.items()}
    params = {
        "encoder": sum(p.numel() for p in model.parameters()),
        "mapnet": sum(p.numel() for p in proposal.parameters()),
    }
    return {"times": times, "params": params}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", nargs="+", default=["mini", "small"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"device: {name}; batch {args.batch} x {args.seq_len} tokens, vocab {args.vocab}, median of {args.steps} steps"
    )
    print(
        f"{'preset':8} {'params enc/map':>16} {'uniform ms':>11} {'mapnet ms':>10} {'ratio':>6} {'+stats ms':>10} "
        f"{'ratio':>6}"
    )
    for p in args.presets:
        r = bench(p, args.batch, args.seq_len, args.vocab, args.steps, args.warmup, device)
        t = r["times"]
        u, m, ms = t["uniform"] * 1e3, t["mapnet"] * 1e3, t["mapnet+stats"] * 1e3
        pp = f"{r['params']['encoder'] / 1e6:.1f}M/{r['params']['mapnet'] / 1e6:.1f}M"
        print(f"{p:8} {pp:>16} {u:11.1f} {m:10.1f} {m / u:6.2f} {ms:10.1f} {ms / u:6.2f}")


if __name__ == "__main__":
    main()
