"""experiments/gpu-h100/README.md's tables (RESULTS section 4: the first H100 session, 2026-11-24), from its kept
printouts and results: 4a's throughput and MFU and 4b's two step-cost tables from `gpu_check.log` (the
`bench_pretrain.py`, `bench_mapnet.py` and `bench_strategies.py` printouts it holds), 4c's comparison from
`arms-results.json` (a `mapnet compare` result).

Every figure is the printout's own (ratios as the benchmarks printed them, from their unrounded times) or the
results file's, never retyped.
"""

from __future__ import annotations

import re
from pathlib import Path

import bench_printout
import performance_tables
from compare_tables import load, markdown, strategy

REPO = Path(__file__).resolve().parents[2]
FOLDER = "experiments/gpu-h100"
LOG = f"{FOLDER}/gpu_check.log"
ARMS = f"{FOLDER}/arms-results.json"


def log_text() -> str:
    return (REPO / LOG).read_text(encoding="utf-8")


# ---------------------------------------------------------------- 4a: bench_pretrain.py at base
def throughput() -> str:
    """mapnet against Hugging Face at `base`, eager and compiled, with each arm's MFU: one row per printout."""
    body = [
        [
            f"{r['seq']} × {r['batch']}",
            r["mapnet"],
            r["hf"],
            f"{r['ratio']}×",
            r["mapnet_c"],
            r["hf_c"],
            f"{r['ratio_c']}×",
            f"{r['mfu_mapnet']}% / {r['mfu_mapnet_c']}%",
            f"{r['mfu_hf']}% / {r['mfu_hf_c']}%",
        ]
        for r in performance_tables.read_gpu_throughput()
    ]
    headings = [
        "tokens × batch",
        "mapnet (tok/s)",
        "HF",
        "mapnet / HF",
        "mapnet compiled",
        "HF compiled",
        "compiled / compiled",
        "MFU mapnet (eager / compiled)",
        "MFU HF (eager / compiled)",
    ]
    return markdown(headings, body)


# ---------------------------------------------------------------- 4b: bench_mapnet.py at base
MAPNET_COST = re.compile(
    r"batch (?P<batch>\d+) x (?P<tokens>\d+) tokens.*\n.*uniform ms.*\n"
    r"base\s+\S+\s+(?P<uniform>[\d.]+)\s+(?P<mapnet>[\d.]+)\s+(?P<ratio>[\d.]+)\s+(?P<stats>[\d.]+)\s+(?P<sratio>[\d.]+)"
)


def mapnet_cost() -> str:
    """The paper's MAP-Net step against uniform's, with and without the logging statistics (bench_mapnet.py)."""
    section = log_text().split("=== MAP-Net step cost, base", 1)
    if len(section) < 2:
        raise SystemExit(f"{LOG}: no MAP-Net step-cost section")
    body = [
        [
            f"{m['batch']} × {m['tokens']}",
            f"{m['uniform']} ms",
            f"{m['mapnet']} ms",
            f"{m['ratio']}×",
            f"{m['stats']} ms",
            f"{m['sratio']}×",
        ]
        for m in MAPNET_COST.finditer(section[1].split("\n===", 1)[0])
    ]
    if not body:
        raise SystemExit(f"{LOG}: the MAP-Net step-cost section has no rows")
    headings = ["batch × tokens", "uniform", "mapnet", "ratio", "mapnet + logging statistics", "ratio"]
    return markdown(headings, body)


STRATEGY_ROWS = [  # the arm as bench_strategies.py prints it -> the README's label
    ("uniform", "uniform"),
    ("uniform@0.3", "uniform@0.3"),
    ("frequency-ht", "frequency-ht"),
    ("stratified", "stratified"),
    ("mapnet", "mapnet (the paper's)"),
    ("mapnet-ht", "mapnet-ht (gradnorm target)"),
    ("mapnet-ht-1layer", "mapnet-ht, one-block proposal"),
]


def strategy_costs() -> str:
    """Every arm's step through the training loop's own step at `base` (bench_strategies.py, one run)."""
    runs = [run for run in bench_printout.read(REPO / LOG) if "base" in run.presets]
    if len(runs) != 1:
        raise SystemExit(f"{LOG}: {len(runs)} bench_strategies.py runs at base, not 1")
    arms = runs[0].presets["base"]
    body = [[label, f"{arms[arm][0]:.1f}", f"{arms[arm][1]:.2f}×"] for arm, label in STRATEGY_ROWS]
    return markdown(["arm", "ms/step", "vs uniform"], body)


# ---------------------------------------------------------------- 4c: the comparison at a GPU's budget
ARM_ROWS = [("uniform", "uniform"), ("uniform@0.3", "uniform@0.3"), ("mapnet (the paper's)", "mapnet"),
            ("mapnet-ht", "mapnet-ht")]  # fmt: skip
SETS = ["eval_loss", "eval_loss@books", "eval_loss@wiki"]


def final_per_seed(doc: dict, name: str, key: str) -> list[float]:
    """Each seed's held-out loss at its last evaluation, in seed order."""
    runs = sorted((r for r in doc["runs"] if r["strategy"] == name), key=lambda r: r["seed_index"])
    return [r["eval"][-1][key] for r in runs]


def paired_per_seed(doc: dict, name: str, key: str) -> str:
    if name == "uniform":
        return "–"
    deltas = [a - b for a, b in zip(final_per_seed(doc, name, key), final_per_seed(doc, "uniform", key), strict=True)]
    return " / ".join(f"{d:+.3f}".replace("-", "−") for d in deltas)


def to_target(doc: dict, name: str) -> str:
    reached = strategy(doc, name)["steps_to_target"]
    mean, seeds = reached.get("mean_curve"), reached.get("per_seed") or []
    if mean is None:
        return "not reached"
    last = strategy(doc, "uniform")["steps"][-1]
    if name == "uniform":
        return f"{mean:,.0f}"
    never = [str(i) for i, s in enumerate(seeds) if s is None]
    if never:
        return f"{mean:,.0f} (mean curve; seed {', '.join(never)} never)"
    return f"{mean:,.0f} ({mean / last:.2f}×)"


def arms() -> str:
    """4c: final held-out loss (mixed), each seed's difference to uniform on each held-out set, and the steps at
    which the mean curve reaches uniform's final loss."""
    doc = load(ARMS)
    body = [
        [
            label,
            f"{strategy(doc, name)['final']['eval_loss']['mean']:.3f}",
            *(paired_per_seed(doc, name, key) for key in SETS),
            to_target(doc, name),
        ]
        for label, name in ARM_ROWS
    ]
    headings = ["arm", "final loss (mean of 2)", "Δ vs uniform, seed 0 / seed 1", "Δ books", "Δ Wikipedia",
                "steps to uniform's final loss"]  # fmt: skip
    return markdown(headings, body)


TABLES = {
    "gpu-h100-throughput": throughput,
    "gpu-h100-mapnet-cost": mapnet_cost,
    "gpu-h100-strategy-costs": strategy_costs,
    "gpu-h100-arms": arms,
}

if __name__ == "__main__":
    for name, make in TABLES.items():
        print(f"<!-- table: {name} -->\n{make()}\n")
