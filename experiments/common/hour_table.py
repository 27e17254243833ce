"""The hour recipe's tables (experiments/hour-recipe, issue 45 part 3): what 60 minutes of `--recipe hour` buy.

    uv run python experiments/common/hour_table.py OUT [--glue OUT/glue-small/results.json ...]

OUT is `hour_cpu.sh`'s folder: runs/seed-K (each a `pretrain` budget run), blimp-curve.json (200 pairs a paradigm
at every checkpoint), blimp-final-pll.json and blimp-final-l2r.json (every pair at each seed's last checkpoint, with
each seed's random-weight control and the shards' unigram model). Three tables:

- **Runs**: per seed, the steps the budget bought, which clock counted them (and the wall seconds they took), the
  final held-out loss and whether the run left the plateau (at least 1 nat under its training tokens' unigram
  entropy, as experiments/blimp-arms).
- **BLiMP at the budget's end**, by pseudo-log-likelihood (the headline: the method of every earlier BLiMP figure
  in RESULTS) and by word-l2r: the trained encoders, their random-weight controls, the paired difference (one
  comparison per seed: the paradigms score the same model), the unigram model and the published 5-gram (63.3
  on these 45 paradigms, the issue's goal).
- **The curve**: mean BLiMP (200 pairs) over the seeds at each checkpoint, by minutes of counted training time
  (each run's logged `elapsed`, interpolated between log lines), beside `mini` `fast`'s 6,000-step curve
  (experiments/blimp-arms-mini/uniform-6k, trained on an H200) put on this machine's minutes at the lever search's
  kept `mini` costs (its steps counted as a modelled clock would: the 16-token steps at the short cost). Then the
  least-squares line through the curve's second half (its points at half the budget or later), extended to twice
  the budget: not a measurement (the schedule decays to zero at the budget's end, so more minutes mean a longer
  run, not this one continued). Not the last two points alone: on a plateau their slope is the noise of two
  200-pair scores (section H's last segment, +0.4 points in 8 minutes, would have "predicted" 64.9 at 120).

With `--glue FILE`: experiments/common/downstream_table.py's table of those fine-tuning results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import downstream_table

from mapnet_cli.intervals import mean_ci
from mapnet_cli.settings.moved import migrate

REPO = Path(__file__).resolve().parents[2]
MINI_FAST = REPO / "experiments" / "blimp-arms-mini" / "uniform-6k" / "results.json"
KEPT_COSTS = REPO / "experiments" / "hour-levers" / "step-costs" / "costs.json"
PLATEAU_NATS = 1.0


def read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{path}: not a readable JSON file ({exc})") from None


def fmt(ci: dict, scale: float = 100.0, f: str = ".1f") -> str:
    mean = format(scale * ci["mean"], f)
    if ci["ci95"] is None:
        return mean
    return f"{mean} ± {format(scale * (ci['ci95'][1] - ci['ci95'][0]) / 2, f.lstrip('+'))}"


def metrics(run: Path) -> list[dict]:
    return [
        json.loads(line) for line in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def interpolate(points: list[tuple[float, float]], x: float) -> float | None:
    """y at x, linear between the (x, y) points (sorted by x); None outside them, never the nearest end."""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[0][1] if points and x == points[0][0] else None


def elapsed_curve(run: Path) -> list[tuple[float, float]]:
    """(step, counted seconds) of a budget run: the origin, every logged training step and the budget's end."""
    budget = read(run / "run.json")["budget"]
    points = [(0.0, 0.0)] + [
        (float(m["step"]), float(m["elapsed"])) for m in metrics(run) if m.get("kind") == "train" and "elapsed" in m
    ]
    points.append((float(budget["steps"]), float(budget["spent_seconds"])))
    return sorted(set(points))


