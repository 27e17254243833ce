"""Wall time of `mapnet quickstart` from nothing, three fresh runs, and what the last one learned.

    uv run python benchmarks/bench_quickstart.py                        # prints min / median of 3 runs
    uv run python benchmarks/bench_quickstart.py --json experiments/recipe-cpu/quickstart/bench.json

Not a timed test: run it alone on an otherwise idle machine (it prints the load average before and after each run,
and the share of CPU time the hypervisor stole during it: on a shared VM a run with 20% steal is slower for reasons
that are not mapnet's, and its figure should not replace one measured without).
Each run is `python -m mapnet_cli.cli quickstart --out FRESH` in a new process, timed from its start to its exit
(interpreter start, torch's import, the corpus, the shards, pretraining and the summary: what a user waits for after
`uv sync`). With --json it keeps the timings, the machine, the load and the last run's held-out evaluations (the
whole loss, each token kind's, the unigram level): the README's quickstart figures are generated from that file
(experiments/common/doc_tables.py, `quickstart-figures`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from mapnet_cli import cpu_features

REPO = Path(__file__).resolve().parents[1]


def cpu_name() -> str:
    """The processor and its bf16 instructions (as run.json records them), so two machines of one model name differ."""
    return cpu_features.cpu_description() or platform.processor() or "unknown CPU"


def steal_share(before, after) -> float | None:
    """The share of all CPU time between two psutil.cpu_times() readings that the hypervisor gave to other guests
    (Linux's `steal`; None where the platform does not count it)."""
    if not hasattr(before, "steal"):
        return None
    total = sum(after) - sum(before)
    return (after.steal - before.steal) / total if total > 0 else 0.0


def one_run(out: Path, extra: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mapnet_cli.cli", "quickstart", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"quickstart failed:\n{done.stderr[-3000:]}")
    return seconds


def learned(run: Path) -> dict:
    """The run's held-out evaluations and unigram levels, from its metrics.jsonl."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = [r for r in rows if r.get("kind") == "eval"]
    unigram = next((r for r in rows if r.get("kind") == "unigram"), {})
    return {
        "evals": [{k: v for k, v in r.items() if k.startswith(("step", "eval_loss", "eval_accuracy"))} for r in evals],
        "eval_unigram": unigram.get("eval_unigram"),
        "train_entropy": unigram.get("train_entropy"),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="keep the figures in this file")
    ap.add_argument("extra", nargs="*", help="more quickstart arguments (after --), e.g. --set train.steps=400")
    a = ap.parse_args()
    seconds, loads = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.runs):
            before, times = os.getloadavg(), psutil.cpu_times()
            seconds.append(one_run(Path(tmp) / f"qs-{i}", a.extra))
            steal = steal_share(times, psutil.cpu_times())
            loads.append({"before": before, "after": os.getloadavg(), "steal": steal})
            load = f"load before {before[0]:.2f}, after {loads[-1]['after'][0]:.2f}"
            stolen = "" if steal is None else f", {steal:.0%} of CPU time stolen"
            print(f"run {i + 1}: {seconds[-1]:.1f} s ({load}{stolen})")
        what = learned(Path(tmp) / f"qs-{a.runs - 1}" / "run")
    median = statistics.median(seconds)
    print(
        f"min {min(seconds):.1f} s, median {median:.1f} s over {a.runs} fresh runs; "
        f"{cpu_name()}, {os.cpu_count()} cores"
    )
    first, last = what["evals"][0], what["evals"][-1]
    determined = last.get("eval_loss/determined", float("nan"))
    print(f"last run: held-out loss {first['eval_loss']:.3f} -> {last['eval_loss']:.3f} (unigram level "
          f"{what['eval_unigram']:.3f}); determined {determined:.3f}")  # fmt: skip
    if a.json:
        doc = {
            "schema": "mapnet.quickstart-bench/1",
            "command": " ".join(["uv run python benchmarks/bench_quickstart.py", *sys.argv[1:]]),
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "seconds": seconds,
            "loads": loads,
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "extra": a.extra,
            **what,
        }
        a.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = a.json.with_name(a.json.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(a.json)
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
