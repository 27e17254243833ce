"""The downstream acceptance table (docs/results.md, section 6): per task, the pretrained encoder's and its
random-init control's dev score per fine-tuning seed, and the paired margin (pretrained − control, same
seed) with a 95% t-interval.

Several files merge (a control's seeds run apart, say): a row is one encoder's task at one training-set size and
rate. When the files hold one task at several sizes (the small protocol's 5,000 examples beside few-shot runs), each
size is a row of its own, named by its size; when they hold several pretrained encoders (one file per pretraining
seed), each encoder's rows are named by its run, and a random-init run is paired with the encoder its file names it
the control of (`controls`). A run in two files is refused: which score to table would be a silent choice.

    uv run python experiments/common/downstream_table.py runs/real-text/glue-small-lr3e-4-*/results.json

Each run's score is its best epoch (the protocol's `run_score`). One pretraining seed: the fine-tuning
seeds are the only replication, so the interval is over fine-tuning seeds, and each task is one
comparison. Several pretraining seeds: a second table takes each encoder's mean margin as one value and gives
the interval over encoders, the replication that says what the recipe buys rather than what one encoder does
(a row per task, size and rate that two or more encoders share).
"""

from __future__ import annotations

import json
import statistics
import sys

from mapnet_cli.intervals import mean_ci


def read_runs(paths: list[str]) -> list[dict]:
    """Every run of the files, each with its best-epoch `score`, its `file` and its `encoder`: the pretrained
    checkpoint it is (or is the random-init control of); None for all when the files hold one encoder."""
    runs = []
    for path in paths:
        doc = json.load(open(path, encoding="utf-8"))
        control_of = {ctl: pre for pre, ctl in doc.get("controls", {}).items()}
        for run in doc["runs"].values():
            key = run.get("checkpoint", {}).get("key")
            runs.append(
                {
                    **run,
                    "score": max(e["score"] for e in run["epochs"]),
                    "file": path,
                    "encoder": key if run["init"] == "pretrained" else control_of.get(key),
                }
            )
    names = {
        r["encoder"]: f"{r['checkpoint']['run']}@{r['checkpoint']['step']}"
        for r in runs
        if r["init"] == "pretrained" and r["encoder"]
    }
    if len(names) <= 1:
        for r in runs:
            r["encoder"] = None
    else:
        for r in runs:
            if r["encoder"] not in names:
                raise SystemExit(
                    f"{r['file']}: a {r['init']} {r['task']} run (seed {r['seed']}) is the control of no "
                    f"encoder these files hold ({', '.join(sorted(names.values()))})"
                )
            r["name"] = names[r["encoder"]]
    return runs


def main(paths: list[str]) -> None:
    # (encoder, task, training examples, lr) -> init -> seed -> (best-epoch score, seconds, file)
    by: dict[tuple, dict[str, dict[int, tuple[float, float, str]]]] = {}
    names: dict[str | None, str] = {}
    for run in read_runs(paths):
        names[run["encoder"]] = run.get("name", "")
        seeds = by.setdefault((run["encoder"], run["task"], run.get("train_examples"), run["lr"]), {}).setdefault(
            run["init"], {}
        )
        if run["seed"] in seeds and seeds[run["seed"]][2] != run["file"]:
            raise SystemExit(
                f"{run['task']} ({run.get('train_examples')} examples, lr {run['lr']:g}, "
                f"{run['init']}, seed {run['seed']}) is in both {seeds[run['seed']][2]} and {run['file']}"
            )
        seeds[run["seed"]] = (run["score"], run["seconds"], run["file"])
    sizes: dict[str, set] = {}
    per_encoder: dict[tuple, dict[str, float]] = {}  # (row name without its encoder, lr) -> {encoder: mean margin}
    for _, task, n, _ in by:
        sizes.setdefault(task, set()).add(n)
    print(
        "| task | lr | pretrained (per seed) | random init (per seed) | margin, mean ± 95% | seed std (pretrained / "
        "control) | margin > 2 std? | s per run |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (encoder, task, n, lr), arms in sorted(
        by.items(), key=lambda kv: (kv[0][1], -(kv[0][2] or 0), kv[0][3], names[kv[0][0]])
    ):
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
        if encoder is not None:
            per_encoder.setdefault((name, lr), {})[names[encoder]] = ci["mean"]
        name += f", {names[encoder]}" if encoder is not None else ""
        print(
            f"| {name} | {lr:g} | {', '.join(f'{pre[s][0]:.4f}' for s in seeds)} | "
            f"{', '.join(f'{ran[s][0]:.4f}' for s in seeds)} | {ci['mean']:+.4f} ± {half:.4f} | "
            f"{sd_p:.4f} / {sd_r:.4f} | {'yes' if ci['mean'] > 2 * max(sd_p, sd_r) else 'no'} | {secs:.0f} |"
        )
    shared = {key: margins for key, margins in per_encoder.items() if len(margins) > 1}
    if shared:
        print("\nOver pretraining seeds (each encoder's mean margin is one value; the interval is over encoders):\n")
        print("| task | lr | encoders | margin per encoder | mean ± 95% | every encoder ahead? |")
        print("|---|---|---|---|---|---|")
    for (name, lr), margins in shared.items():
        ci = mean_ci([margins[e] for e in sorted(margins)])
        half = (ci["ci95"][1] - ci["ci95"][0]) / 2
        print(
            f"| {name} | {lr:g} | {len(margins)} | {', '.join(f'{margins[e]:+.4f}' for e in sorted(margins))} | "
            f"{ci['mean']:+.4f} ± {half:.4f} | {'yes' if all(m > 0 for m in margins.values()) else 'no'} |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
