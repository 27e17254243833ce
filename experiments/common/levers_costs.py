"""The kept step costs of the lever arms: what each step counts under the modelled clock (experiments/hour-levers).

    python experiments/common/levers_costs.py reference KEPT/step-costs/costs.json    # "FULL SHORT" (exit 3: none yet)
    python experiments/common/levers_costs.py merge KEPT/step-costs/costs.json OUT/step-costs.json [--across-cpus]
    python experiments/common/levers_costs.py flags KEPT/step-costs/costs.json ARM    # the arm's --set flags
    python experiments/common/levers_costs.py check KEPT/step-costs/costs.json SERIES/baseline.json   # exit 1: not
    modelled
    python experiments/common/levers_costs.py table KEPT/step-costs/costs.json    # the costs and the steps 20 minutes
    buy

With `CLOCK=modelled` every run of the search counts each step its arm's cost (`train.step_seconds`,
`train.short_step_seconds`; train/budget.py) instead of the wall time it took, so an arm trained in one sitting is
comparable with a baseline trained in another. The costs come from `benchmarks/step_costs.py`: each arm's full and
short step as a ratio to the baseline's, each arm trained in lock-step with it. The first measurement pins
the baseline's costs (the reference); every later one is run with them pinned (`--reference`), so all arms'
costs are the same reference times their own measured ratio. `merge` adds a benchmark's arms to the kept file,
each with the measurement it came from (when, load, ratio range); an arm measured again is replaced, and the
replaced entry is kept under `superseded` (a series trained with the old costs stays explainable). An arm whose
costs were never measured has no flags: `flags` says so and exits 1, so the search cannot run it on a guess. Each
measurement records its CPU (model and bf16 instructions); one made on another CPU than the reference's is refused
unless `--across-cpus` (`merge`).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from mapnet_cli.atomic import write_json
from mapnet_cli.compare.costs import is_step_cost

KEPT = Path(__file__).resolve().parents[2] / "experiments" / "hour-levers" / "step-costs" / "costs.json"
SAME_STEP = ("lr-1e-3", "lr-4e-3", "one-cycle", "split-100-0-0", "batch-ramp")  # levers_cpu.sh's: the baseline's step
NONE_YET = 3  # `reference`'s exit status when nothing is kept yet (any other failure is 1)


def read_json(path: Path) -> dict:
    """A JSON object from `path`, or one line naming what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SystemExit(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: not a JSON object")
    return data


def load(path: Path) -> dict:
    if not path.is_file():
        return {}
    data = read_json(path)
    if not isinstance(data.get("arms"), dict) or "reference_seconds" not in data:
        raise SystemExit(f"{path}: not a kept step-costs file (no arms or reference_seconds)")
    return data


def positive(arm: str, entry: dict) -> tuple[float, float]:
    """An arm's two costs, refused unless both are positive numbers: a 0 would mean the wall clock."""
    costs = (entry.get("step_seconds"), entry.get("short_step_seconds"))
    if not all(is_step_cost(c) for c in costs):
        raise SystemExit(f"arm {arm}: step costs must be positive numbers (got {costs[0]!r}, {costs[1]!r})")
    return costs


def reference_cpu(kept: dict) -> str | None:
    """The CPU the kept reference's costs were measured on (None: not recorded, as before 2026-11-27 15:00)."""
    return kept["arms"].get(kept["reference"], {}).get("measured", {}).get("cpu")


def merge(kept: dict, bench: dict, across_cpus: bool = False) -> dict:
    """`bench` (a step_costs.py result) into `kept`; the first one pins the reference's costs.

    A ratio is a property of the CPU it was measured on (from an AMD EPYC to an Intel Xeon the 128-wide shapes'
    ratios to `mini` moved 14-26%, the other levers' 3-6%: `transfer`), so a benchmark made on another CPU than the
    kept reference's is refused unless `across_cpus`: then each of its arms is kept marked with the reference's
    CPU, and re-measuring kept arms beside it shows how far their ratios moved."""
    if kept and bench.get("cpu") != reference_cpu(kept) and not across_cpus:
        raise SystemExit(
            f"the kept reference's costs were measured on {reference_cpu(kept) or 'a CPU not recorded'}, "
            f"this benchmark on {bench.get('cpu') or 'a CPU not recorded'}: a ratio measured on one CPU is not "
            "another's; measure on the kept costs' CPU, or pass --across-cpus (ACROSS_CPUS=1 levers_cpu.sh) "
            "with kept arms measured again beside the new ones"
        )
    if kept:
        if bench["reference"] != kept["reference"] or bench["reference_seconds"] != kept["reference_seconds"]:
            raise SystemExit(
                f"the benchmark's reference ({bench['reference']}, {bench['reference_seconds']}) is not the kept "
                f"one ({kept['reference']}, {kept['reference_seconds']}): run it with --reference pinned"
            )
        out = {**kept, "arms": dict(kept["arms"]), "superseded": list(kept.get("superseded", []))}
    else:
        out = {
            "reference": bench["reference"],
            "reference_seconds": bench["reference_seconds"],
            "arms": {},
            "superseded": [],
        }
    source = {
        k: bench[k] for k in ("when", "load_before", "load_after", "cores", "omp_num_threads", "steps", "rounds_run")
    }
    source["cpu"] = bench.get("cpu")
    if kept and source["cpu"] != reference_cpu(kept):
        source["reference_cpu"] = reference_cpu(kept)  # across CPUs, said where the ratio is kept
    for name, arm in bench["arms"].items():
        positive(name, arm)
        if name == bench["reference"] and name in out["arms"]:
            # the reference's costs are pinned: re-measuring it only checks the ratios' base (1.0 by definition)
            continue
        if name in out["arms"]:
            out["superseded"].append({"arm": name, **out["arms"][name]})
        out["arms"][name] = {
            "step_seconds": arm["step_seconds"],
            "short_step_seconds": arm["short_step_seconds"],
            "ratio": arm["ratio"],
            "ratio_range": arm["ratio_range"],
            "measured": source,
        }
    return out


def flags(kept: dict, arm: str) -> list[str]:
    if arm not in kept.get("arms", {}):
        raise SystemExit(f"no kept step cost for arm {arm}: measure it first (levers_cpu.sh OUT costs {arm})")
    step, short = positive(arm, kept["arms"][arm])
    return ["--set", f"train.step_seconds={step}", "--set", f"train.short_step_seconds={short}"]


def series_problem(kept: dict, baseline: dict) -> str | None:
    """None when every run of a kept series' baseline (a compare results.json) counted the kept baseline costs."""
    ref = kept.get("arms", {}).get(kept.get("reference", ""), {})
    if not baseline.get("runs"):
        return "the kept baseline has no runs"
    for run in baseline["runs"]:
        b = run.get("budget") or {}
        if b.get("clock") != "modelled":
            return (
                f"the kept baseline's seed {run.get('seed')} ran on the {b.get('clock', 'wall')} clock: a modelled arm "
                "is compared only with a modelled baseline (unset BASELINE, run it here as a new series)"
            )
        if (b.get("step_seconds"), b.get("short_step_seconds")) != (
            ref.get("step_seconds"),
            ref.get("short_step_seconds"),
        ):
            return (
                f"the kept baseline counted {b.get('step_seconds')} / {b.get('short_step_seconds')} s a step, the kept "
                f"costs say {ref.get('step_seconds')} / {ref.get('short_step_seconds')}: not the same clock"
            )
    return None


def steps_bought(step: float, short: float, budget: float = 1200.0, short_fraction: float = 0.23) -> int:
    """The steps a budget buys on the modelled clock (train/budget.py): the warm-up's steps start before
    short_fraction * budget, whole steps then fill the budget (the last one crosses it)."""
    n_short = math.ceil(short_fraction * budget / short)
    return n_short + math.ceil((budget - n_short * short) / step)


def table(path: Path = KEPT) -> str:
    """doc_tables' `hour-levers-costs`: every kept arm's step costs, their ratio to the baseline's, what 20 minutes
    buy."""
    kept = load(path)
    if not kept:
        return "*Not measured yet*: `bash experiments/hour-levers/levers_cpu.sh runs/hour-levers costs ARM...`, alone."
    ref = kept["reference"]
    when = sorted({a["measured"]["when"] for a in kept["arms"].values()})
    span = "?" if not when else when[0] if len(when) == 1 else f"{when[0]} to {when[-1]}"
    cpus = sorted({a["measured"].get("cpu") or "a CPU not recorded" for a in kept["arms"].values()})
    lines = [
        f"Step costs on the modelled clock (`step-costs/costs.json`; measured {span} on a 2-core VM "
        f"({'; '.join(cpus)}), "
        f"alone): each arm "
        f"in lock-step with `{ref}`, the ratio's median over the rounds (min–max beside it); `{ref}`'s own costs "
        f"from its runs alone. A 20-minute budget with the fast recipe's 23% of 16-token pieces buys the steps in the "
        "last column (counted as `train/budget.py` counts a modelled clock's steps). "
        f"{', '.join(f'`{a}`' for a in SAME_STEP)} count `{ref}`'s "
        "costs (the same step; `batch-ramp` its share b / B of them), so a null check's row buys the baseline's steps.",
        "",
        "| arm | full step | × baseline (range) | short step | × baseline (range) | steps in 20 min |",
        "|---|---|---|---|---|---|",
    ]
    order = [ref] + sorted((n for n in kept["arms"] if n != ref), key=lambda n: kept["arms"][n]["step_seconds"])
    for name in order:
        a = kept["arms"][name]
        rf, rs = a["ratio_range"]["full"], a["ratio_range"]["short"]
        rng = lambda r, m, name=name: "–" if name == ref else f"{m:.3f} ({r[0]:.3f}–{r[1]:.3f})"
        lines.append(
            f"| {name}{' (null check)' if name in SAME_STEP else ''} | {a['step_seconds'] * 1e3:.0f} ms | "
            f"{rng(rf, a['ratio']['full'])} | {a['short_step_seconds'] * 1e3:.0f} ms | {rng(rs, a['ratio']['short'])} "
            "| "
            f"{steps_bought(*positive(name, kept['arms'][ref] if name in SAME_STEP else a)):,} |"
        )
    return "\n".join(lines)


OTHER_CPUS = KEPT.parent  # step-costs/CPU-DATE/: the same arms measured again on another machine (its own costs.json)


def transfer(kept_path: Path = KEPT, others: Path = OTHER_CPUS) -> str:
    """doc_tables' `hour-levers-cpu-transfer`: each arm's ratio to the baseline on the kept costs' CPU beside its
    ratio on every other CPU measured since (step-costs/*/costs.json, each pinned to its own baseline there): whether
    a ratio, and so an arm's place at equal time, carries from one machine to another."""
    kept = load(kept_path)
    folders = sorted(p.parent for p in others.glob("*/costs.json"))
    if not kept or not folders:
        return (
            "*Not measured yet*: `LEVERS_COSTS=OUT/costs.json bash experiments/hour-levers/levers_cpu.sh OUT "
            "costs ARM...`."
        )
    measured = {f.name: load(f / "costs.json") for f in folders}
    arms = [a for a in kept["arms"] if a != kept["reference"] and any(a in m["arms"] for m in measured.values())]
    cpu = lambda costs: reference_cpu(costs) or "not recorded"  # noqa: E731
    lines = [
        "Each arm's full-step (short-step) cost as a ratio to the baseline's beside it, the median of 3 lock-step "
        f"rounds: the kept costs' CPU ({cpu(kept)}) and "
        + "; ".join(f"`step-costs/{name}/` ({cpu(m)})" for name, m in measured.items())
        + ". `lr-1e-3` is the "
        "baseline's own computation: its distance from 1 is the method's noise on that machine.",
        "",
        "| arm | kept | " + " | ".join(measured) + " | change |",
        "|---|---|" + "---|" * len(measured) + "---|",
    ]
    for arm in arms:
        ratio = lambda costs, arm=arm: costs["arms"][arm]["ratio"]
        cells = [
            f"{ratio(m)['full']:.3f} ({ratio(m)['short']:.3f})" if arm in m["arms"] else "–" for m in measured.values()
        ]
        last = next(m for m in reversed(measured.values()) if arm in m["arms"])
        change = ratio(last)["full"] / ratio(kept)["full"] - 1
        lines.append(
            f"| {arm} | {ratio(kept)['full']:.3f} ({ratio(kept)['short']:.3f}) | {' | '.join(cells)} | {change:+.0%} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "reference":
        kept = load(Path(argv[1]))
        if not kept:
            return NONE_YET
        print(kept["reference_seconds"]["full"], kept["reference_seconds"]["short"])
        return 0
    if len(argv) in (3, 4) and argv[0] == "merge" and argv[3:] in ([], ["--across-cpus"]):
        path = Path(argv[1])
        merged = merge(load(path), read_json(Path(argv[2])), across_cpus=argv[3:] == ["--across-cpus"])
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, merged)
        print(f"{path}: {len(merged['arms'])} arms, reference {merged['reference']} {merged['reference_seconds']}")
        return 0
    if len(argv) == 3 and argv[0] == "flags":
        print(" ".join(flags(load(Path(argv[1])), argv[2])))
        return 0
    if len(argv) == 2 and argv[0] == "table":
        print(table(Path(argv[1])))
        return 0
    if len(argv) == 3 and argv[0] == "check":
        why = series_problem(load(Path(argv[1])), read_json(Path(argv[2])))
        if why:
            print(why, file=sys.stderr)
            return 1
        print("the kept baseline ran on the kept modelled clock: comparable")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
