"""The ceiling of a `base` training step on this device: its FLOPs and bytes counted, its own matrix products
and attention timed alone, the floor they add up to, and how close mapnet's step comes.

    python benchmarks/bench_ceiling.py --device cuda                  # base, 128 x 128 tokens, bf16 (the issue-46
    shape)
    python benchmarks/bench_ceiling.py --device cuda --json OUT/ceiling.json
    uv run python benchmarks/bench_ceiling.py --smoke                  # CPU: tiny shapes, fp32, a few repeats (the
    test)

What is counted (printed with the numbers):
- FLOPs: the model FLOPs the step performs (`model.bert.flops_per_token`, which it checks against): every
  block's matrix products at every position, except the last block's query, output projection and
  feed-forward, which run only at the N masked positions (`Block.forward_at`), and the head only at the N
  masked positions; attention scores and values; training = 3 x forward (2 FLOPs per multiply-add). The
  recomputation inside FlashAttention's backward is not counted (MFU counts the model's FLOPs, not the
  hardware's).
- Bytes: what must cross device memory even with every elementwise stage fused into one pass between two
  matrix products (bias and GELU in the products' epilogues), bf16 activations, fp32 weights and AdamW state.
- The floor: the sum, over the step's kernels in one stream, of the time each needs at the device's measured
  rates: every matrix product of the step (forward, input gradient, weight gradient) timed alone at its own
  shape, attention (forward + backward) timed alone at its own shape, and the bytes at the measured copy
  bandwidth. No version of this step, in this precision, runs much faster.
- MFU twice, both named: against the datasheet bf16 dense peak (989 TFLOP/s for the H100 SXM and the H200),
  and against the measured ceiling (an 8192^3 bf16 matrix product on this card).
- Which kernel SDPA picks for the step's attention: each backend (flash, memory-efficient, cuDNN, math)
  tried alone, and the default's kernels read off the profiler, with no mask (packed shards) and with the
  (B, 1, 1, T) padding mask a padded batch passes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_bench import MapnetStep, corpus, device_peak, draw_batch, median_ms, model_config, sync, time_steps  # noqa: E402

from mapnet_cli.model.bert import BertConfig, flops_per_token  # noqa: E402


@dataclass(frozen=True)
class Gemm:
    """A linear layer's product x (m, k) @ W^T (k, n), `count` times per step."""

    name: str
    m: int
    n: int
    k: int
    count: int

    @property
    def flops(self) -> float:  # forward + input gradient + weight gradient, each 2 m n k
        return 3 * 2.0 * self.m * self.n * self.k * self.count


@dataclass(frozen=True)
class Attention:
    """SDPA over (batch, heads, queries, keys, head dim), `count` times per step."""

    name: str
    b: int
    heads: int
    tq: int
    tk: int
    d: int
    count: int

    @property
    def flops(self) -> float:  # QK^T and PV, each 2 tq tk d per head; training = 3 x forward
        return 3 * 4.0 * self.b * self.heads * self.tq * self.tk * self.d * self.count


def step_gemms(cfg: BertConfig, B: int, T: int, N: int) -> list[Gemm]:
    H, I, L, V = cfg.hidden, cfg.intermediate, cfg.layers, cfg.vocab_size
    M = B * T
    return [
        Gemm("QKV", M, 3 * H, H, L - 1),
        Gemm("attention out", M, H, H, L - 1),
        Gemm("FFN in", M, I, H, L - 1),
        Gemm("FFN out", M, H, I, L - 1),
        Gemm("last block K,V", M, 2 * H, H, 1),
        Gemm("last block Q @N", N, H, H, 1),
        Gemm("last block out @N", N, H, H, 1),
        Gemm("last block FFN in @N", N, I, H, 1),
        Gemm("last block FFN out @N", N, H, I, 1),
        Gemm("head dense @N", N, H, H, 1),
        Gemm("head vocab @N", N, V, H, 1),
    ]


