"""What a step of each arm costs, for a modelled budget clock (`train.step_seconds`, train/budget.py).

    uv run python benchmarks/step_costs.py --out costs.json \\
        --common preset=mini recipe=fast train.batch_size=32 shard.max_seq_len=128 model.max_position=128 \\
        --arm baseline runs/real-text-x5/shards \\
        --arm bf16 runs/real-text-x5/shards train.precision=bf16 \\
        --arm seq-64 runs/real-text-x5/shards-64 train.batch_size=64 shard.max_seq_len=64

Each arm is a real budget run of the training loop (`train.pretrain`), timed by the clock the loop reads: a
recording clock gives every step's duration exactly as a wall-clock budget would count it (the step's batches,
forward, backward, the update and the read-back a budget run makes every step; evaluation and checkpoints
fall outside). A run takes `--steps` steps of the sequence-length warm-up (`train.short_seq_len`, 16-token
pieces as the fast recipe) and then `--steps` on whole sequences, so both costs a modelled clock needs come
from one run; the first `--skip` of each kind are left out (first-call allocations), and the last two (they log). An arm's cost is the mean
of its kept steps: a budget counts the sum, so the mean is what it buys (the periodic logging steps included,
at the run's `logging.log_every`).

Every arm runs between two runs of the first arm, the reference (R A R B R C R, `--rounds` times), and its
cost is divided by the mean of those two: the **ratio to the reference** is what this measures, the median over
rounds with its spread (min-max) printed beside it. Adjacent references, not one per round, because this
machine's speed drifts within minutes (a 2-core VM on a shared host: in one round-robin pass, arms whose step is
the reference's own computation read 13-28% slower, minutes later). Arms whose step is the reference's by
construction (another learning rate) measure the method's own noise: their ratio should be 1. `--reference FULL SHORT` pins the reference's costs (seconds) — the ones a kept
series was trained with — and every arm's modelled cost is that times its ratio; without it the reference's
own mean is used. Run it on an otherwise idle machine: the load average before and after is printed and kept.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mapnet_cli.atomic import write_json
from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain

SHORT_LEN = 16  # the fast recipe's pieces; an arm may set train.short_seq_len itself


class RecordingClock:
    """time.perf_counter, keeping every reading: the loop reads it at each step's start and end."""

    def __init__(self):
        self.readings: list[float] = []

    def __call__(self) -> float:
        now = time.perf_counter()
        self.readings.append(now)
        return now

    def step_times(self) -> list[float]:
        return [b - a for a, b in zip(self.readings[::2], self.readings[1::2])]


def arm_settings(common: list[str], assignments: list[str], steps: int):
    """The arm's settings as `pretrain` would resolve them, made a budget run of exactly `steps` short and
    `steps` whole steps: every step counts 1 modelled second, the warm-up is the first half."""
    named = {"model": {}, "train": {}}
    rest = []
    for text in [*common, *assignments]:
        key, _, value = text.partition("=")
        if key == "preset":
            named["model"]["preset"] = value
        elif key == "recipe":
            named["train"]["recipe"] = value
        else:
            rest.append(text)
    timing = [f"train.time_budget={2 * steps}s", "optim.warmup_steps=0", "optim.warmup_fraction=0.1",
              "train.short_seq_steps=0", "train.short_seq_fraction=0.5", "train.step_seconds=1",
              "train.short_step_seconds=1", "train.eval_every=0", "train.eval_sequences=8", "train.checkpoint_every=0",
              "logging.progress=false"]
    probe = resolve(None, named, [*rest, f"train.time_budget={2 * steps}s"])  # as a budget run: fractions allowed
    if not probe.train.short_seq_len:  # a recipe without pieces (paper): time the fast one's
        timing.append(f"train.short_seq_len={SHORT_LEN}")
    return resolve(None, named, [*rest, *timing])


def time_arm(common: list[str], shards: str, assignments: list[str], steps: int, skip: int) -> dict:
    settings = arm_settings(common, assignments, steps)
    clock = RecordingClock()
    with tempfile.TemporaryDirectory(prefix="step-costs-") as tmp:
        pretrain(settings, shards, Path(tmp) / "run", clock=clock)
    times = clock.step_times()
    if len(times) != 2 * steps:
        raise MapnetError(f"expected {2 * steps} timed steps, the run took {len(times)}")
    # The last two whole steps log (a budget run logs the step that will likely end it): left out as the first are.
    short, full = times[skip:steps], times[steps + skip:-2]
    return {"short": statistics.fmean(short), "full": statistics.fmean(full)}


