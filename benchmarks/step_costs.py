"""What a step of each arm costs, for a modelled budget clock (`train.step_seconds`, train/budget.py).

    uv run python benchmarks/step_costs.py --out costs.json \\
        --common preset=mini recipe=fast train.batch_size=32 shard.max_seq_len=128 model.max_position=128 \\
        --arm baseline runs/real-text-x5/shards \\
        --arm bf16 runs/real-text-x5/shards train.precision=bf16 \\
        --arm seq-64 runs/real-text-x5/shards-64 train.batch_size=64 shard.max_seq_len=64
    uv run python benchmarks/step_costs.py --out costs.json --common preset=mini recipe=fast ... \
        --arm uniform SHARDS strategy=uniform --arm mapnet-ht-lite SHARDS strategy=mapnet-ht-lite   # compare's arms

Each arm is a real budget run of the training loop (`train.pretrain`), timed by the clock the loop reads: a
recording clock gives every step's duration exactly as a wall-clock budget would count it (the step's batches,
forward, backward, the update and the read-back a budget run makes every step; evaluation and checkpoints
fall outside). A run takes `--steps` steps of the sequence-length warm-up (`train.short_seq.len`, 16-token
pieces as the fast recipe) and then `--steps` on whole sequences, so both costs a modelled clock needs come
from one run; the first `--skip` of each kind are left out (first-call allocations), and the last two (they log).
An arm's cost is the mean of its kept steps: a budget counts the sum, so the mean is what it buys. Left out with
them: the periodic logging steps (one in `logging.log_every`, 50 in the lever search: rarer than the kept window),
and for a strategy that learns every k-th step (`mapnet-ht-lite`) the window is not a multiple of k, so its
share of learning steps is off by up to one in the window's length.

Every arm is timed *in lock-step with the first arm*, the reference: the two runs train at once in two threads
of one process and take their steps in turn (R A R A ...; `Turns`), so the reference's steps are timed within
a second of the arm's, under the same conditions, and the arm's cost divided by the reference's in the same pair
is the **ratio** this measures, the median over `--rounds` pairs with its spread (min-max) printed beside it.
Lock-step, because this machine's speed drifts within seconds to minutes (a 2-core VM on a shared host): in one
round-robin pass over every arm, arms whose step is the reference's own computation read 13-28% slower minutes
later (`experiments/hour-levers/step-costs/round-robin-pass-2026-11-27.log`), and even runs 20 s apart differed by
up to 30% (`adjacent-runs-2026-11-27.log`). Arms whose step is the reference's by construction (another
learning rate) measure the method's own noise: their ratio should be 1. `--reference FULL SHORT` pins the
reference's costs (seconds) — the ones a kept series was trained with — and every arm's modelled cost is that
times its ratio; without it the reference's own costs are measured **alone** (`--alone` runs of it by itself,
the median): in lock-step each run's step reads slower than alone (the two models take turns in the caches:
~730 against ~600 ms at `mini`), which cancels in a ratio but would not in a cost. Run it on an otherwise idle machine:
the load average before and after is printed and kept.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from mapnet_cli import artefacts
from mapnet_cli.atomic import write_json
from mapnet_cli.compare import strategy_masking
from mapnet_cli.cpu_features import cpu_description
from mapnet_cli.errors import MapnetError
from mapnet_cli.output_paths import check_output
from mapnet_cli.settings import flat, resolve
from mapnet_cli.train import pretrain

SHORT_LEN = 16  # the fast recipe's pieces; an arm may set train.short_seq.len itself


class Turns:
    """Runs in threads take their steps in turn. The loop reads its clock at a step's start and at its end
    (train/loop.py); each run's clock here waits for its turn at the start and hands the turn on at the end,
    so the timed steps of the runs alternate and never overlap, and every reading is kept (a run's untimed work
    between its steps, its start and its final evaluation may overlap the other's timed step: the first and last
    steps, where that happens, are left out of the means). A run that ends (or fails)
    leaves the rotation (`leave`), so the others go on."""

    def __init__(self, runs: int):
        self.cond = threading.Condition()
        self.turn, self.runs, self.left = 0, runs, set()
        self.readings: list[list[float]] = [[] for _ in range(runs)]

    def clock(self, me: int):
        def read() -> float:
            with self.cond:
                mine = self.readings[me]
                if len(mine) % 2 == 0:  # a step starts: wait for this run's turn
                    self.cond.wait_for(lambda: self.turn == me)
                    mine.append(time.perf_counter())
                    return mine[-1]
                mine.append(time.perf_counter())  # it ends: the next run's turn
                self._pass(me)
                return mine[-1]

        return read

    def leave(self, me: int) -> None:
        with self.cond:
            self.left.add(me)
            if self.turn == me:
                self._pass(me)

    def _pass(self, me: int) -> None:
        for k in range(1, self.runs + 1):
            nxt = (me + k) % self.runs
            if nxt not in self.left:
                self.turn = nxt
                break
        self.cond.notify_all()

    def step_times(self, me: int) -> list[float]:
        r = self.readings[me]
        return [b - a for a, b in zip(r[::2], r[1::2])]


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
        elif key == "strategy":  # a `compare` arm (uniform@0.3, mapnet-ht-lite): its masking settings, as compare gives
            # them, over the common ones
            masking = strategy_masking(value, 2 * steps, budget=True)
            rest += [f"masking.{k}={json.dumps(v)}" for k, v in flat(masking).items()]
        else:
            rest.append(text)
    # No learning-rate warm-up: the rate does not change what a step costs, and the 10% warm-up this used to give is
    # at most one modelled second when --steps is 5 or fewer, a warm-up the first step spends (refused).
    timing = [
        f"train.time_budget={2 * steps}s",
        "optim.warmup.steps=0",
        "optim.warmup.fraction=0",
        "train.short_seq.steps=0",
        "train.short_seq.fraction=0.5",
        "train.step_seconds=1",
        "train.short_step_seconds=1",
        "train.eval_every=0",
        "train.eval_sequences=8",
        "train.checkpoint_every=0",
        "logging.progress=false",
        # A full step's cost is what is measured; a ramp (train/batch_ramp.py) counts its share of it in the run.
        "train.batch_ramp.start=0",
        "train.batch_ramp.steps=0",
        "train.batch_ramp.fraction=0",
    ]
    probe = resolve(None, named, [*rest, f"train.time_budget={2 * steps}s"])  # as a budget run: fractions allowed
    if not probe.train.short_seq.len:  # a recipe without pieces (paper): time the fast one's
        timing.append(f"train.short_seq.len={SHORT_LEN}")
    return resolve(None, named, [*rest, *timing])


def time_alone(settings, shards: str, steps: int, skip: int) -> dict:
    """One run by itself: its mean short and whole step (a rotation of one)."""
    turns = Turns(1)
    with tempfile.TemporaryDirectory(prefix="step-costs-") as tmp:
        pretrain(settings, shards, Path(tmp) / "run", clock=turns.clock(0))
    return kept_means(turns.step_times(0), steps, skip)


def kept_means(times: list[float], steps: int, skip: int) -> dict:
    """The mean short and whole step of a run's step times, the first `skip` of each kind and the last two left out:
    the first overlap the other run's start (its model and data being built) and the last two log (a budget run
    logs the step that will likely end it) or overlap the other's final evaluation."""
    if len(times) != 2 * steps:
        raise MapnetError(f"expected {2 * steps} timed steps, a run took {len(times)}")
    short, full = times[skip:steps], times[steps + skip : -2]
    return {"short": statistics.fmean(short), "full": statistics.fmean(full)}


