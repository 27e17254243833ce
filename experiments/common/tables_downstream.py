"""The downstream pages' tables, from the GLUE fine-tuning and probe documents kept beside them:
experiments/downstream-gpu/README.md (section 6b), experiments/downstream-tiny/README.md (B1),
experiments/downstream-mini/README.md (section 6) and experiments/downstream-protocol/README.md (B2).

Each run's score is its best epoch (downstream_table.read_runs); a margin is pretrained − random-init control on the
same fine-tuning seed, mean ± the 95% t-interval's half-width over fine-tuning seeds (mapnet_cli.intervals.mean_ci),
as experiments/common/downstream_table.py prints it, here at the page's precision.
"""

from __future__ import annotations

import json
import statistics
from functools import partial
from pathlib import Path

from compare_tables import signed
from downstream_table import read_runs

from mapnet_cli.intervals import mean_ci

REPO = Path(__file__).resolve().parents[2]
GPU = "experiments/downstream-gpu"
TINY = "experiments/downstream-tiny"
MINI = "experiments/downstream-mini"
PROTOCOL = "experiments/downstream-protocol"


def rate(lr: float) -> str:
    """A learning rate as the pages write it: 0.0003 -> `3e-4`."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


def paired(paths: list[str]) -> dict[tuple, dict]:
    """{(task, training examples, lr): the row's numbers}: per-seed scores of both arms (seeds both hold), the
    margins' mean and half-interval, the seed std of each arm, and the mean seconds per run."""
    by: dict[tuple, dict[str, dict[int, dict]]] = {}
    for run in read_runs([str(REPO / p) for p in paths]):
        arms = by.setdefault((run["task"], run.get("train_examples"), run["lr"]), {})
        seeds = arms.setdefault(run["init"], {})
        if run["seed"] in seeds:
            raise SystemExit(f"{run['task']} {run['init']} seed {run['seed']} is in two of {paths}")
        seeds[run["seed"]] = run
    out = {}
    for key, arms in by.items():
        pre, ran = arms.get("pretrained", {}), arms.get("random", {})
        seeds = sorted(set(pre) & set(ran))
        if not seeds:
            continue
        p, r = [pre[s]["score"] for s in seeds], [ran[s]["score"] for s in seeds]
        ci = mean_ci([a - b for a, b in zip(p, r)])
        out[key] = {
            "pretrained": p,
            "random": r,
            "mean": ci["mean"],
            "half": (ci["ci95"][1] - ci["ci95"][0]) / 2 if ci["ci95"] else float("nan"),
            "low": ci["ci95"][0] if ci["ci95"] else float("nan"),
            "high": ci["ci95"][1] if ci["ci95"] else float("nan"),
            "sd": (statistics.stdev(p), statistics.stdev(r)) if len(seeds) > 1 else (float("nan"),) * 2,
            "seconds": statistics.mean(run["seconds"] for a in (pre, ran) for run in a.values()),
        }
    return out


def margins(paths: list[str], tasks: list[str], decimals: int, labels: dict | None = None, seconds: bool = False):
    """The page's margin table: a row per task and rate (the tasks in `tasks`' order, rates ascending). The margin
    is bold, and `margin > 2 std?` says `no (negative)`, where the control is ahead with an interval that excludes
    zero; a margin ahead with an interval that excludes zero but not by two std says what two std is."""
    rows = paired(paths)
    labels = labels or {}
    head = (
        "| task | lr | pretrained (per seed) | random init (per seed) | margin, mean ± 95% | seed std (pretrained / "
        "control) | margin > 2 std? |" + (" s per run |" if seconds else "")
    )
    lines = [head, "|---|---|---|---|---|---|---|" + ("---|" if seconds else "")]
    for task, n, lr in sorted(rows, key=lambda k: (tasks.index(k[0]), k[2], -(k[1] or 0))):
        row = rows[(task, n, lr)]
        two_std = 2 * max(row["sd"])
        margin = f"{signed(row['mean'], decimals)} ± {row['half']:.{decimals}f}"
        if row["high"] < 0:
            margin, verdict = f"**{margin}**", "no (negative)"
        elif row["mean"] > two_std:
            verdict = "yes"
        elif row["low"] > 0:
            verdict = f"no (2 std = {two_std:.{decimals}f})"
        else:
            verdict = "no"
        cells = [
            labels.get(task, task),
            rate(lr),
            ", ".join(f"{s:.{decimals}f}" for s in row["pretrained"]),
            ", ".join(f"{s:.{decimals}f}" for s in row["random"]),
            margin,
            " / ".join(f"{s:.{decimals}f}" for s in row["sd"]),
            verdict,
        ]
        if seconds:
            cells.append(f"{row['seconds']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def doc(path: str) -> dict:
    return json.loads((REPO / path).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ section 6: the probe at every checkpoint
def probe_steps(path: str) -> str:
    """A probe document's dev score at each pretrained checkpoint and the random-init control, per pooling."""
    probe = doc(path)
    pre = sorted((c for c in probe["checkpoints"] if c["init"] == "pretrained"), key=lambda c: c["step"])
    ran = [c for c in probe["checkpoints"] if c["init"] == "random"]
    lines = [
        "| step | " + " | ".join(f"{c['step']:,}" for c in pre) + " | random init |",
        "|---|" + "---|" * (len(pre) + len(ran)),
    ]
    for pooling, name in (("mean", "mean"), ("cls", "`[CLS]`")):
        lines.append(f"| {name} | " + " | ".join(f"{c[pooling]['score']:.3f}" for c in [*pre, *ran]) + " |")
    return "\n".join(lines)


def finetune_steps(glue: str, probe: str) -> str:
    """The one-seed fine-tuning's dev score at each kept checkpoint and the control, and Spearman's ρ between it and
    the probe (per pooling) over the pretrained checkpoints (mapnet_cli.evaluation.probe.rank_correlation)."""
    from mapnet_cli.evaluation.probe import rank_correlation

    runs = read_runs([str(REPO / glue)])
    pre = sorted((r for r in runs if r["init"] == "pretrained"), key=lambda r: r["checkpoint"]["step"])
    ran = [r for r in runs if r["init"] == "random"]
    probe_doc, glue_doc = doc(probe), doc(glue)
    rho = {p: rank_correlation(probe_doc, glue_doc, p) for p in ("mean", "cls")}
    lines = [
        "| step | " + " | ".join(f"{r['checkpoint']['step']:,}" for r in pre) + " | random init | "
        "Spearman's ρ with the probe (mean / `[CLS]`) |",
        "|---|" + "---|" * (len(pre) + len(ran) + 1),
        "| fine-tuning (one seed) | "
        + " | ".join(f"{r['score']:.3f}" for r in [*pre, *ran])
        + f" | {signed(rho['mean']['spearman'], 2)} / {signed(rho['cls']['spearman'], 2)} "
        f"(n = {rho['mean']['n']}) |",
    ]
    return "\n".join(lines)


# ------------------------------------------------------------------ B2: the variants side by side
VARIANTS = [
    ("[CLS], no dropout (B1's)", "glue-cls-d0.json"),
    ("mean, no dropout", "glue-mean-d0.json"),
    ("mean, dropout 0.1", "glue-mean-d1.json"),
    ("[CLS], dropout 0.1", "glue-cls-d1.json"),
]
PROBES = {"SST-2": "probe-sst2.json", "CoLA": "probe-cola.json", "MRPC": "probe-mrpc.json"}


def variants() -> str:
    """Per variant and task: the mean best-epoch score of each arm (pretrained / control) and the paired margin; a
    task where every run of both arms scores 0 predicts one class. The last row: the linear probe's dev score,
    pretrained (mean pooling / [CLS]) vs random init (mean / [CLS])."""
    tasks = ["SST-2", "CoLA", "MRPC"]
    lines = [
        "| variant | SST-2: pretrained / control | margin | CoLA (MCC) | margin | MRPC (mean of F1, acc.) | margin |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, file in VARIANTS:
        rows = {task: row for (task, _, _), row in paired([f"{PROTOCOL}/{file}"]).items()}
        cells = [name]
        for task in tasks:
            row = rows[task]
            cells.append(f"{statistics.mean(row['pretrained']):.3f} / {statistics.mean(row['random']):.3f}")
            if not any(row["pretrained"]) and not any(row["random"]):
                cells.append("0 (one class)")
            else:
                cells.append(f"{signed(row['mean'], 3)} ± {row['half']:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    probes = {task: doc(f"{PROTOCOL}/{file}") for task, file in PROBES.items()}
    examples = {p["config"]["train_examples"] for p in probes.values()}
    cells = [
        f"linear probe on frozen features, mean / [CLS] ({', '.join(f'{n:,}' for n in sorted(examples))} examples)"
    ]
    for task in tasks:
        by = {c["init"]: c for c in probes[task]["checkpoints"]}
        pre, ran = by["pretrained"], by["random"]
        cells += [
            f"{pre['mean']['score']:.3f} / {pre['cls']['score']:.3f} vs {ran['mean']['score']:.3f} / "
            f"{ran['cls']['score']:.3f}",
            "",
        ]
    lines.append(("| " + " | ".join(cells) + " |").replace("|  |", "| |"))
    return "\n".join(lines)


TABLES = {
    "downstream-gpu-margins": partial(
        margins,
        [
            f"{GPU}/glue-SST-2-lr1e-4.json",
            f"{GPU}/glue-SST-2-lr3e-4.json",
            f"{GPU}/glue-CoLA.json",
            f"{GPU}/glue-MRPC.json",
        ],
        ["SST-2", "CoLA", "MRPC"],
        3,
    ),
    "downstream-tiny-margins": partial(
        margins,
        [f"{TINY}/glue-small-lr1e-4-5k-fast-s0.json", f"{TINY}/glue-small-lr3e-4-5k-fast-s0.json"],
        ["CoLA", "MRPC", "SST-2"],
        3,
        {"SST-2": "SST-2 (5k)"},
    ),
    "downstream-mini-margins": partial(
        margins,
        [
            f"{MINI}/glue-small-lr3e-4-CoLA.json",
            f"{MINI}/glue-small-lr3e-4-SST-2.json",
            f"{MINI}/glue-small-lr3e-4-SST-2-random-seeds01.json",
            f"{MINI}/glue-small-lr3e-4-SST-2-random-seed2.json",
        ],
        ["CoLA", "SST-2"],
        4,
        {"CoLA": "CoLA (MCC)", "SST-2": "SST-2 (accuracy)"},
        True,
    ),
    "downstream-mini-probe": partial(probe_steps, f"{MINI}/probe-mini-2000-sst2.json"),
    "downstream-mini-finetune-steps": partial(
        finetune_steps, f"{MINI}/glue-sst2-5k-every-checkpoint.json", f"{MINI}/probe-mini-2000-sst2.json"
    ),
    "downstream-protocol-variants": variants,
}
