"""How far a training step is from what this CPU can do: the step's FLOPs as performed, its rate, and the CPU's
ceilings at the step's own matrix shapes and at a large square one, with the training's thread count.

    uv run python benchmarks/bench_cpu_ceiling.py                  # the `hour` step, `mini` `fast`, HF BERT at `mini`
    uv run python benchmarks/bench_cpu_ceiling.py --json OUT.json
    uv run python benchmarks/bench_cpu_ceiling.py --smoke          # tiny shapes, a few repeats (the test)

Run it alone on an otherwise idle machine (the load average is printed before and after). What is counted:
- FLOPs as performed: `torch.utils.flop_counter.FlopCounterMode` over one whole training step (forward, backward;
  matrix products and attention, 2 FLOPs a multiply-add; the optimizer's elementwise work is not counted), printed
  per operator: this replaces a formula, since it is the count of what the step ran.
- The ceiling at the step's shapes: every matrix product of the step (shapes read off the profiler, in the step's
  precision) timed alone, repeated; their FLOPs over the sum of their times. The large square: an N^3 product.
  Both in fp32 and, where the CPU has bf16 instructions (AMX or AVX512-BF16), in bf16.
- Memory bandwidth: a 256 MB copy, bytes read plus written per second.
- The step: median ms of rounds of steps, each timed to its end; its FLOP/s; its fraction of each ceiling.
The steps: the `hour` recipe's (L4/H192, the modern block, 64 x 64 tokens, 16,384 vocabulary, 30% masking,
bf16 where native, SDPA's kernel as the recipe resolves it on a CPU: `train.attention_kernel`), `mini` under `fast`
(L4/H256, 32 x 128 tokens, 8,192 vocabulary, 15%, fp32), and Hugging Face `BertForMaskedLM` at `mini` on the same
batch (forward, backward, AdamW), so the ">= 3x HF" goal is read in the same call. Real-text shards are not needed:
the step's cost depends on its shapes, not on the tokens.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_bench import MapnetStep, corpus, median_ms, time_steps  # noqa: E402

from mapnet_cli.cpu_features import cpu_native_bf16  # noqa: E402
from mapnet_cli.model.bert import BertConfig  # noqa: E402
from mapnet_cli.settings import resolve  # noqa: E402

CPU = torch.device("cpu")


def step_config(recipe: str, preset: str | None, vocab: int, max_position: int) -> BertConfig:
    """The model a run of `recipe` (and `preset`) builds, for `vocab` tokens and `max_position` positions."""
    overrides = {"train": {"recipe": recipe}, **({"model": {"preset": preset}} if preset else {})}
    model = replace(resolve(overrides=overrides).model, max_position=max_position)
    return BertConfig.from_settings(model, vocab, 0)


def recipe_kernel(recipe: str) -> str:
    """The SDPA kernel a run of `recipe` trains with on this CPU (`train.attention_kernel` resolved): each step is
    timed as its recipe runs it."""
    return resolve(overrides={"train": {"recipe": recipe}}).train.attention_kernel_on(CPU)


def attention(kernel: str):
    """A context running SDPA on `kernel` ("math": its reference kernel; "auto": PyTorch's pick)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(SDPBackend.MATH) if kernel == "math" else contextlib.nullcontext()


def performed_flops(step, ids) -> tuple[float, dict[str, float]]:
    """FLOPs of one step as it runs, total and per operator."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step(ids)
    per_op: dict[str, float] = {}
    for op, n in counter.get_flop_counts().get("Global", {}).items():
        name = str(op).removeprefix("aten.").replace("_scaled_dot_product_flash_attention_for_cpu", "attention")
        per_op[name] = per_op.get(name, 0.0) + float(n)
    return float(counter.get_total_flops()), per_op


def product_shapes(step, ids) -> Counter:
    """(batch, m, k, n, dtype) -> count, for every matrix product of one step, read off the profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step(ids)
    found: Counter = Counter()
    for ev in prof.events():
        shapes, types = ev.input_shapes, getattr(ev, "input_types", None) or []
        dtype = next((t for t in types if t), "float")
        if ev.name == "aten::mm" and len(shapes) >= 2 and len(shapes[0]) == 2:
            found[(1, shapes[0][0], shapes[0][1], shapes[1][1], dtype)] += 1
        elif ev.name == "aten::addmm" and len(shapes) >= 3 and len(shapes[1]) == 2:
            found[(1, shapes[1][0], shapes[1][1], shapes[2][1], dtype)] += 1
        elif ev.name == "aten::bmm" and len(shapes) >= 2 and len(shapes[0]) == 3:
            found[(shapes[0][0], shapes[0][1], shapes[0][2], shapes[1][2], dtype)] += 1
    return found


def shapes_ceiling(shapes: Counter, dtype: torch.dtype, repeats: int) -> tuple[float, float]:
    """(TFLOP/s, ms) of the step's matrix products timed alone in `dtype`: their FLOPs over their summed times."""
    flops = ms = 0.0
    for (b, m, k, n, _), count in shapes.items():
        x, w = torch.randn(b, m, k, dtype=dtype), torch.randn(b, k, n, dtype=dtype)
        product = (lambda x=x, w=w: torch.bmm(x, w)) if b > 1 else (lambda x=x[0], w=w[0]: x @ w)
        t = median_ms(product, CPU, repeats)
        flops += count * 2.0 * b * m * k * n
        ms += count * t
    return flops / (ms * 1e-3) / 1e12, ms


def square_ceiling(n: int, dtype: torch.dtype, repeats: int) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    return 2.0 * n**3 / (median_ms(lambda: a @ b, CPU, repeats) * 1e-3) / 1e12


def copy_bandwidth(megabytes: int, repeats: int) -> float:
    """GB/s of a copy, bytes read plus written."""
    src = torch.empty(megabytes * 2**20 // 4, dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), CPU, repeats)
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e9


class HFStep:
    """One Hugging Face BertForMaskedLM training step (forward, backward, AdamW) on the batch a mapnet step gets."""

    def __init__(self, cfg: BertConfig, mask_prob: float):
        from transformers import BertConfig as HFConfig
        from transformers import BertForMaskedLM

        torch.manual_seed(0)
        hf = HFConfig(vocab_size=cfg.vocab_size, hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                      num_attention_heads=cfg.heads, intermediate_size=cfg.intermediate,
                      max_position_embeddings=cfg.max_position, hidden_dropout_prob=0.0,
                      attention_probs_dropout_prob=0.0)  # fmt: skip
        self.model = BertForMaskedLM(hf)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.mask_prob = mask_prob
        self.generator = torch.Generator().manual_seed(0)

    def __call__(self, ids) -> None:
        inputs = torch.as_tensor(ids)
        chosen = torch.rand(inputs.shape, generator=self.generator) < self.mask_prob
        labels = torch.where(chosen, inputs, torch.full_like(inputs, -100))
        loss = self.model(input_ids=torch.where(chosen, torch.full_like(inputs, 4), inputs), labels=labels).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def top_operators(step, ids_list, rows: int) -> str:
    """The profiler's table of the operators that cost a step most (self CPU time, over 5 steps)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(5):
            step(ids_list[i % len(ids_list)])
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=50)


def math_attention(make_step, ids_list, a) -> dict:
    """ms a step with SDPA's default kernel and with its math kernel (two steps built alike), alternated round by
    round so that the machine's drift falls on both; their ratios per round."""
    steps = {"default": make_step(), "math": make_step()}
    for name, step in steps.items():
        with attention("math" if name == "math" else "auto"):
            for ids in ids_list[:2]:
                step(ids)
    ms: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(a.rounds + 1):
        for name, step in steps.items():
            with attention("math" if name == "math" else "auto"):
                ms[name] += time_steps(step, ids_list, CPU, 1, a.steps)
    return {**ms, "ratios": [m / d for m, d in zip(ms["math"], ms["default"])]}


def measure(name: str, step, ids_list, a, native: bool) -> dict:
    """Every figure of one step: FLOPs performed, its time and rate, the ceilings at its shapes and their fractions."""
    for ids in ids_list[:2]:
        step(ids)  # first-call allocations
    flops, per_op = performed_flops(step, ids_list[0])
    shapes = product_shapes(step, ids_list[0])
    times = time_steps(step, ids_list, CPU, a.rounds, a.steps)
    ms = statistics.median(times)
    rate = flops / (ms * 1e-3) / 1e12
    out = {"step_ms": ms, "rounds_ms": times, "flops": flops, "flops_per_op": per_op, "tflops": rate,
           "products": sum(shapes.values()), "tokens_per_s": ids_list[0].size / (ms * 1e-3)}  # fmt: skip
    for label, dtype in (("fp32", torch.float32), *((("bf16", torch.bfloat16),) if native else ())):
        ceiling, products_ms = shapes_ceiling(shapes, dtype, a.repeats)
        out[f"shapes_ceiling_{label}"] = {"tflops": ceiling, "products_ms": products_ms, "fraction": rate / ceiling}
    if a.ops:
        print(f"{name}: the costliest operators over 5 steps\n{top_operators(step, ids_list, a.ops)}", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny shapes, few repeats: seconds (the test)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: the training's, all cores)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats per product (default 10; --smoke 2)")
    ap.add_argument("--steps", type=int, default=None, help="steps per timed round (default 5; --smoke 1)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--ops", type=int, default=0, help="also print each step's N costliest operators (self CPU time)")
    ap.add_argument(
        "--math-attention",
        action="store_true",
        help="also time each mapnet step with SDPA's math kernel against the default one, alternated round by round",
    )
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    a.repeats = a.repeats or (2 if a.smoke else 10)
    a.steps = a.steps or (1 if a.smoke else 5)
    native = bool(cpu_native_bf16())
    threads = torch.get_num_threads()
    print(f"load average before {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores, {threads} torch threads; "
          f"torch {torch.__version__}; bf16 instructions: {'yes' if native else 'no'}")  # fmt: skip
    square = 256 if a.smoke else 2048
    result = {"threads": torch.get_num_threads(), "native_bf16": native, "load_before": os.getloadavg()}
    result["square"] = {"n": square, "fp32_tflops": square_ceiling(square, torch.float32, a.repeats)}
    if native:
        result["square"]["bf16_tflops"] = square_ceiling(square, torch.bfloat16, a.repeats)
    result["copy_gb_s"] = copy_bandwidth(16 if a.smoke else 256, a.repeats)
    sq = result["square"]
    print(
        f"ceilings: {square}^3 product {sq['fp32_tflops'] * 1e3:.0f} GFLOP/s fp32"
        + (f", {sq['bf16_tflops'] * 1e3:.0f} GFLOP/s bf16" if native else "")
        + f"; copy {result['copy_gb_s']:.1f} GB/s (read + written)"
    )

    plans = {  # name: (config, batch, seq_len, mask_prob, precision, recipe)
        "hour": (step_config("hour", None, 512 if a.smoke else 16384, 64), 8 if a.smoke else 64, 64, 0.3,
                 "bf16-native", "hour"),
        "mini fast": (step_config("fast", "mini", 512 if a.smoke else 8192, 128), 4 if a.smoke else 32, 128, 0.15,
                      "fp32", "fast"),
    }  # fmt: skip
    result["steps"] = {}
    kernels = {}
    for name, (cfg, batch, seq_len, mask_prob, precision, recipe) in plans.items():
        if a.smoke:
            cfg = replace(cfg, layers=1, hidden=64, heads=2, intermediate=128 if cfg.intermediate else 0)
        ids = [corpus(batch, seq_len, cfg.vocab_size, seed=i) for i in range(4)]
        step = MapnetStep(cfg, CPU, impl="fused", precision=precision, mask_prob=mask_prob)
        kernels[name] = recipe_kernel(recipe)
        with attention(kernels[name]):
            r = measure(name, step, ids, a, native)
        r["attention_kernel"] = kernels[name]
        if a.math_attention:
            r["math_attention"] = math_attention(
                lambda cfg=cfg, p=precision, m=mask_prob: MapnetStep(cfg, CPU, impl="fused", precision=p, mask_prob=m),
                ids,
                a,
            )
            ratios = r["math_attention"]["ratios"]
            print(f"{name}: SDPA's math kernel against the default, per round: "
                  f"{', '.join(f'{x:.3f}' for x in ratios)}x the time", flush=True)  # fmt: skip
        result["steps"][name] = r
        if name == "mini fast":
            result["steps"]["HF BertForMaskedLM, mini"] = measure("HF", HFStep(cfg, mask_prob), ids, a, native)

    for name, r in result["steps"].items():
        fractions = [f"{k.split('_')[-1]} at its shapes {v['tflops'] * 1e3:.0f} GFLOP/s: {v['fraction']:.0%}"
                     for k, v in r.items() if k.startswith("shapes_ceiling")]  # fmt: skip
        ops = sorted(r["flops_per_op"].items(), key=lambda x: -x[1])
        of_square = f"{r['tflops'] / sq['fp32_tflops']:.0%} of the fp32 square"
        if native:
            of_square += f", {r['tflops'] / sq['bf16_tflops']:.0%} of the bf16 one"
        total = r["flops"]
        shares = ", ".join(f"{op} {n / total:.0%}" for op, n in ops)
        print(f"{name}: {r['step_ms']:.1f} ms a step ({r['tokens_per_s']:,.0f} tok/s), {total / 1e9:.2f} GFLOP as "
              f"performed ({shares})")  # fmt: skip
        print(f"    {r['tflops'] * 1e3:.0f} GFLOP/s = {of_square}; {'; '.join(fractions)}")
    print("SDPA's kernel in each mapnet step, as its recipe trains on this CPU: "
          + ", ".join(f"{name} {kernel}" for name, kernel in kernels.items()))  # fmt: skip
    mapnet, hf = result["steps"]["mini fast"], result["steps"]["HF BertForMaskedLM, mini"]
    print(f"mini fast against HF at the same batch: {hf['step_ms'] / mapnet['step_ms']:.2f}x its tokens per second")
    result["load_after"] = os.getloadavg()
    print(f"load average after {result['load_after'][0]:.2f}")
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
