"""The pooling table (experiments/pooling-default, docs/results.md section B3): per GLUE task, the pretrained
encoder's and its random-init control's dev score with [CLS] and with mean pooling, the margin over the control
paired by fine-tuning seed, and mean pooling's gain over [CLS] for the pretrained encoder, paired by seed.

    uv run python experiments/common/pooling_table.py        # prints the table from the kept results

Each run's score is its best epoch (the protocol's `run_score`). One pretraining seed: the three fine-tuning seeds
are the only replication, so each interval is over them (2 degrees of freedom); each task is one comparison.
"""

from __future__ import annotations

import json
from pathlib import Path

from mapnet_cli.intervals import mean_ci

FOLDER = Path(__file__).resolve().parents[1] / "pooling-default"


def scores(path: Path) -> dict[tuple[str, str], dict[int, float]]:
    """(task, init) -> {fine-tuning seed: best-epoch dev score, in points}."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    for run in json.loads(path.read_text(encoding="utf-8"))["runs"].values():
        out.setdefault((run["task"], run["init"]), {})[run["seed"]] = 100 * max(e["score"] for e in run["epochs"])
    return out


def paired(a: dict[int, float], b: dict[int, float]) -> str:
    seeds = sorted(set(a) & set(b))
    ci = mean_ci([a[s] - b[s] for s in seeds])
    half = (ci["ci95"][1] - ci["ci95"][0]) / 2
    text = f"{ci['mean']:+.1f} ± {half:.1f}"
    return f"**{text}**" if ci["ci95"][0] > 0 or ci["ci95"][1] < 0 else text


def table() -> str:
    by = {pooling: scores(FOLDER / f"glue-{pooling}.json") for pooling in ("cls", "mean")}
    tasks = sorted({task for s in by.values() for task, _ in s})
    rows = [
        "| task | pooling | pretrained | random init | pretrained − random (paired) | mean − [CLS], pretrained "
        "(paired) |",
        "|---|---|---|---|---|---|",
    ]
    for task in tasks:
        for pooling in ("cls", "mean"):
            pre, ran = by[pooling][(task, "pretrained")], by[pooling][(task, "random")]
            gain = paired(pre, by["cls"][(task, "pretrained")]) if pooling == "mean" else "–"
            rows.append(
                f"| {task} | {'[CLS]' if pooling == 'cls' else 'mean'} | {sum(pre.values()) / len(pre):.1f} | "
                f"{sum(ran.values()) / len(ran):.1f} | {paired(pre, ran)} | {gain} |"
            )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
