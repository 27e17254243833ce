"""experiments/recipe-cpu/README.md's tables (RESULTS section 0: leaving the unigram plateau on a 2-core CPU), from
its kept raw files: the parity documents and logs of benchmarks/parity_hf.py (0a), the run folders of
experiments/recipe-cpu/recipe_cpu.sh with the idle step times of recipe_timing.sh (0b-0d, read with
experiments/recipe-cpu/recipe_table.py's own functions) and the quickstart runs (0e)."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from statistics import mean

from compare_tables import module_at, signed

REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "experiments" / "recipe-cpu"


recipe_table = module_at(RAW / "recipe_table.py")


# ------------------------------------------------------------------ 0a: mapnet beside BertForMaskedLM
PARITY = [RAW / "parity-post-s0.json", RAW / "parity-post-s1.json"]


def parity_curves(paths: list[Path] = PARITY) -> dict[tuple[str, int], dict[int, dict]]:
    """{(arm, seed): {step: point}} of parity.json files (parity_hf.py's `merged`: each (arm, seed) once)."""
    out: dict[tuple[str, int], dict[int, dict]] = {}
    for path in paths:
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"]:
            out.setdefault((run["arm"], int(run["seed"])), {p["step"]: p for p in run["curve"]})
    return out


def parity(paths: list[Path] = PARITY, name: str = "mixed") -> str:
    """Per evaluation step: each arm's loss (mean of the seeds), mapnet − HF per seed and its mean."""
    curves = parity_curves(paths)
    seeds = sorted({s for _, s in curves})
    steps = sorted(set.intersection(*(set(c) for c in curves.values())))
    lines = [
        f"| step | mapnet (mean of {len(seeds)}) | HF (mean of {len(seeds)}) | mapnet − HF, seed {seeds[0]} | "
        + " | ".join(f"seed {s}" for s in seeds[1:])
        + " | mean |",
        "|---|---|---|---|" + "---|" * len(seeds[1:]) + "---|",
    ]
    for step in steps:
        loss = {(a, s): curves[(a, s)][step][name]["loss"] for a, s in curves}
        diffs = [loss[("mapnet", s)] - loss[("hf", s)] for s in seeds]
        arms = {arm: mean(loss[(arm, s)] for s in seeds) for arm in ("mapnet", "hf")}
        lines.append(
            f"| {step:,} | {arms['mapnet']:.3f} | {arms['hf']:.3f} | "
            + " | ".join(signed(d) for d in diffs)
            + f" | {signed(mean(diffs))} |"
        )
    return "\n".join(lines)


SAME_INIT = RAW / "parity-post-same-table.txt"
SAME_ROW = re.compile(r"^\s*(\d+)\s+s0:\s+\S+\s+\S+\s+(\S+)\s+s1:\s+\S+\s+\S+\s+(\S+)\s*$")


def same_init(path: Path = SAME_INIT) -> str:
    """mapnet − HF per seed and set with paired initial weights, from parity_hf.py's printed table (its HF arm's
    parity.json was not kept; the per-seed differences are what the script printed at full precision)."""
    sets: dict[str, dict[int, tuple[float, float]]] = {}
    current = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if re.fullmatch(r"\w+", line.strip()):
            current = sets.setdefault(line.strip(), {})
        elif m := SAME_ROW.match(line):
            current[int(m[1])] = (float(m[2]), float(m[3]))
    names = [("mixed", "mixed"), ("books", "books"), ("wiki", "Wikipedia")]
    lines = [
        "| step | " + " | ".join(f"{label} s0 | s1" for _, label in names) + " |",
        "|---|" + "---|---|" * len(names),
    ]
    for step in sorted(sets["mixed"]):
        lines.append(f"| {step:,} | " + " | ".join(signed(d) for key, _ in names for d in sets[key][step]) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------ 0b-0d: runs of recipe_cpu.sh
def run(folder: str) -> dict:
    """recipe_table.py's summary of one run folder, its evaluations beside it."""
    r = recipe_table.read_run(RAW / folder)
    return recipe_table.summarise(r) | {"evals": r["evals"]}


def vs_unigram(s: dict) -> str:
    return " / ".join(signed(s["loss"][k]["vs_unigram"]) for k in ("main", "books", "wiki"))


def loss_at(s: dict, step: int, key: str = "eval_loss") -> float:
    return recipe_table.at_step(s["evals"], key, step)


def reach(s: dict, timing: dict, arm: str) -> tuple[str, str]:
    """(steps to H − 1, idle minutes to it): bold where reached, else the run's whole training time as a bound."""
    if s["steps_to_target"] is None:
        return "not reached", f"> {recipe_table.minutes(arm, s['steps'], timing)}"
    return f"**{s['steps_to_target']:,.0f}**", f"**{recipe_table.minutes(arm, s['steps_to_target'], timing)}**"


SETTINGS = [("fast", "fast"), ("hf", "HF settings"), ("paper", "paper")]


def seeds_table(size: str, arms: list[tuple[str, str]], at: int | None) -> str:
    """0b / 0d: each arm and seed, its steps and idle minutes to H − 1, its main loss (at `at` and final) and its final
    loss against each set's unigram level."""
    timing = json.loads((RAW / f"timing-{size}.json").read_text(encoding="utf-8"))
    runs = {(arm, seed): run(f"{size}/{arm}-s{seed}") for arm, _ in arms for seed in (0, 1)}
    target = next(iter(runs.values()))["target"]
    loss = "main loss at 1,000 / final" if at else "final main loss"
    lines = [
        f"| settings | seed | steps | steps to H − 1{f' = {target:.3f}' if at else ''} | idle minutes to H − 1 | "
        f"{loss} | final − unigram level: main / books / wiki |",
        "|---|---|---|---|---|---|---|",
    ]
    for (arm, seed), s in runs.items():
        steps, minutes = reach(s, timing, arm)
        main = s["loss"]["main"]
        losses = f"{loss_at(s, at):.3f} / {main['final']:.3f}" if at else f"{main['final']:.3f}"
        lines.append(
            f"| {dict(arms)[arm]} | {seed} | {s['steps']:,} | {steps} | {minutes} | {losses} | {vs_unigram(s)} |"
        )
    return "\n".join(lines)


# (label, run folder, bold: a difference the reading calls large at equal steps)
PARTS = [
    ("none (`fast-1000`)", "fast-1000", False),
    ("no sequence-length warm-up", "fast-no-warmup-pieces", True),
    ("post-LN", "fast-postln", False),
    ("dropout 0.1", "fast-dropout", True),
    ("no clipping", "fast-noclip", False),
    ("peak LR 1e-3", "fast-lr1e-3", True),
    ("peak LR 4e-3", "fast-lr4e-3", True),
    ("30% masking", "fast-mask0.3", True),
    ("batch 64, 500 steps (same tokens)", "fast-batch64", False),
]
AT = (500, 750, 1000)


def parts() -> str:
    """0c: `fast` with one part changed, each run paired with `fast-1000`. A run of fewer steps (batch 64, the same
    tokens) shows its evaluations at the same fractions of the run, with their steps."""
    runs = [(label, run(f"tiny/{folder}"), bold) for label, folder, bold in PARTS]
    base = runs[0][1]
    lines = [
        "| change from `fast` | main loss at 500 / 750 / 1,000 | − `fast` at 1,000 | steps to H − 1 | "
        "final − unigram level: main / books / wiki |",
        "|---|---|---|---|---|",
    ]
    for label, s, bold in runs:
        if s["steps"] == base["steps"]:
            losses = " / ".join(f"{loss_at(s, step):.3f}" for step in AT)
        else:
            scaled = [step * s["steps"] // base["steps"] for step in AT]
            losses = " / ".join(
                f"{loss_at(s, step):.3f} (step {step})" if any(e["step"] == step for e in s["evals"]) else "−"
                for step in scaled
            )
        if s is base:
            diff = "—"
            reached = f"not in {s['steps']:,}" if s["steps_to_target"] is None else f"{s['steps_to_target']:,.0f}"
        else:
            diff = signed(s["loss"]["main"]["final"] - base["loss"]["main"]["final"])
            diff = f"**{diff}**" if bold else diff
            reached = "not reached" if s["steps_to_target"] is None else f"{s['steps_to_target']:,.0f}"
        lines.append(f"| {label} | {losses} | {diff} | {reached} | {vs_unigram(s)} |")
    return "\n".join(lines)


# ------------------------------------------------------------------ 0e: the quickstart
QUICKSTART = RAW / "quickstart"
# (label, the seed-0 and seed-1 run folders (None: not run), bold)
DEMOS = [
    ("**now: 64 wide, 500 steps**", ("qs-h64", "qs-h64-s1"), True),
    ("previous: 128 wide, 300 steps", ("qs-final", "qs-final-s1"), False),
    ("earlier versions (paper settings, 128 wide, 300 steps)", ("qs-old", None), False),
]


def last_eval(folder: str) -> tuple[dict, dict]:
    records = [json.loads(x) for x in (QUICKSTART / folder / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return next(r for r in records if r["kind"] == "unigram"), [r for r in records if r["kind"] == "eval"][-1]


def wall(folder: str) -> float | None:
    """The wall time the quickstart's printout ends with (`30.50 s wall`), where it was kept."""
    out = QUICKSTART / folder / "quickstart.out"
    m = re.search(r"^([\d.]+) s wall$", out.read_text(encoding="utf-8"), re.M) if out.is_file() else None
    return float(m[1]) if m else None


def quickstart() -> str:
    """0e: the determined tokens' and the whole held-out loss at the last step, and the wall time where kept."""
    level = last_eval(DEMOS[0][1][0])[0]["eval_unigram"]
    lines = [
        f"| quickstart | determined, seed 0 | seed 1 | whole held-out loss (s0 / s1; unigram level {level:.3f}) | "
        "wall, 2 cores |",
        "|---|---|---|---|---|",
    ]
    for label, folders, bold in DEMOS:
        ends = [None if f is None else last_eval(f)[1] for f in folders]
        det = ["–" if e is None else f"{e['eval_loss/determined']:.3f}" for e in ends]
        det = [f"**{d}**" if bold and d != "–" else d for d in det]
        whole = " / ".join("–" if e is None else f"{e['eval_loss']:.3f}" for e in ends)
        walls = [None if f is None else wall(f) for f in folders]
        shown = " / ".join(f"{w:.1f} s" for w in walls if w is not None) or "–"
        lines.append(f"| {label} | {det[0]} | {det[1]} | {whole} | {shown} |")
    return "\n".join(lines)


TABLES = {
    "recipe-cpu-parity": parity,
    "recipe-cpu-parity-same-init": same_init,
    "recipe-cpu-tiny": partial(seeds_table, "tiny", SETTINGS, 1000),
    "recipe-cpu-parts": parts,
    "recipe-cpu-mini": partial(seeds_table, "mini", SETTINGS[:1], None),
    "recipe-cpu-quickstart": quickstart,
}