def time_pair(reference: tuple[str, object], arm: tuple[str, object], steps: int, skip: int) -> tuple[dict, dict]:
    """The reference's and the arm's mean short and whole step, trained at once in lock-step (`Turns`);
    each of `reference` and `arm` is (shards, resolved settings)."""
    turns = Turns(2)
    failures: list[BaseException] = []

    def train(me: int, shards: str, settings, tmp: str) -> None:
        try:
            pretrain(settings, shards, Path(tmp) / f"run-{me}", clock=turns.clock(me))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failures.append(exc)
        finally:
            turns.leave(me)

    with tempfile.TemporaryDirectory(prefix="step-costs-") as tmp:
        threads = [
            threading.Thread(target=train, args=(me, shards, settings, tmp), daemon=True)
            for me, (shards, settings) in enumerate((reference, arm))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if failures:
        raise failures[0]
    return kept_means(turns.step_times(0), steps, skip), kept_means(turns.step_times(1), steps, skip)


def figures(seconds: float) -> float:
    """4 significant figures: a cost is known to a few per cent, and a millisecond GPU step keeps its digits."""
    return float(f"{seconds:.4g}")


def summarise(
    pairs: list[dict[str, dict]], names: list[str], reference: tuple[float, float] | None, alone: list[dict] = ()
) -> dict:
    """Per arm: each pair's costs, the ratios arm / reference within each pair, their median, the modelled costs.
    `pairs` is one dict per round, {arm name: {"arm": cost, "reference": cost}}; a cost is {"full": s, "short": s}.
    The reference's costs: `reference` (pinned), else the median of its runs `alone`."""
    ref_name, others = names[0], names[1:]
    if reference is None and not alone:
        raise ValueError("the reference's costs: pin them or time it alone")
    pinned = reference or tuple(statistics.median(m[kind] for m in alone) for kind in ("full", "short"))
    out = {
        ref_name: {
            "rounds": [r[name]["reference"] for r in pairs for name in others],
            "alone": list(alone),
            "ratio": {"full": 1.0, "short": 1.0},
            "ratio_range": {"full": [1.0, 1.0], "short": [1.0, 1.0]},
            "step_seconds": figures(pinned[0]),
            "short_step_seconds": figures(pinned[1]),
        }
    }
    for name in others:
        ratios = {
            kind: [r[name]["arm"][kind] / r[name]["reference"][kind] for r in pairs] for kind in ("full", "short")
        }
        median = {kind: statistics.median(v) for kind, v in ratios.items()}
        out[name] = {
            "rounds": [r[name] for r in pairs],
            "ratio": median,
            "ratio_range": {k: [min(v), max(v)] for k, v in ratios.items()},
            "step_seconds": figures(pinned[0] * median["full"]),
            "short_step_seconds": figures(pinned[1] * median["short"]),
        }
    return {
        "schema": "mapnet.step-costs/1",
        "reference": ref_name,
        "reference_seconds": {"full": pinned[0], "short": pinned[1]},
        "reference_pinned": reference is not None,
        "arms": out,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--arm",
        nargs="+",
        action="append",
        required=True,
        metavar="NAME SHARDS [KEY=VALUE ...]",
        help="an arm: its name, its shards, its settings over --common (the first arm is the reference)",
    )
    ap.add_argument(
        "--common",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="settings under every arm (preset=NAME and recipe=NAME as --preset and --recipe; strategy=NAME "
        "a `compare` strategy's masking settings, for `compare --step-costs`)",
    )
    ap.add_argument("--steps", type=int, default=15, help="steps of each kind per run")
    ap.add_argument("--skip", type=int, default=2, help="first steps of each kind left out")
    ap.add_argument("--rounds", type=int, default=None, help="lock-step pairs per arm (default 3; not with one arm)")
    ap.add_argument(
        "--reference",
        nargs=2,
        type=float,
        metavar=("FULL", "SHORT"),
        help="the reference arm's pinned costs in seconds (default: as measured here)",
    )
    ap.add_argument(
        "--alone",
        type=int,
        default=None,
        help="runs of the reference by itself, for its costs (default 3; not with --reference)",
    )
    ap.add_argument("--out", type=Path, required=True, help="the JSON written (atomically)")
    a = ap.parse_args(argv)
    if any(len(arm) < 2 for arm in a.arm):
        ap.error("--arm takes a name and a shard folder, then its settings")
    if len(a.arm) < 2 and a.rounds is not None:
        ap.error("one arm alone is timed by its runs alone (--alone): --rounds needs a second arm to pair with it")
    a.rounds = 3 if a.rounds is None else a.rounds
    if a.steps <= a.skip + 2 or a.rounds < 1:
        ap.error("--steps must exceed --skip + 2 (the last two whole steps are left out), and --rounds be at least 1")
    names = [arm[0] for arm in a.arm]
    if len(set(names)) != len(names):
        ap.error(f"arm names repeat: {' '.join(names)}")
    if len(names) < 2 and a.reference is not None:
        ap.error("one arm alone: its costs come from its runs alone, so there is nothing for --reference to pin")
    if a.skip < 0:
        ap.error("--skip must be >= 0")
    if a.reference is not None and (a.alone is not None or not all(math.isfinite(c) and c > 0 for c in a.reference)):
        ap.error(
            "--reference takes two positive costs in seconds, and replaces --alone (the reference is not timed alone)"
        )
    alone_runs = 3 if a.alone is None else a.alone
    if a.reference is None and alone_runs < 1:
        ap.error("--alone must be >= 1: the reference's costs come from its runs alone (or pin them with --reference)")
    try:  # every arm's settings and the output, before any timing: a typo in the last arm costs nothing
        check_output(a.out, [], kind=artefacts.STEP_COSTS, overwrite=True)
        settings = {name: (shards, arm_settings(a.common, rest, a.steps)) for name, shards, *rest in a.arm}
    except MapnetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    plan = (
        f"{len(names) - 1} arms, each in lock-step with {names[0]}, x {a.rounds} rounds"
        if len(names) > 1
        else f"{names[0]} alone, {alone_runs} runs"
    )
    print(
        f"{plan}, {a.steps} short + {a.steps} whole steps each; "
        f"{os.cpu_count()} cores, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
        f"load average {load_before[0]:.2f} before; {cpu_description() or 'CPU not readable'}",
        flush=True,
    )
    rounds = []
    try:
        ref_name, others = names[0], names[1:]
        alone = []
        for _ in range(0 if a.reference else alone_runs):
            alone.append(time_alone(settings[ref_name][1], settings[ref_name][0], a.steps, a.skip))
            print(
                f"  alone   {ref_name:<16} full {alone[-1]['full'] * 1e3:7.1f} ms  short "
                f"{alone[-1]['short'] * 1e3:7.1f} ms",
                flush=True,
            )
        for r in range(a.rounds if others else 0):  # one arm: its runs alone are the measurement
            pair = {}
            for name in others:
                ref_cost, cost = time_pair(settings[ref_name], settings[name], a.steps, a.skip)
                pair[name] = {"arm": cost, "reference": ref_cost}
                print(
                    f"  round {r + 1} {name:<16} full {cost['full'] * 1e3:7.1f} ms "
                    f"({cost['full'] / ref_cost['full']:.3f}x)"
                    f"  short {cost['short'] * 1e3:7.1f} ms ({cost['short'] / ref_cost['short']:.3f}x)   "
                    f"{ref_name} beside it: {ref_cost['full'] * 1e3:.1f} / {ref_cost['short'] * 1e3:.1f} ms",
                    flush=True,
                )
            rounds.append(pair)
        result = summarise(rounds, names, tuple(a.reference) if a.reference else None, alone)
        result.update(
            {
                "steps": a.steps,
                "skip": a.skip,
                "rounds_run": a.rounds if others else 0,
                "common": a.common,
                "arms_given": [{"name": n, "shards": s, "settings": rest} for n, s, *rest in a.arm],
                "cores": os.cpu_count(),
                "cpu": cpu_description(),
                "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "load_before": [round(x, 2) for x in load_before],
                "load_after": [round(x, 2) for x in os.getloadavg()],
                "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
        )
        write_json(a.out, result)
    except MapnetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{'arm':<16} {'ratio full':>10} {'(range)':>15} {'ratio short':>11} {'(range)':>15} {'full s':>7} "
        f"{'short s':>7}"
    )
    for name, arm in result["arms"].items():
        rf, rs = arm["ratio_range"]["full"], arm["ratio_range"]["short"]
        print(
            f"{name:<16} {arm['ratio']['full']:10.3f} {f'{rf[0]:.3f}-{rf[1]:.3f}':>15} {arm['ratio']['short']:11.3f} "
            f"{f'{rs[0]:.3f}-{rs[1]:.3f}':>15} {arm['step_seconds']:7.4f} {arm['short_step_seconds']:7.4f}"
        )
    print(f"load average {os.getloadavg()[0]:.2f} after; {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