def step_attention(cfg: BertConfig, B: int, T: int, N: int, width: int) -> list[Attention]:
    d = cfg.hidden // cfg.heads
    # The last block's query grid is (B, width); its useful rows are N (= B x width for uniform masks).
    return [
        Attention("blocks 1..L-1", B, cfg.heads, T, T, d, cfg.layers - 1),
        Attention("last block @N", B, cfg.heads, width, T, d, 1),
    ]


FORMULA = (
    "F = 6 [ (L-1) M (4H^2 + 2HI) + 2H^2 M + N (2H^2 + 2HI) + N (H^2 + HV) ] + 12 [ (L-1) B T^2 H + N T H ]\n"
    "    (M = B T tokens, N masked positions; 6 = 3 (forward + two backward products) x 2 FLOPs per multiply-add;\n"
    "     the last block's K, V at every position, its Q, output and FFN at N; the head at N; attention rows at N)"
)


def step_bytes(cfg: BertConfig, B: int, T: int, N: int, params: int, matrix_params: int) -> dict[str, float]:
    """The bytes a perfectly fused step must move (module docstring), by part."""
    H, I, L, V = cfg.hidden, cfg.intermediate, cfg.layers, cfg.vocab_size
    M, bf16 = B * T, 2
    # Per token and block: forward, two (residual + dropout + LayerNorm) passes reading 2H and writing H;
    # backward, two LayerNorm/residual passes (4H each) and GELU's (read grad and pre-activation, write: 3I).
    block = (6 * H + 8 * H + 3 * I) * bf16
    return {
        # AdamW, fp32: read weight, gradient, m, v; write weight, m, v.
        "AdamW (fp32 weight, grad, m, v)": 28.0 * params,
        # autocast: each weight matrix read in fp32 and written in bf16 once per step; gradients accumulated in fp32.
        "bf16 weight casts + fp32 gradients": 6.0 * matrix_params + 6.0 * matrix_params,
        "embeddings (gather, add, LayerNorm; backward)": 7.0 * H * M * bf16,
        "blocks' elementwise passes": block * (M * (L - 1) + N),  # the last block's at its N positions
        "head at N (GELU, LayerNorm, cross-entropy over V)": (10 * H * N + 2 * N * V) * bf16,
    }


def gemm_times(gemms: list[Gemm], dtype, device, repeats: int) -> dict[str, dict[str, float]]:
    """Each product's forward, input-gradient and weight-gradient times (ms), each timed alone, inputs
    rotated over two sets so repeated runs do not just read the cache."""
    out = {}
    for g in gemms:
        sets = [
            (
                torch.randn(g.m, g.k, device=device, dtype=dtype),
                torch.randn(g.n, g.k, device=device, dtype=dtype),
                torch.randn(g.m, g.n, device=device, dtype=dtype),
            )
            for _ in range(2)
        ]
        turn = iter(range(10**9))

        def pick(sets=sets, turn=turn):
            return sets[next(turn) % 2]

        fwd = median_ms(lambda: (lambda x, w, dy: x @ w.t())(*pick()), device, repeats)
        dgrad = median_ms(lambda: (lambda x, w, dy: dy @ w)(*pick()), device, repeats)
        wgrad = median_ms(lambda: (lambda x, w, dy: dy.t() @ x)(*pick()), device, repeats)
        out[g.name] = {
            "forward_ms": fwd,
            "dgrad_ms": dgrad,
            "wgrad_ms": wgrad,
            "tflops": 3 * 2.0 * g.m * g.n * g.k / ((fwd + dgrad + wgrad) * 1e-3) / 1e12,
        }
        del sets
    return out


BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH")


def attention_call(a: Attention, dtype, device, dropout: float, mask: bool):
    q = torch.randn(a.b, a.heads, a.tq, a.d, device=device, dtype=dtype, requires_grad=True)
    k, v = (torch.randn(a.b, a.heads, a.tk, a.d, device=device, dtype=dtype, requires_grad=True) for _ in range(2))
    m = torch.ones(a.b, 1, 1, a.tk, dtype=torch.bool, device=device) if mask else None
    grad = torch.randn(a.b, a.heads, a.tq, a.d, device=device, dtype=dtype)

    def run():
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, dropout_p=dropout)
        out.backward(grad)

    return run