def runs_table(runs: list[Path]) -> str:
    lines = [
        "| seed | steps bought | clock | counted s | wall s | held-out loss | unigram entropy | left the plateau? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        budget, ms = read(run / "run.json")["budget"], metrics(run)
        loss = [m["eval_loss"] for m in ms if m.get("kind") == "eval"][-1]
        entropy = next(m["train_entropy"] for m in ms if m.get("kind") == "unigram")
        left = "yes" if loss <= entropy - PLATEAU_NATS else "no"
        lines.append(
            f"| {run.name} | {budget['steps']:,} | {budget.get('clock', 'wall')} | {budget['spent_seconds']:,.0f} | "
            f"{budget.get('wall_seconds', budget['spent_seconds']):,.0f} | {loss:.3f} | {entropy:.3f} | {left} |"
        )
    return "\n".join(lines)


def final_scores(doc: dict) -> tuple[dict[str, float], dict[str, float], float | None]:
    """({run: accuracy}, {run: its random control's accuracy}, unigram accuracy) of a `mapnet blimp` file."""
    by_label = {m["label"]: m for m in doc["models"]}
    trained = {m["run"]: m["accuracy"] for m in doc["models"] if m["init"] == "pretrained"}
    random = {
        m["run"]: by_label[m["controls"]["random"]]["accuracy"]
        for m in doc["models"]
        if m["init"] == "pretrained" and m.get("controls", {}).get("random") in by_label
    }
    unigram = next((m["accuracy"] for m in doc["models"] if m["init"] == "unigram"), None)
    return trained, random, unigram


def blimp_table(finals: dict[str, dict]) -> str:
    lines = [
        "| method | trained, per seed | trained, mean ± 95% | random weights | trained − random (paired) | n | "
        "unigram | 5-gram | ≥ 5-gram? |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for method, doc in finals.items():
        trained, random, unigram = final_scores(doc)
        seeds = sorted(trained)
        paired = [trained[s] - random[s] for s in seeds if s in random]
        five = doc.get("references", {}).get("5-gram", {}).get("accuracy")
        mean = mean_ci([trained[s] for s in seeds])
        lines.append(
            f"| {method} | {', '.join(f'{100 * trained[s]:.1f}' for s in seeds)} | {fmt(mean)} | "
            f"{fmt(mean_ci([random[s] for s in seeds if s in random])) if paired else '–'} | "
            f"{fmt(mean_ci(paired), f='+.1f') if paired else '–'} | {len(paired)} | "
            f"{'–' if unigram is None else f'{100 * unigram:.1f}'} | {'–' if five is None else f'{100 * five:.1f}'} | "
            f"{'–' if five is None else 'yes' if mean['mean'] >= five else 'no'} |"
        )
    pairs = next(iter(finals.values()))["data"]
    lines.append(f"\n{pairs['paradigms']} paradigms, {pairs['pairs']:,} pairs per encoder; one comparison per seed.")
    if {"pll", "l2r"} <= finals.keys():
        pll, l2r = final_scores(finals["pll"])[0], final_scores(finals["l2r"])[0]
        seeds = sorted(pll.keys() & l2r.keys())
        diff = [l2r[s] - pll[s] for s in seeds]
        lines.append(
            f"word-l2r − PLL, paired by seed: {', '.join(f'{100 * d:+.1f}' for d in diff)}; "
            f"{fmt(mean_ci(diff), f='+.1f')} ({len(diff)} comparisons)."
        )
    lines.append("\n" + fields_table(finals))
    return "\n".join(lines)


def fields_table(finals: dict[str, dict]) -> str:
    """BLiMP by field: each method's trained encoders (mean over the seeds) beside the 5-gram's published scores
    averaged by field over the same paradigms (the file's references)."""
    docs = list(finals.values())
    fields = sorted(next(m["fields"] for m in docs[0]["models"] if m["init"] == "pretrained"))
    lines = [
        "| field | " + " | ".join(f"{method}, trained (mean)" for method in finals) + " | 5-gram |",
        "|---|" + "---|" * (len(finals) + 1),
    ]
    five = docs[0].get("references", {}).get("5-gram", {}).get("fields", {})
    for field in fields:
        means = [
            statistics.mean(m["fields"][field] for m in doc["models"] if m["init"] == "pretrained") for doc in docs
        ]
        lines.append(
            f"| {field} | "
            + " | ".join(f"{100 * v:.1f}" for v in means)
            + f" | {f'{100 * five[field]:.1f}' if field in five else '–'} |"
        )
    return "\n".join(lines)


def hour_curve(doc: dict, runs: dict[str, Path]) -> list[tuple[float, float]]:
    """(minutes, mean accuracy over the seeds) at each checkpoint step every seed was scored at."""
    by_run: dict[str, dict[int, float]] = {}
    for m in doc["models"]:
        if m["init"] == "pretrained":
            by_run.setdefault(m["run"], {})[m["step"]] = m["accuracy"]
    # The seeds bought the same steps on the modelled clock; on the wall clock their checkpoints differ slightly,
    # so the mean is taken per checkpoint index (the k-th checkpoint of every seed).
    per_seed = [
        sorted((interpolate(elapsed_curve(runs[n]), s) / 60.0, a) for s, a in steps.items())
        for n, steps in by_run.items()
    ]
    depth = min(len(c) for c in per_seed)
    return [
        (sum(c[k][0] for c in per_seed) / len(per_seed), sum(c[k][1] for c in per_seed) / len(per_seed))
        for k in range(depth)
    ]


def mini_fast_curve(results: Path = MINI_FAST, costs: Path = KEPT_COSTS) -> list[tuple[float, float]]:
    """`mini` `fast`'s mean BLiMP curve over its seeds, by minutes at the kept baseline costs."""
    doc, kept = read(results), read(costs)["reference_seconds"]
    full, short = kept["full"], kept["short"]
    curves = [{c["step"]: c["accuracy"] for c in run["blimp"]["curve"]} for run in doc["runs"]]
    short_steps = migrate(doc["runs"][0]["settings"])["train"]["short_seq"]["steps"]  # kept records: 0.1 keys
    common = sorted(set.intersection(*(set(c) for c in curves)))
    return [
        ((min(s, short_steps) * short + max(0, s - short_steps) * full) / 60.0, sum(c[s] for c in curves) / len(curves))
        for s in common
    ]


def scored(path: Path) -> dict | None:
    """A `mapnet blimp` file once it is complete; a file still being written (or stopped part-way: `blimp --resume`
    continues it) is said so on stderr and left out, never tabled as if its models were all."""
    if not path.is_file():
        return None
    doc = read(path)
    if not doc.get("complete"):
        print(
            f"{path}: not complete ({len(doc.get('models', []))} models so far; rerun the blimp stage): left out",
            file=sys.stderr,
        )
        return None
    return doc


def clock_of(out: Path) -> Path:
    """The costs file whose `mini` `fast` baseline prices the reference curve, so both curves are on one machine's
    clock: OUT's own when `hour_cpu.sh costs` measured the recipe beside `mini-fast` (its reference); the one OUT's
    costs were taken from (LEVERS_COSTS records it); else the kept costs."""
    costs = out / "costs.json"
    if costs.is_file() and read(costs).get("reference") == "mini-fast":  # hour_cpu.sh's costs: measured beside it here
        return costs
    sources = {arm.get("from", {}).get("file") for arm in read(costs)["arms"].values()} if costs.is_file() else set()
    sources.discard(None)
    if len(sources) > 1:
        raise SystemExit(
            f"{costs} takes costs from several files ({', '.join(sorted(sources))}): name one with --costs"
        )
    if not sources:
        return KEPT_COSTS
    recorded = Path(sources.pop())
    if "experiments" in recorded.parts:  # a kept file, recorded in the checkout that ran it: this checkout's copy
        here = REPO.joinpath(*recorded.parts[recorded.parts.index("experiments") :])
        if here.is_file():
            return here
    return recorded


def second_half_trend(hour: list[tuple[float, float]]) -> tuple[float, int, float] | None:
    """(slope per minute, points fitted, the line's value at twice the last minute): the least-squares line through
    the points at half the last minute or later; None with fewer than 2 such points."""
    end = hour[-1][0] if hour else 0.0
    half = [(m, a) for m, a in hour if m >= end / 2]
    if len(half) < 2:
        return None
    xs, ys = [m for m, _ in half], [a for _, a in half]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    if spread == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / spread
    return slope, len(half), my + slope * (2 * end - mx)


def curve_table(hour: list[tuple[float, float]], reference: list[tuple[float, float]]) -> str:
    lines = ["| minutes | hour recipe (mean) | `mini` `fast` at the same minutes |", "|---|---|---|"]
    for minutes, acc in hour:
        other = interpolate(reference, minutes)
        lines.append(f"| {minutes:.1f} | {100 * acc:.1f} | {'–' if other is None else f'{100 * other:.1f}'} |")
    trend = second_half_trend(hour)
    if trend is not None:
        slope, points, at_twice = trend
        end = hour[-1][0]
        lines.append(
            f"\nSecond half ({points} points from {end / 2:.0f} minutes): {100 * slope * 60:+.1f} points per 60 "
            f"minutes by least squares; that line puts {100 * at_twice:.1f} at {2 * end:.0f} minutes (an "
            "extrapolation, not a measurement)."
        )
    lines.append(
        "`mini` `fast` (6,000 steps, its schedule over 6,000 steps): "
        f"{', '.join(f'{100 * a:.1f} at {m:.0f} min' for m, a in reference)}."
    )
    return "\n".join(lines)


RAW = REPO / "experiments" / "hour-recipe" / "raw" / "hour"  # the Xeon's runs (bf16, AMX)
RAW_AMD = RAW.parent / "amd"  # the same stages again on an AMD EPYC without bf16 instructions (fp32)


def kept(raw: Path = RAW) -> str:
    """doc_tables' `hour-recipe` (and `hour-recipe-amd`): the tables of the kept raw files in `raw`, an
    `hour_cpu.sh` OUT folder as kept (its costs.json, when measured there, is the clock of the reference curve)."""
    import contextlib
    import io

    if not raw.is_dir():
        return "*Not measured yet.*"
    glue = [str(p) for p in sorted(raw.glob("glue-*/results.json"))]
    text = io.StringIO()
    with contextlib.redirect_stdout(text), contextlib.redirect_stderr(io.StringIO()):
        main([str(raw), *(a for p in glue for a in ("--glue", p))])
    lines = [f"**{line[3:]}**" if line.startswith("## ") else line for line in text.getvalue().splitlines()]
    return "\n".join(lines).replace(str(REPO) + "/", "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--glue", type=Path, action="append", default=[])
    ap.add_argument("--reference", type=Path, default=MINI_FAST, help="the mini fast curve (compare results.json)")
    ap.add_argument(
        "--costs",
        type=Path,
        help="the kept costs that put it on minutes (default: the clock the runs "
        "counted, as OUT/costs.json records it; else the lever search's kept costs)",
    )
    args = ap.parse_args(argv)
    args.costs = args.costs or clock_of(args.out)
    runs = {
        p.name: p
        for p in sorted((args.out / "runs").glob("seed-*"))
        if (p / "run.json").is_file() and read(p / "run.json").get("budget", {}).get("finished")
    }
    if not runs:  # run.json is written as a run starts; its budget, once the budget is spent
        raise SystemExit(f"{args.out}/runs has no finished seed (hour_cpu.sh OUT pretrain)")
    print("## Runs\n\n" + runs_table(list(runs.values())))
    finals = {method: doc for method in ("pll", "l2r") if (doc := scored(args.out / f"blimp-final-{method}.json"))}
    if finals:
        print("\n## BLiMP at the budget's end (PLL is the headline)\n\n" + blimp_table(finals))
    if doc := scored(args.out / "blimp-curve.json"):
        hour = hour_curve(doc, runs)
        print(
            f"\n## BLiMP by minutes of training ({doc['data']['pairs_per_paradigm'] or 'every'} pairs a paradigm)\n\n"
            + curve_table(hour, mini_fast_curve(args.reference, args.costs))
            + f"\n`mini` `fast`'s steps are put on minutes at the baseline costs of `{args.costs}`."
        )
    if args.glue:
        print(
            "\n## GLUE (pretrained − random init, paired by fine-tuning seed; a row names its encoder when there are "
            "several)\n"
        )
        downstream_table.main([str(p) for p in args.glue])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
