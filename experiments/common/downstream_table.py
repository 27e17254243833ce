"""The downstream acceptance table (docs/results.md, section 6): per task, the pretrained encoder's and its
random-init control's dev score per fine-tuning seed, and the paired margin (pretrained − control, same
seed) with a 95% t-interval.

    uv run python experiments/common/downstream_table.py runs/real-text/glue-small-lr3e-4-*/results.json

Each run's score is its best epoch (the protocol's `run_score`). One pretraining seed: the fine-tuning
seeds are the only replication, so the interval is over fine-tuning seeds, and each task is one
comparison.
"""

from __future__ import annotations

import json
import statistics
import sys

from mapnet_cli.intervals import mean_ci


def main(paths: list[str]) -> None:
    print("| task | lr | pretrained (per seed) | random init (per seed) | margin, mean ± 95% | seed std (pretrained / control) | margin > 2 std? | s per run |")
    print("|---|---|---|---|---|---|---|---|")
    by = {}  # (task, lr) -> init -> seed -> (best-epoch score, seconds); runs may come from several files
    for path in paths:
        for run in json.load(open(path, encoding="utf-8"))["runs"].values():
            score = max(e["score"] for e in run["epochs"])
            by.setdefault((run["task"], run["lr"]), {}).setdefault(run["init"], {})[run["seed"]] = (score, run["seconds"])
    for (task, lr), arms in sorted(by.items()):
        pre, ran = arms.get("pretrained", {}), arms.get("random", {})
        seeds = sorted(set(pre) & set(ran))
        if not seeds:
            continue
        margins = [pre[s][0] - ran[s][0] for s in seeds]
        ci = mean_ci(margins)
        sd_p = statistics.stdev(pre[s][0] for s in seeds) if len(seeds) > 1 else float("nan")
        sd_r = statistics.stdev(ran[s][0] for s in seeds) if len(seeds) > 1 else float("nan")
        half = (ci["ci95"][1] - ci["ci95"][0]) / 2 if ci.get("ci95") else float("nan")
        secs = statistics.mean(v[1] for a in (pre, ran) for v in a.values())
        print(f"| {task} | {lr:g} | {', '.join(f'{pre[s][0]:.4f}' for s in seeds)} | "
              f"{', '.join(f'{ran[s][0]:.4f}' for s in seeds)} | {ci['mean']:+.4f} ± {half:.4f} | "
              f"{sd_p:.4f} / {sd_r:.4f} | {'yes' if ci['mean'] > 2 * max(sd_p, sd_r) else 'no'} | {secs:.0f} |")

if __name__ == "__main__":
    main(sys.argv[1:])
