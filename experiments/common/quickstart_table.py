"""The README's quickstart figures, from the kept benchmark of fresh quickstarts (benchmarks/bench_quickstart.py).

uv run python benchmarks/bench_quickstart.py --json experiments/recipe-cpu/quickstart/bench.json
uv run python experiments/common/doc_tables.py --write       # then the README's `quickstart-figures`
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "experiments" / "recipe-cpu" / "quickstart" / "bench.json"


def figures(path: Path = BENCH) -> str:
    doc = json.loads(path.read_text(encoding="utf-8"))
    first, last = doc["evals"][0], doc["evals"][-1]
    s = doc["seconds"]
    load = max(x["before"][0] for x in doc["loads"])
    return (
        f"Measured ({doc['cpu']}, {doc['cores']} cores, alone, load average ≤ {load:.2f} before each run): "
        f"**{min(s):.1f} s** (median {statistics.median(s):.1f} s) from nothing to the summary, over {len(s)} fresh "
        "runs (each a new `python -m mapnet_cli.cli quickstart` process; `uv run` adds its own start). "
        f"The held-out loss falls from {first['eval_loss']:.2f} nats at step {first['step']} to "
        f"{last['eval_loss']:.2f} at step {last['step']}, {doc['eval_unigram'] - last['eval_loss']:.2f} below the "
        f"unigram level ({doc['eval_unigram']:.2f}); the `determined` tokens fall from "
        f"{first['eval_loss/determined']:.2f} to **{last['eval_loss/determined']:.2f}** nats. "
        f"*`{path.relative_to(REPO).as_posix()}`, made by `{doc['command']}` on {doc['when']}.*"
    )
