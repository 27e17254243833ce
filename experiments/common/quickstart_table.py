"""The README's quickstart figures, from the kept benchmarks of fresh quickstarts (benchmarks/bench_quickstart.py).

uv run python benchmarks/bench_quickstart.py --json experiments/recipe-cpu/quickstart/bench.json
uv run python experiments/common/doc_tables.py --write       # then the README's `quickstart-figures`

bench.json is the first machine's (2026-12-01); each file of OTHERS, another 2-core machine's, adds a sentence with
its times, and with its losses where they differ from the first file's at the printed precision.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "experiments" / "recipe-cpu" / "quickstart"
BENCH = QUICKSTART / "bench.json"
OTHERS = (QUICKSTART / "bench-2026-12-03.json",)


def conditions(doc: dict) -> str:
    """The machine and how quiet it was: the load before each run and, where recorded, the stolen CPU time."""
    load = max(x["before"][0] for x in doc["loads"])
    # The hypervisor's share (bench_quickstart.py records it since 2026-12-03; the earlier file has none).
    steals = [x.get("steal") for x in doc["loads"]]
    if None in steals:
        stolen = ""
    elif max(steals) < 0.005:
        stolen = ", no CPU time stolen by the hypervisor"
    else:
        stolen = f", up to {max(steals):.0%} of CPU time stolen by the hypervisor during a run"
    return f"{doc['cpu']}, {doc['cores']} cores, alone, load average ≤ {load:.2f} before each run{stolen}"


def times(doc: dict) -> str:
    s = doc["seconds"]
    return f"**{min(s):.1f} s** (median {statistics.median(s):.1f} s)"


def learned(doc: dict) -> str:
    first, last = doc["evals"][0], doc["evals"][-1]
    return (
        f"The held-out loss falls from {first['eval_loss']:.2f} nats at step {first['step']} to "
        f"{last['eval_loss']:.2f} at step {last['step']}, {doc['eval_unigram'] - last['eval_loss']:.2f} below the "
        f"unigram level ({doc['eval_unigram']:.2f}); the `determined` tokens fall from "
        f"{first['eval_loss/determined']:.2f} to **{last['eval_loss/determined']:.2f}** nats."
    )


def source(doc: dict, path: Path) -> str:
    return f"*`{path.relative_to(REPO).as_posix()}`, made by `{doc['command']}` on {doc['when']}.*"


def figures(path: Path = BENCH, others: tuple[Path, ...] = OTHERS) -> str:
    doc = json.loads(path.read_text(encoding="utf-8"))
    text = (
        f"Measured ({conditions(doc)}): {times(doc)} from nothing to the summary, over {len(doc['seconds'])} fresh "
        f"runs (each a new `python -m mapnet_cli.cli quickstart` process; `uv run` adds its own start). "
        f"{learned(doc)} {source(doc, path)}"
    )
    for other in others:
        o = json.loads(other.read_text(encoding="utf-8"))
        same = learned(o) == learned(doc)
        text += (
            f" On another machine ({conditions(o)}): {times(o)} over {len(o['seconds'])} fresh runs, "
            + ("the same losses to these digits. " if same else f"and its losses: {learned(o)} ")
            + source(o, other)
        )
    return text