def attention_report(a: Attention, dtype, device, dropout: float, repeats: int) -> dict:
    """The default kernel's time (forward + backward), each backend tried alone, and which kernels ran."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    report = {
        "default_ms": median_ms(attention_call(a, dtype, device, dropout, False), device, repeats),
        "backends": {},
    }
    for name in BACKENDS:
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            report["backends"][name] = "not in this torch"
            continue
        for masked in (False, True):
            key = name + (" + padding mask" if masked else "")
            try:  # a refusing backend warns why before it raises: the one line below says it
                with sdpa_kernel([backend]), warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    report["backends"][key] = round(
                        median_ms(
                            attention_call(a, dtype, device, dropout, masked), device, max(3, repeats // 3), warmup=1
                        ),
                        4,
                    )
            except RuntimeError as exc:  # "No available kernel": this backend refuses the call
                report["backends"][key] = "refused: " + str(exc).strip().splitlines()[0][:100]
    for masked in (False, True):
        report["picked" + (" with padding mask" if masked else "")] = picked_kernels(
            attention_call(a, dtype, device, dropout, masked), device
        )
    return report


def picked_kernels(run, device) -> list[str]:
    """The SDPA operators (CPU) or kernels (CUDA) the default dispatch ran, read off the profiler."""
    from torch.profiler import ProfilerActivity, profile

    run()
    sync(device)
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        run()
        sync(device)
    words = ("flash", "efficient", "cudnn", "fmha", "math", "attention", "softmax", "sdpa")
    names = {e.key for e in prof.key_averages() if any(w in e.key.lower() for w in words)}
    return sorted(n[:90] for n in names)


def measured_peaks(dtype, device, smoke: bool, repeats: int) -> tuple[float, float]:
    """(matrix TFLOP/s of a large square product, copy TB/s counting bytes read plus written)."""
    n = 1024 if smoke else 8192
    sets = [
        (torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)) for _ in range(2)
    ]
    turn = iter(range(10**9))
    ms = median_ms(lambda: (lambda a, b: a @ b)(*sets[next(turn) % 2]), device, repeats)
    tflops = 2.0 * n**3 / (ms * 1e-3) / 1e12
    elems = (16 if smoke else 512) * 2**20  # 64 MiB / 2 GiB of fp32 (far past the L2)
    src, dst = torch.randn(elems, device=device), torch.empty(elems, device=device)
    ms = median_ms(lambda: dst.copy_(src), device, repeats)
    return tflops, 2.0 * 4 * elems / (ms * 1e-3) / 1e12


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, fp32, few repeats: runs on the CPU in seconds")
    ap.add_argument("--size", default=None, help="model preset (default: base; --smoke: tiny)")
    ap.add_argument("--batch", type=int, default=None, help="sequences per step (default 128; --smoke 8)")
    ap.add_argument("--seq-len", type=int, default=None, help="tokens per sequence (default 128; --smoke 32)")
    ap.add_argument("--vocab", type=int, default=None, help="vocabulary (default 32768, the paper's; --smoke 512)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per kernel (default 20; --smoke 3)")
    ap.add_argument(
        "--steps", type=int, default=None, help="timed steps per round of mapnet's step (default 10; --smoke 2)"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--arms",
        default=None,
        help="mapnet steps to time, comma-separated from eager,blocks,model "
        "(default eager,blocks: train.compile off and its default; '' for none)",
    )
    ap.add_argument("--json", type=Path, default=None, help="write every figure here")
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but no CUDA device is visible")
    smoke = args.smoke
    size = args.size or ("tiny" if smoke else "base")
    B, T = args.batch or (8 if smoke else 128), args.seq_len or (32 if smoke else 128)
    vocab = args.vocab or (512 if smoke else 32768)
    repeats, steps = args.repeats or (3 if smoke else 20), args.steps or (2 if smoke else 10)
    arms = [a for a in (args.arms if args.arms is not None else "eager,blocks").split(",") if a]
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    name, datasheet, which = device_peak(device)
    cfg = model_config(size, vocab)
    inputs = [corpus(B, T, vocab, seed=s) for s in range(4)]
    first = draw_batch(inputs[0], 0, vocab, device)
    N, width = first.positions.numel(), first.width
    M = B * T
    result: dict = {
        "device": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "dtype": str(dtype),
        "size": size,
        "batch": B,
        "seq_len": T,
        "vocab": vocab,
        "masked": N,
        "width": width,
        "datasheet_tflops": datasheet,
        "datasheet": which,
    }
    print(
        f"device {name}; torch {torch.__version__}, CUDA {torch.version.cuda}; "
        f"{'bf16' if dtype == torch.bfloat16 else 'fp32'}"
        f"{' (smoke: tiny shapes, few repeats: the figures mean nothing)' if smoke else ''}"
    )
    print(
        f"step: {size} L{cfg.layers}/H{cfg.hidden}/A{cfg.heads}/I{cfg.intermediate}, vocab {vocab}, batch {B} x {T} = "
        f"{M} tokens, N = {N} masked positions (widest row {width}), dropout {cfg.dropout}, no padding (no attention "
        "mask)"
    )

    # ------------------------------------------------------------ the two numbers first
    gemms, attns = step_gemms(cfg, B, T, N), step_attention(cfg, B, T, N, width)
    flops = sum(g.flops for g in gemms) + sum(a.flops for a in attns) - attns[1].flops + 12.0 * N * T * cfg.hidden
    check = flops_per_token(cfg, T, N / M) * M
    if abs(flops - check) > 1e-9 * check:
        sys.exit(f"error: the FLOP count {flops:.6g} disagrees with model.bert.flops_per_token's {check:.6g}")
    from mapnet_cli.model.bert import BertForMLM

    with torch.device("meta"):
        shapes = BertForMLM(cfg)
    params = sum(p.numel() for p in shapes.parameters())
    matrix_params = sum(p.numel() for p in shapes.parameters() if p.dim() >= 2)
    parts = step_bytes(cfg, B, T, N, params, matrix_params)
    total_bytes = sum(parts.values())
    print(f"\nFLOPs per step (model FLOPs; = model.bert.flops_per_token x tokens):\n  {FORMULA}")
    print(
        f"  L={cfg.layers} H={cfg.hidden} I={cfg.intermediate} V={vocab} B={B} T={T} M={M} N={N}: "
        f"{flops / 1e12:.4f} TFLOP per step, {flops / M / 1e6:.1f} MFLOP per token"
    )
    for g in gemms:
        print(f"    {g.name:24} x{g.count:<3} ({g.m} x {g.k}) @ ({g.k} x {g.n})   {g.flops / flops:6.1%}")
    for a in attns:
        print(
            f"    attention {a.name:14} x{a.count:<3} B{a.b} A{a.heads} {a.tq}x{a.tk} d{a.d}   {a.flops / flops:6.1%}"
        )
    print(
        f"bytes per step that even a fully fused step moves ({params / 1e6:.1f}M parameters, "
        f"{matrix_params / 1e6:.1f}M in matrices): {total_bytes / 1e9:.3f} GB"
    )
    for part, b in parts.items():
        print(f"    {part:48} {b / 1e9:8.3f} GB")
    result.update(flops=flops, flops_formula=FORMULA, parameters=params, bytes=total_bytes, bytes_parts=parts)

    # ------------------------------------------------------------ the device's ceilings
    peak_tflops, copy_tbs = measured_peaks(dtype, device, smoke, repeats)
    print(
        f"\nmeasured ceilings: {'1024' if smoke else '8192'}^3 matrix product {peak_tflops:.1f} TFLOP/s "
        f"({peak_tflops / datasheet:.0%} of the datasheet's {datasheet:g})"
        if datasheet
        else f"\nmeasured ceilings: {'1024' if smoke else '8192'}^3 matrix product {peak_tflops:.3g} TFLOP/s",
        end="",
    )
    print(f"; device copy {copy_tbs:.3g} TB/s (read + written)")
    times = gemm_times(gemms, dtype, device, repeats)
    print(f"\n{'product (x count)':30} {'fwd ms':>8} {'dgrad ms':>9} {'wgrad ms':>9} {'TFLOP/s':>8}")
    gemm_ms = 0.0
    for g in gemms:
        t = times[g.name]
        gemm_ms += (t["forward_ms"] + t["dgrad_ms"] + t["wgrad_ms"]) * g.count
        print(
            f"{g.name + f' (x{g.count})':30} {t['forward_ms']:8.3f} {t['dgrad_ms']:9.3f} {t['wgrad_ms']:9.3f} "
            f"{t['tflops']:8.1f}"
        )
    dropout = cfg.attention_dropout
    attn_ms, attn_reports = 0.0, {}
    for a in attns:
        rep = attention_report(a, dtype, device, dropout, repeats)
        attn_reports[a.name] = rep
        attn_ms += rep["default_ms"] * a.count
        print(
            f"\nattention {a.name} (B{a.b} A{a.heads} {a.tq}x{a.tk} d{a.d}, dropout {dropout}, x{a.count}): "
            f"default {rep['default_ms']:.3f} ms forward + backward"
        )
        for key, v in rep["backends"].items():
            print(f"    {key:38} {v if isinstance(v, str) else f'{v:.3f} ms'}")
        print(f"    the default ran (no mask): {', '.join(rep['picked']) or '?'}")
        print(f"    the default ran (padding mask): {', '.join(rep['picked with padding mask']) or '?'}")
    bytes_ms = total_bytes / (copy_tbs * 1e12) * 1e3
    floor_ms = gemm_ms + attn_ms + bytes_ms
    print(
        f"\nfloor of one step = products {gemm_ms:.2f} ms + attention {attn_ms:.2f} ms + bytes {bytes_ms:.2f} ms "
        f"= {floor_ms:.2f} ms ({M / floor_ms * 1e3:,.0f} tokens/s)"
    )
    if datasheet:
        print(
            f"  a step at the floor would reach {flops / (floor_ms * 1e-3) / 1e12 / datasheet:.1%} MFU "
            f"(datasheet {datasheet:g} TFLOP/s, {which}), {flops / (floor_ms * 1e-3) / 1e12 / peak_tflops:.1%} of the "
            f"measured ceiling {peak_tflops:.0f} TFLOP/s"
        )
    result.update(
        measured_tflops=peak_tflops,
        copy_tbs=copy_tbs,
        gemms=times,
        attention=attn_reports,
        floor_ms={"products": gemm_ms, "attention": attn_ms, "bytes": bytes_ms, "total": floor_ms},
    )

    # ------------------------------------------------------------ mapnet's step against it
    result["mapnet"] = {}
    for arm in arms:
        step = MapnetStep(cfg, device, compile=arm != "eager", scope="model" if arm == "model" else "blocks")
        for ids in inputs[:2]:  # warm-up: allocation, first dispatch, compilation
            step(ids)
        per_step = time_steps(step, inputs, device, args.rounds, steps)
        ms = statistics.median(per_step)
        achieved = flops / (ms * 1e-3) / 1e12
        how = "train.compile off" if arm == "eager" else "compiled per " + ("block" if arm == "blocks" else "model")
        line = (
            f"mapnet step, {arm:6} ({how}): {ms:.2f} ms, {M / ms * 1e3:,.0f} tokens/s; {floor_ms / ms:.1%} of the floor"
        )
        if datasheet:
            line += (
                f"; MFU {achieved / datasheet:.1%} of the datasheet {datasheet:g}, {achieved / peak_tflops:.1%} "
                f"of the measured {peak_tflops:.0f}"
            )
        else:
            line += f"; {achieved:.3f} TFLOP/s, {achieved / peak_tflops:.1%} of the measured matrix ceiling"
        print(line, flush=True)
        result["mapnet"][arm] = {
            "ms": ms,
            "rounds_ms": per_step,
            "tokens_per_s": M / ms * 1e3,
            "mfu_datasheet": achieved / datasheet if datasheet else None,
            "mfu_measured": achieved / peak_tflops,
            "fraction_of_floor": floor_ms / ms,
        }
        del step
        if device.type == "cuda":
            torch.cuda.empty_cache()
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) after")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
