"""Where a training step's time goes: `torch.profiler` over N steps of the real training loop.

    uv run python benchmarks/profile_step.py --data runs/real-text-x5/shards --preset tiny --steps 20
    uv run python benchmarks/profile_step.py --data SHARDS --preset mini --steps 20 --masking mapnet-ht
    python benchmarks/profile_step.py --data SHARDS --preset base --steps 20 --device cuda --trace step.json

The steps are `train.Run`'s own (`Run.train`, the loop `mapnet pretrain` runs), not a copy: the
profiler advances from the loop's per-step report. The loop labels its parts with
`record_function` ranges, which cost nothing when no profiler listens: `mapnet.data` (reading the
shards), `mapnet.masks` (drawing the masks and weights, on the host), `mapnet.to_device`
(positions and the host-to-device copies), `mapnet.prefetch_wait` (with `train.prefetch`: waiting for
the background thread that makes the next step's batches; the first three parts then run in that
thread, which the profiler does not record, and show as 0), `mapnet.forward`, `mapnet.backward`, `mapnet.optimizer`
(gradient norm, clipping, AdamW, schedule) with `mapnet.read` inside it (bringing the loss to
the host on the steps the loop reads: logging, evaluation and checkpoint steps). Printed: each
part's share of the host's wall time per step and, on CUDA, the device time of the kernels each
part launched and how busy the device was; then the host syncs per step by kind
(`train/host_syncs.py`: `.item()`, `nonzero`, `.tolist()`, CUDA waits). `--trace` writes the Chrome
trace (open it in chrome://tracing or https://ui.perfetto.dev).

--masking takes `mapnet compare`'s strategy names (uniform, mapnet, mapnet-ht, stratified,
frequency-ht, whole-word, span, pmi, NAME@RATE). The first --warmup steps are profiled but not
counted (allocation, first-call dispatch, compilation). Run it alone on the machine: a neighbour's
load moves every share.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import schedule

from mapnet_cli import compare, distributed
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import apply, resolve
from mapnet_cli.train import host_syncs
from mapnet_cli.train.loop import Run

PARTS = (
    "mapnet.data",
    "mapnet.masks",
    "mapnet.to_device",
    "mapnet.prefetch_wait",
    "mapnet.forward",
    "mapnet.backward",
    "mapnet.optimizer",
    "mapnet.read",
)


def build_settings(args):
    from mapnet_cli.data.shards import ShardReader

    seq_len = ShardReader(
        args.data, "train", verify="size"
    ).max_seq_len  # the model sized to the shards, as the scripts do
    assignments = [
        f"model.max_position={seq_len}",
        f"shard.max_seq_len={seq_len}",
        *args.set,
        f"train.steps={args.warmup + args.steps}",
        "train.eval_every=0",
        "train.eval_sequences=8",
        "train.checkpoint_every=0",
        "train.keep_steps=[]",
        "logging.progress=false",
        f"train.device={args.device}",
    ]
    if args.batch:
        assignments.append(f"train.batch_size={args.batch}")
    if args.recipe:
        assignments.append(f"train.recipe={args.recipe}")
    base = resolve(args.config, {"model": {"preset": args.preset}}, assignments, check_ignored=False)
    masking = compare.strategy_masking(compare.parse_strategies(args.masking)[0], base.train.steps)
    return apply(base, {"masking": masking}, f"--masking {args.masking}")


def on_host(ev) -> bool:
    """A range as the host ran it: with CUDA profiling on, every range also appears once more as the
    device's annotation of its kernels, which holds no host events."""
    return ev.device_type == DeviceType.CPU and not ev.is_async


def profiler_steps(events) -> list:
    """The profiler's per-step ranges, in order (one per loop step)."""
    return sorted(
        (ev for ev in events if ev.name.startswith("ProfilerStep") and on_host(ev)), key=lambda ev: ev.time_range.start
    )