def summarise(rounds: list[dict], names: list[str], reference: tuple[float, float] | None) -> dict:
    """Per arm: each round's costs, the ratios to the mean of the reference runs on either side of it, their
    median, the modelled costs. A round is {"reference": [R0, R1, ..., Rn], "arms": {name: cost}}, arm i of
    `names[1:]` run between R(i) and R(i + 1); each cost is {"full": s, "short": s}."""
    ref_name, others = names[0], names[1:]
    refs = [m for r in rounds for m in r["reference"]]
    ref_full, ref_short = (statistics.median(m[kind] for m in refs) for kind in ("full", "short"))
    pinned = reference or (ref_full, ref_short)
    out = {ref_name: {"rounds": [r["reference"] for r in rounds], "ratio": {"full": 1.0, "short": 1.0},
                      "ratio_range": {"full": [1.0, 1.0], "short": [1.0, 1.0]}, "step_seconds": round(pinned[0], 4),
                      "short_step_seconds": round(pinned[1], 4)}}
    for i, name in enumerate(others):
        ratios = {kind: [r["arms"][name][kind] / statistics.fmean((r["reference"][i][kind], r["reference"][i + 1][kind]))
                         for r in rounds] for kind in ("full", "short")}
        median = {kind: statistics.median(v) for kind, v in ratios.items()}
        out[name] = {"rounds": [r["arms"][name] for r in rounds], "ratio": median,
                     "ratio_range": {k: [min(v), max(v)] for k, v in ratios.items()},
                     "step_seconds": round(pinned[0] * median["full"], 4),
                     "short_step_seconds": round(pinned[1] * median["short"], 4)}
    return {"reference": ref_name, "reference_seconds": {"full": pinned[0], "short": pinned[1]},
            "reference_pinned": reference is not None, "arms": out}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arm", nargs="+", action="append", required=True, metavar="NAME SHARDS [KEY=VALUE ...]",
                    help="an arm: its name, its shards, its settings over --common (the first arm is the reference)")
    ap.add_argument("--common", nargs="*", default=[], metavar="KEY=VALUE",
                    help="settings under every arm (preset=NAME and recipe=NAME as --preset and --recipe)")
    ap.add_argument("--steps", type=int, default=15, help="timed steps of each kind per run (short runs: the reference's on either side are close in time)")
    ap.add_argument("--skip", type=int, default=2, help="first steps of each kind left out")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reference", nargs=2, type=float, metavar=("FULL", "SHORT"),
                    help="the reference arm's pinned costs in seconds (default: as measured here)")
    ap.add_argument("--out", type=Path, required=True, help="the JSON written (atomically)")
    a = ap.parse_args(argv)
    if any(len(arm) < 2 for arm in a.arm):
        ap.error("--arm takes a name and a shard folder, then its settings")
    if a.steps <= a.skip + 2 or a.rounds < 1:
        ap.error("--steps must exceed --skip + 2 (the last two whole steps are left out), and --rounds be at least 1")
    names = [arm[0] for arm in a.arm]
    if len(set(names)) != len(names):
        ap.error(f"arm names repeat: {' '.join(names)}")
    load_before = os.getloadavg()
    print(f"{len(names) - 1} arms between {len(names)} reference runs x {a.rounds} rounds, {a.steps} short + {a.steps} whole steps each; "
          f"{os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"load average {load_before[0]:.2f} before", flush=True)
    rounds = []
    try:
        (ref_name, ref_shards, *ref_assignments), *others = a.arm
        for r in range(a.rounds):
            measured = {"reference": [], "arms": {}}

            def timed(name, shards, assignments):
                cost = time_arm(a.common, shards, assignments, a.steps, a.skip)
                print(f"  round {r + 1} {name:<16} full {cost['full'] * 1e3:7.1f} ms  short {cost['short'] * 1e3:7.1f} ms",
                      flush=True)
                return cost

            measured["reference"].append(timed(ref_name, ref_shards, ref_assignments))
            for name, shards, *assignments in others:
                measured["arms"][name] = timed(name, shards, assignments)
                measured["reference"].append(timed(ref_name, ref_shards, ref_assignments))
            rounds.append(measured)
    except MapnetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = summarise(rounds, names, tuple(a.reference) if a.reference else None)
    result.update({"steps": a.steps, "skip": a.skip, "rounds_run": a.rounds, "common": a.common,
                   "arms_given": [{"name": n, "shards": s, "settings": rest} for n, s, *rest in a.arm],
                   "cores": os.cpu_count(), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                   "load_before": [round(x, 2) for x in load_before],
                   "load_after": [round(x, 2) for x in os.getloadavg()],
                   "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    write_json(a.out, result)
    print(f"{'arm':<16} {'ratio full':>10} {'(range)':>15} {'ratio short':>11} {'(range)':>15} {'full s':>7} {'short s':>7}")
    for name, arm in result["arms"].items():
        rf, rs = arm["ratio_range"]["full"], arm["ratio_range"]["short"]
        print(f"{name:<16} {arm['ratio']['full']:10.3f} {f'{rf[0]:.3f}-{rf[1]:.3f}':>15} {arm['ratio']['short']:11.3f} "
              f"{f'{rs[0]:.3f}-{rs[1]:.3f}':>15} {arm['step_seconds']:7.4f} {arm['short_step_seconds']:7.4f}")
    print(f"load average {os.getloadavg()[0]:.2f} after; {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
