"""Each candidate change of a `base` step on and off, with its predicted gain, and Hugging Face beside it.

    python benchmarks/bench_step_variants.py --device cuda --json OUT/variants.json      # base, 128 x 128, bf16
    python benchmarks/bench_step_variants.py --device cuda --arms eager blocks hf         # a few arms
    uv run python benchmarks/bench_step_variants.py --smoke                              # CPU: tiny, every arm, 2 steps

Every mapnet arm is the loop's own `train_step` with one setting changed from its baseline (`step_bench.MapnetStep`:
masks drawn on the host inside the step, nothing read back), so an arm that pays is a setting a run can use:

| arm | setting | baseline |
|---|---|---|
| eager | train.compile = false | - |
| foreach | optim.impl = foreach | eager |
| blocks | train.compile = true (per block, the CUDA default) | eager |
| model | train.compile_scope = model | blocks |
| model-autotune | + train.compile_mode = max-autotune-no-cudagraphs | model |
| model-graphs | + train.compile_mode = reduce-overhead (CUDA graphs) | model |
| blocks-graphs | train.compile_mode = reduce-overhead, per block | blocks |
| vocab-30522 / vocab-30528 | the vocabulary, 30,522 (BERT's, not a multiple of 64) against 30,528 (padded to 64) |
each other |
| modern | model.block = modern (ModernBERT's block), compiled per block | blocks |
| micro-256 | train.micro_batch_size 256 instead of 128 (tokens/s) | blocks |
| hf / hf-compiled | transformers' BertForMaskedLM + DataCollatorForLanguageModeling, eager / torch.compile'd | - |

Predictions are written in `ARMS` before any GPU ran this (issue 46 asks for prediction against result).
Arms are built, warmed up (compiled) and timed one after another, each printed as soon as it is timed (a
stage killed by its time limit keeps what it printed); then, while `--budget` seconds last, every arm is
timed again in interleaved rounds and the table is printed from those. An arm that fails (a compile
mode this torch or device cannot do) prints its error's first line and the rest go on.
MFU counts each arm's own model FLOPs (`model.bert.flops_per_token`: mapnet's last block and head at the
masked positions; Hugging Face's everywhere, as it computes them) against the datasheet peak and against
the measured 8192^3 bf16 matrix product, both named.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from step_bench import MapnetStep, corpus, device_peak, draw_batch, median_ms, model_config, sync, time_steps  # noqa: E402

from mapnet_cli.model.bert import flops_per_token  # noqa: E402


@dataclass(frozen=True)
class Arm:
    setting: str
    baseline: str | None
    prediction: str
    options: dict  # MapnetStep's keyword arguments, or {"hf": True, "compile": bool}
    vocab: int | None = None  # None: --vocab
    micro: int | None = None  # None: --batch
    block: str = "bert"  # model.block


ARMS = {
    "eager": Arm(
        "train.compile=false",
        None,
        "320-345k tok/s (RESULTS 4a: 300k before the step stopped syncing with the host; 4 syncs a step removed)",
        {},
    ),
    "foreach": Arm(
        "optim.impl=foreach",
        "eager",
        "-1% to -3% (fused AdamW: one pass over 110M fp32 parameters "
        "and their state, ~1-2 ms of a ~50 ms step; foreach makes more passes)",
        {"impl": "foreach"},
    ),
    "blocks": Arm(
        "train.compile=true (compile_scope=blocks)", "eager", "+8% to +12% (RESULTS 4a: +9.6%)", {"compile": True}
    ),
    "model": Arm(
        "train.compile_scope=model",
        "blocks",
        "+5% to +10% (the embeddings, the last block's gathers, the head and the loss fused too; fewer launches)",
        {"compile": True, "scope": "model"},
    ),
    "model-autotune": Arm(
        "train.compile_mode=max-autotune-no-cudagraphs",
        "model",
        "0% to +5% (cuBLAS is near its best at these large shapes)",
        {"compile": True, "scope": "model", "mode": "max-autotune-no-cudagraphs"},
    ),
    "model-graphs": Arm(
        "train.compile_mode=reduce-overhead",
        "model",
        "0% to +5% (launch overhead is mostly hidden behind a ~45 ms device step now that nothing syncs)",
        {"compile": True, "scope": "model", "mode": "reduce-overhead"},
    ),
    "blocks-graphs": Arm(
        "train.compile_mode=reduce-overhead (per block)",
        "blocks",
        "0% to +3%",
        {"compile": True, "mode": "reduce-overhead"},
    ),
    "vocab-30522": Arm(
        "vocabulary 30,522",
        "vocab-30528",
        "-1% to -3% against 30,528 (the head's products, ~5% of the FLOPs, on a dimension not a multiple of 64)",
        {"compile": True},
        vocab=30522,
    ),
    "vocab-30528": Arm(
        "vocabulary 30,528 (30,522 padded to 64)",
        None,
        "(the reference of vocab-30522)",
        {"compile": True},
        vocab=30528,
    ),
    "modern": Arm(
        "model.block=modern (ModernBERT's block, pre-LN; compiled per block)",
        "blocks",
        "-5% to +5% (the same matrix FLOPs: GeGLU at 8H/3 against GELU at 4H; no biases; rotary "
        "positions add elementwise passes)",
        {"compile": True},
        block="modern",
    ),
    "micro-256": Arm(
        "train.micro_batch_size=256",
        "blocks",
        "0% to +5% tokens/s (larger products, the same launches for twice the tokens)",
        {"compile": True},
        micro=256,
    ),
    "hf": Arm(
        "transformers BertForMaskedLM, eager",
        None,
        "mapnet blocks / hf: 1.7x-1.9x (RESULTS 4a: 1.58x eager / eager; the issue's goal 2.5x)",
        {"hf": True, "compile": False},
    ),
    "hf-compiled": Arm(
        "transformers BertForMaskedLM, torch.compile",
        "hf",
        "+20% to +30% (RESULTS 4a: +28%)",
        {"hf": True, "compile": True},
    ),
}
ORDER = list(ARMS)  # the order arms are built in: the most informative first, the slowest compiles late


class Deadline(Exception):
    """SIGTERM (the stage's `timeout`): stop building and timing, print the table of what was measured."""


def on_sigterm(signum, frame):
    raise Deadline()


def build(name: str, arm: Arm, size: str, vocab: int, device: torch.device):
    """(step callable taking numpy ids, its config)."""
    cfg = model_config(size, arm.vocab or vocab, block=arm.block)
    if arm.options.get("hf"):
        from bench_pretrain import HFArm

        autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if device.type == "cuda"
            else torch.autocast("cpu", enabled=False)
        )
        hf = HFArm(cfg, device, autocast)
        if arm.options["compile"]:
            hf.model = torch.compile(hf.model)
        return hf.step, cfg
    return MapnetStep(cfg, device, **arm.options), cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument(
        "--smoke", action="store_true", help="tiny, fp32, 2 steps per arm: every arm's code path on the CPU"
    )
    ap.add_argument("--arms", nargs="+", default=ORDER, choices=ORDER)
    ap.add_argument("--size", default=None, help="model preset (default base; --smoke tiny)")
    ap.add_argument("--batch", type=int, default=None, help="sequences per step (default 128; --smoke 8)")
    ap.add_argument("--seq-len", type=int, default=None, help="default 128; --smoke 32")
    ap.add_argument("--vocab", type=int, default=None, help="default 32768, the paper's; --smoke 512")
    ap.add_argument("--steps", type=int, default=None, help="steps per timed window (default 10; --smoke 2)")
    ap.add_argument("--warmup", type=int, default=3, help="steps before timing (compilation happens here)")
    ap.add_argument(
        "--budget",
        type=float,
        default=0.0,
        help="seconds from the start after which no interleaved round starts (0: one round only, the first pass)",
    )
    ap.add_argument(
        "--ceiling",
        type=Path,
        default=None,
        help="bench_ceiling.py's --json of the same shape: each mapnet arm is also shown as a fraction of that floor",
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    start = time.perf_counter()
    device = torch.device(args.device)
    # Many arms compile the same Block.forward (other modes, other shapes): past dynamo's recompile limit (8) a
    # later arm would silently run eager. One process has room for all of them here.
    for key in ("recompile_limit", "cache_size_limit"):  # the name changed across torch versions
        if hasattr(torch._dynamo.config, key):
            setattr(torch._dynamo.config, key, 64)
    smoke = args.smoke
    size = args.size or ("tiny" if smoke else "base")
    B, T = args.batch or (8 if smoke else 128), args.seq_len or (32 if smoke else 128)  # bench_ceiling's shapes
    vocab, steps = args.vocab or (512 if smoke else 32768), args.steps or (2 if smoke else 10)
    if smoke:  # vocabularies and micro-batch scaled down with everything else
        ARMS["vocab-30522"] = Arm(ARMS["vocab-30522"].setting, "vocab-30528", "(smoke)", {"compile": True}, vocab=500)
        ARMS["vocab-30528"] = Arm(ARMS["vocab-30528"].setting, None, "(smoke)", {"compile": True}, vocab=512)
        ARMS["micro-256"] = Arm(ARMS["micro-256"].setting, "blocks", "(smoke)", {"compile": True}, micro=2 * B)
    name, datasheet, which = device_peak(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    n = 1024 if smoke else 8192
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    measured = 2.0 * n**3 / (median_ms(lambda a=a, b=b: a @ b, device, 3 if smoke else 20) * 1e-3) / 1e12
    del a, b
    against = f"the datasheet {datasheet:g} TFLOP/s ({which}) and " if datasheet else "(no datasheet peak: CPU) "
    print(
        f"device {name}; torch {torch.__version__}; {size}, {B} x {T} tokens, vocab {vocab}; MFU against {against}"
        f"the measured {n}^3 product {measured:.3g} TFLOP/s",
        flush=True,
    )
    floor = None
    if args.ceiling is not None and args.ceiling.is_file():
        c = json.loads(args.ceiling.read_text())
        if (c["size"], c["batch"], c["seq_len"], c["vocab"]) == (size, B, T, vocab):
            floor = c["floor_ms"]["total"]
            print(f"the floor of this step (bench_ceiling.py, {args.ceiling.name}): {floor:.2f} ms")
        else:
            print(f"{args.ceiling} is of another shape: no fractions of the floor")
    results: dict = {
        "device": name,
        "floor_ms": floor,
        "torch": torch.__version__,
        "size": size,
        "batch": B,
        "seq_len": T,
        "vocab": vocab,
        "datasheet_tflops": datasheet,
        "measured_tflops": measured,
        "arms": {},
    }
    built: dict = {}

    def record(arm_name: str, ms_rounds: list[float], cfg, micro: int, masked: int) -> dict:
        ms = statistics.median(ms_rounds)
        tokens = micro * T
        own = flops_per_token(cfg, T, 1.0 if ARMS[arm_name].options.get("hf") else masked / tokens)
        tflops = own * tokens / (ms * 1e-3) / 1e12
        arm = ARMS[arm_name]  # the floor is of the BERT block's step at these shapes
        of_floor = (
            floor / ms
            if floor
            and micro == B
            and not arm.options.get("hf")
            and arm.block == "bert"
            and (arm.vocab or vocab) == vocab
            else None
        )
        return {
            "ms": ms,
            "rounds_ms": ms_rounds,
            "tokens_per_s": tokens / ms * 1e3,
            "tflops": tflops,
            "mfu_datasheet": tflops / datasheet if datasheet else None,
            "mfu_measured": tflops / measured,
            "flops_per_token": own,
            "fraction_of_floor": of_floor,
        }

    def show(arm_name: str, r: dict, tag: str) -> None:
        mfu = (
            (f"MFU {r['mfu_datasheet']:.1%} of the datasheet, " if r["mfu_datasheet"] is not None else "")
            + f"{r['mfu_measured']:.1%} of the measured ceiling"
            + (f"; {r['fraction_of_floor']:.1%} of the floor" if r["fraction_of_floor"] else "")
        )
        print(f"  [{tag}] {arm_name:15} {r['ms']:8.2f} ms/step  {r['tokens_per_s']:>11,.0f} tok/s  {mfu}", flush=True)

    # ------------------------------------------------------------ first pass: build, warm up, time each arm
    signal.signal(signal.SIGTERM, on_sigterm)
    stopped = None  # why arms were left out: the budget, or the stage's time limit
    for arm_name in args.arms:
        arm = ARMS[arm_name]
        if stopped is None and args.budget and time.perf_counter() - start > args.budget:
            stopped = f"not reached: --budget {args.budget:g} s spent"
        if stopped:
            results["arms"][arm_name] = {"error": stopped}
            continue
        micro = arm.micro or B
        inputs = [corpus(micro, T, arm.vocab or vocab, seed=s) for s in range(3)]
        masked = draw_batch(inputs[0], 0, arm.vocab or vocab, torch.device("cpu")).positions.numel()
        t0 = time.perf_counter()
        try:
            step, cfg = build(arm_name, arm, size, vocab, device)
            for i in range(args.warmup):
                step(inputs[i % len(inputs)])
            sync(device)
            warm = time.perf_counter() - t0
            ms_rounds = time_steps(step, inputs, device, 1, steps)
        except Deadline:
            stopped = "not reached: the stage's time limit (SIGTERM)"
            results["arms"][arm_name] = {"error": stopped + " while warming up or timing"}
            continue
        except Exception as exc:  # one arm's failure (a compile mode, memory) must not lose the others
            line = next((x for x in str(exc).splitlines() if x.strip()), type(exc).__name__)
            print(f"  [failed] {arm_name:15} {type(exc).__name__}: {line[:200]}", flush=True)
            results["arms"][arm_name] = {"error": f"{type(exc).__name__}: {line}"}
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        built[arm_name] = (step, cfg, inputs, micro, masked)
        results["arms"][arm_name] = {
            **record(arm_name, ms_rounds, cfg, micro, masked),
            "warmup_s": warm,
            "setting": arm.setting,
            "baseline": arm.baseline,
            "prediction": arm.prediction,
        }
        show(arm_name, results["arms"][arm_name], f"alone, warm-up {warm:.0f} s")
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))

    # ------------------------------------------------------------ interleaved rounds while the budget lasts
    rounds: dict = {k: [] for k in built}
    r = 0
    try:
        while built and not stopped and (r == 0 or time.perf_counter() - start < args.budget):
            for arm_name in list(built) if r % 2 == 0 else list(built)[::-1]:  # alternate who goes first
                step, cfg, inputs, micro, masked = built[arm_name]
                rounds[arm_name] += time_steps(step, inputs, device, 1, steps)
            r += 1
    except Deadline:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the table below takes no time; a second TERM ends it
    if r == 0:  # no interleaved round finished: the table shows the first pass
        rounds = {k: results["arms"][k]["rounds_ms"] for k in built}
    print(f"\n{r} interleaved round(s) of {steps} steps per arm; {time.perf_counter() - start:.0f} s since the start")
    print(
        f"{'arm':15} {'setting':48} {'ms/step':>8} {'tok/s':>10} {'MFU (datasheet)':>16} {'MFU (measured)':>15} "
        f"{'of floor':>9} {'vs baseline':>12}  predicted"
    )
    for arm_name in built:
        step, cfg, inputs, micro, masked = built[arm_name]
        results["arms"][arm_name] |= record(arm_name, rounds[arm_name], cfg, micro, masked)
    for arm_name in args.arms:
        res = results["arms"][arm_name]
        if "error" in res:
            print(f"{arm_name:15} {ARMS[arm_name].setting[:48]:48} {res['error'][:80]}")
            continue
        base = ARMS[arm_name].baseline
        vs = "-"
        if base and "tokens_per_s" in results["arms"].get(base, {}):
            vs = f"{res['tokens_per_s'] / results['arms'][base]['tokens_per_s'] - 1:+.1%}"
        mfu_d = f"{res['mfu_datasheet']:.1%}" if res["mfu_datasheet"] is not None else "-"
        of_floor = f"{res['fraction_of_floor']:.1%}" if res["fraction_of_floor"] else "-"
        print(
            f"{arm_name:15} {ARMS[arm_name].setting[:48]:48} {res['ms']:8.2f} {res['tokens_per_s']:>10,.0f} "
            f"{mfu_d:>16} {res['mfu_measured']:>15.1%} {of_floor:>9} {vs:>12}  {ARMS[arm_name].prediction[:70]}"
        )
    hf = results["arms"].get("hf", {}).get("tokens_per_s")
    if hf:
        for arm_name in ("eager", "blocks", "model", "hf-compiled"):
            if "tokens_per_s" in results["arms"].get(arm_name, {}):
                print(
                    f"{arm_name} / hf (eager): {results['arms'][arm_name]['tokens_per_s'] / hf:.2f}x tokens/s "
                    "(the issue's goal: 2.5x)"
                )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
