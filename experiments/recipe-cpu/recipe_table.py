"""The tables of RESULTS section 0 from the runs of experiments/recipe-cpu/recipe_cpu.sh.

    uv run python experiments/recipe-cpu/recipe_table.py runs/recipe/tiny [--timing runs/recipe/timing.json] [--json
    OUT]

For every run folder under the argument: its unigram plateau (the training tokens' entropy H and each
held-out set's unigram level, recorded once in metrics.jsonl), its held-out curve (all-[MASK] masks), the
step at which the main held-out loss first reaches H - 1 nat (the target of the "learns" issue; linear
interpolation between evaluations, which are 250 steps apart), and the losses at fixed steps. With
--timing (experiments/recipe-cpu/recipe_timing.sh: idle 2-core seconds per step of each configuration) the step is
also converted to idle minutes of training (evaluations excluded). Runs are grouped by arm name; seeds
are the -sN suffix.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

TARGET_NATS = 1.0


def read_run(folder: Path) -> dict | None:
    path = folder / "metrics.jsonl"
    if not path.is_file():
        return None
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    unigram = next((r for r in records if r["kind"] == "unigram"), None)
    evals = [r for r in records if r["kind"] == "eval"]
    trains = [r for r in records if r["kind"] == "train"]
    if unigram is None or not evals:
        return None
    settings = json.loads((folder / "run.json").read_text())
    return {
        "name": folder.name,
        "unigram": unigram,
        "evals": evals,
        "last_step": trains[-1]["step"] if trains else 0,
        "command": settings["command"],
    }


def first_reach(evals: list[dict], key: str, level: float) -> float | None:
    """The step at which `key` first falls to `level` (interpolated), or None."""
    prev = None
    for e in evals:
        if e.get(key) is not None and e[key] <= level:
            if prev is None:
                return float(e["step"])
            (s0, l0), (s1, l1) = prev, (e["step"], e[key])
            return s0 + (l0 - level) / (l0 - l1) * (s1 - s0)
        prev = (e["step"], e[key])
    return None


def at_step(evals: list[dict], key: str, step: int) -> float | None:
    return next((e[key] for e in evals if e["step"] == step), None)


def summarise(run: dict) -> dict:
    u = run["unigram"]
    target = u["train_entropy"] - TARGET_NATS
    final = run["evals"][-1]
    sets = {"main": ("eval_loss", "eval_unigram")} | {
        k.partition("@")[2]: (f"eval_loss@{k.partition('@')[2]}", k) for k in u if k.startswith("eval_unigram@")
    }
    return {
        "name": run["name"],
        "steps": final["step"],
        "train_entropy": u["train_entropy"],
        "target": target,
        "steps_to_target": first_reach(run["evals"], "eval_loss", target),
        "loss": {
            s: {
                "final": final[loss],
                "vs_unigram": final[loss] - u[level],
                **{str(k): at_step(run["evals"], loss, k) for k in (500, 1000, 2000, 3000)},
            }
            for s, (loss, level) in sets.items()
        },
        "command": run["command"],
    }


def minutes(arm: str, step: float | None, timing: dict) -> str:
    """Idle minutes of training to `step`: the warm-up's pieces at their own step time, the rest at the whole-sequence
    one."""
    t = timing.get(arm)
    if step is None or t is None:
        return "-"
    pieces = min(step, t.get("short_seq_steps", t.get("short_seq", {}).get("steps", 0)))  # 0.1 records, or today's
    return f"{(pieces * t.get('s_per_step_pieces', t['s_per_step']) + (step - pieces) * t['s_per_step']) / 60:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--timing", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    timing = json.loads(args.timing.read_text()) if args.timing else {}
    runs = [s for s in (read_run(f) for f in sorted(args.folder.iterdir()) if f.is_dir()) if s is not None]
    rows = [summarise(r) for r in runs]
    if not rows:
        raise SystemExit(f"no finished runs under {args.folder}")
    u = runs[0]["unigram"]
    print(
        f"training tokens' unigram entropy H = {u['train_entropy']:.3f} nats; target H - 1 = "
        f"{u['train_entropy'] - 1:.3f}; "
        + "; ".join(
            f"{k.partition('@')[2] or 'main'} unigram level {v:.3f}"
            for k, v in u.items()
            if k.startswith("eval_unigram")
        )
    )
    print(
        "\n| arm | seed | steps run | steps to H - 1 | idle min to H - 1 | main loss at 1,000 / 2,000 / final | "
        "final vs unigram: main / books / wiki |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        arm, _, seed = re.match(r"(.*?)(-s(\d+))?$", r["name"]).groups()
        main_loss = r["loss"]["main"]
        fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
        reached = "not reached" if r["steps_to_target"] is None else f"{r['steps_to_target']:,.0f}"
        print(
            f"| {arm} | {seed or 0} | {r['steps']:,} | {reached} | {minutes(arm, r['steps_to_target'], timing)} | "
            f"{fmt(main_loss['1000'])} / {fmt(main_loss['2000'])} / {fmt(main_loss['final'])} | "
            + " / ".join(f"{r['loss'][s]['vs_unigram']:+.3f}" for s in ("main", "books", "wiki") if s in r["loss"])
            + " |"
        )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "timing": timing}, indent=1))


if __name__ == "__main__":
    main()