def shares(events, steps: list, cuda: bool) -> dict[str, dict[str, list[float]]]:
    """Per part: host milliseconds (and device milliseconds on CUDA) in each of the `steps` ranges."""
    index = {id(ev): i for i, ev in enumerate(steps)}
    sums = [[defaultdict(float), defaultdict(float)] for _ in steps]
    for ev in events:
        if ev.name not in PARTS or not on_host(ev):
            continue
        i = next((index[id(p)] for p in host_syncs.ancestors(ev) if id(p) in index), None)
        if i is not None:
            sums[i][0][ev.name] += ev.time_range.elapsed_us() / 1e3
            sums[i][1][ev.name] += (ev.device_time_total if cuda else 0.0) / 1e3
    out = {part: {"host": [host[part] for host, _ in sums], "device": [dev[part] for _, dev in sums]} for part in PARTS}
    out["step"] = {
        "host": [ev.time_range.elapsed_us() / 1e3 for ev in steps],
        "device": [(ev.device_time_total if cuda else 0.0) / 1e3 for ev in steps],
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, type=Path, help="shard folder (mapnet shard)")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--recipe", default=None, help="training recipe (default: the preset's)")
    ap.add_argument("--config", default=None, help="a settings TOML, as pretrain --config")
    ap.add_argument("--masking", default="uniform", help="a compare strategy name (uniform, mapnet, mapnet-ht, ...)")
    ap.add_argument("--steps", type=int, default=20, help="steps counted")
    ap.add_argument("--warmup", type=int, default=3, help="steps profiled first and not counted")
    ap.add_argument("--batch", type=int, default=0, help="train.batch_size (default: the settings')")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--trace", type=Path, default=None, help="write the Chrome trace of the counted steps here")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any setting, as pretrain --set")
    args = ap.parse_args()
    if args.steps < 1 or args.warmup < 1:
        # >= 1 warm-up step: the first profiled step also holds the run's step-0 evaluation
        sys.exit("error: --steps and --warmup must be >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        s = build_settings(args)
        info = distributed.DistInfo(device=torch.device(args.device))
        with tempfile.TemporaryDirectory() as tmp:
            run = Run(s, args.data, Path(tmp) / "run", info, False, [])
            cuda = info.device.type == "cuda"
            plan = schedule(wait=0, warmup=args.warmup, active=args.steps, repeat=1)
            with host_syncs.counting(cuda=cuda, schedule=plan) as prof:
                run.train(None, lambda kind, data: prof.step() if kind == "step" else None)
            events = prof.events()
            if args.trace:
                prof.export_chrome_trace(str(args.trace))
    except MapnetError as exc:
        sys.exit(f"error: {exc}")
    counted = profiler_steps(events)[-args.steps :]  # the active steps: the warm-up ones are not recorded
    if len(counted) != args.steps:
        sys.exit(f"error: the profiler recorded {len(counted)} steps, not {args.steps}")
    parts = shares(events, counted, cuda)
    t = s.train
    where = torch.cuda.get_device_name() if cuda else f"CPU, {torch.get_num_threads()} threads"
    print(
        f"{where}; load average {os.getloadavg()[0]:.2f} (1 min) after; preset {args.preset}, recipe {t.recipe}, "
        f"masking {args.masking}, batch {t.batch_size} x {run.data.max_seq_len}, logging every {s.logging.log_every} "
        f"steps; {len(counted)} steps counted after {args.warmup} warm-up"
    )
    if t.prefetch:
        print(
            "(train.prefetch: data, masks and to_device run in a background thread, one step ahead; prefetch_wait "
            "is what this thread still waits for them)"
        )
    if t.short_seq.len and t.short_seq.steps > args.warmup:
        print(
            f"(these steps are in the recipe's sequence-length warm-up: {t.short_seq.len}-token pieces until step "
            f"{t.short_seq.steps}; --set train.short_seq.len=0 --set train.short_seq.steps=0 profiles whole sequences)"
        )
    step_ms = statistics.median(parts["step"]["host"])
    print(f"\n{'part':20} {'host ms/step':>13} {'share':>7}" + (f" {'device ms/step':>15}" if cuda else ""))
    # The read runs inside the optimizer's range: shown on its own line, taken out step by step.
    parts["mapnet.optimizer"]["host"] = [
        o - r for o, r in zip(parts["mapnet.optimizer"]["host"], parts["mapnet.read"]["host"])
    ]
    named = 0.0
    for part in PARTS:
        host = statistics.median(parts[part]["host"])
        named += host
        label = part.removeprefix("mapnet.") + (" (w/o read)" if part == "mapnet.optimizer" else "")
        line = f"{label:20} {host:13.2f} {host / step_ms:7.1%}"
        if cuda:
            line += f" {statistics.median(parts[part]['device']):15.2f}"
        print(line)
    print(f"{'other':20} {step_ms - named:13.2f} {(step_ms - named) / step_ms:7.1%}")
    print(f"{'step (median)':20} {step_ms:13.2f} {1:7.1%}")
    if cuda:
        busy = statistics.median(d / h for d, h in zip(parts["step"]["device"], parts["step"]["host"]) if h)
        print(f"device busy: kernels take {busy:.0%} of the step's wall time (median step)")
    print(
        "\nhost syncs per step (item / nonzero / tolist / cuda waits), host-side mask drawing and the optimizer's "
        "own step counters excluded:"
    )
    for i, step in enumerate(counted):
        c = host_syncs.count(events, within=step)
        n = args.warmup + i + 1
        print(
            f"  step {n:4d}{' (read)' if n % s.logging.log_every == 0 or n == t.steps else '':8} "
            f"{c['item']} / {c['nonzero']} / {c['tolist']} / {c['cuda']}"
        )
    if args.trace:
        print(f"\ntrace: {args.trace}")


if __name__ == "__main__":
    main()
