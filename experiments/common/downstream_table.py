"""The downstream acceptance table (docs/results.md, section 6): per task, the pretrained encoder's and its
random-init control's dev score per fine-tuning seed, and the paired margin (pretrained − control, same
seed) with a 95% t-interval.

Several files merge (a control's seeds run apart, say): a row is a task at one training-set size and rate.
When the files hold one task at several sizes (the small protocol's 5,000 examples beside few-shot runs), each
size is a row of its own, named by its size. A (task, size, rate, init, seed) in two files is refused: which
score to table would be a silent choice.

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
    # (task, training examples, lr) -> init -> seed -> (best-epoch score, seconds, file)
    by: dict[tuple, dict[str, dict[int, tuple[float, float, str]]]] = {}
    for path in paths:
        for run in json.load(open(path, encoding="utf-8"))["runs"].values():
            score = max(e["score"] for e in run["epochs"])
            seeds = by.setdefault((run["task"], run.get("train_examples"), run["lr"]), {}).setdefault(run["init"], {})
            if run["seed"] in seeds and seeds[run["seed"]][2] != path:
                raise SystemExit(f"{run['task']} ({run.get('train_examples')} examples, lr {run['lr']:g}, "
                                 f"{run['init']}, seed {run['seed']}) is in both {seeds[run['seed']][2]} and {path}")
            seeds[run["seed"]] = (score, run["seconds"], path)
    sizes: dict[str, set] = {}
    for task, n, _ in by:
        sizes.setdefault(task, set()).add(n)
    print("| task | lr | pretrained (per seed) | random init (per seed) | margin, mean ± 95% | seed std (pretrained / control) | margin > 2 std? | s per run |")
    print("|---|---|---|---|---|---|---|---|")
    for (task, n, lr), arms in sorted(by.items(), key=lambda kv: (kv[0][0], -(kv[0][1] or 0), kv[0][2])):
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
        name = f"{task}, {n:,} examples" if len(sizes[task]) > 1 and n is not None else task
        print(f"| {name} | {lr:g} | {', '.join(f'{pre[s][0]:.4f}' for s in seeds)} | "
              f"{', '.join(f'{ran[s][0]:.4f}' for s in seeds)} | {ci['mean']:+.4f} ± {half:.4f} | "
              f"{sd_p:.4f} / {sd_r:.4f} | {'yes' if ci['mean'] > 2 * max(sd_p, sd_r) else 'no'} | {secs:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
