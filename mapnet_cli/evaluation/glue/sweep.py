"""The paper's protocol: checkpoints x tasks x (batch size, learning rate) x seeds.

    refs = find_checkpoints([Path("runs/bert")])
    doc = run_sweep(refs, ["RTE", "SST-2"], Path("glue_data"), Path("out/glue"), settings.finetune)
    doc["summary"]["checkpoints"][0]["glue"]["score"]

Selection, as the paper states it: per (checkpoint, task) every configuration's mean run score over its seeds; the
best mean wins (ties: the first in grid order), reported as mean ± sample std over its seeds. A run's score is
its best epoch's dev score (`finetune.run_score = best_epoch`) or its last epoch's. Results live in one JSON file,
rewritten atomically after every finished run, with runs keyed by what changes their outcome, so an interrupted
sweep resumes with exactly the runs it lacks. `summary` adds 95% t-intervals over fine-tuning seeds and each
checkpoint's paired margin over its random-init control; these cover fine-tuning noise only, for one pretrained
checkpoint (whether a pretraining method helps needs pretraining seeds: `mapnet compare`).
The paper's words, the keys, MNLI's epoch and how the intervals pair: docs/internals.md#evaluationgluesweeppy.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...atomic import json_safe, make_dirs, write_json
from ...errors import MapnetError
from . import metrics as M
from .finetune import select_epoch, steps_per_epoch
from .pretrained import CheckpointRef
from .runs import Prepared, device_of, encode_task, finetune_task, prepare, run_one
from .tasks import TASKS, TaskData, load_tasks

SCHEMA = "mapnet.glue/1"
RESULTS = "results.json"


class Events:
    """What a sweep tells its caller; the CLI turns these into one progress bar and notes."""

    def start(self, total_steps: int, runs: int, done: int) -> None: ...
    def run_started(self, description: str) -> None: ...
    def advance(self, steps: int) -> None: ...
    def run_finished(self, key: str, record: dict) -> None: ...
    def note(self, text: str) -> None: ...


@dataclass(frozen=True)
class PlanItem:
    ref: CheckpointRef
    task: str
    batch_size: int
    lr: float
    seed: int
    key: str


# ---------------------------------------------------------------- the plan
def protocol(ft) -> dict:
    """The settings that change a run's outcome (and so belong in its key)."""
    return {
        "epochs": ft.epochs,
        "warmup_ratio": ft.warmup_ratio,
        "weight_decay": ft.weight_decay,
        "betas": list(ft.betas),
        "eps": ft.eps,
        "max_seq_len": ft.max_seq_len,
        "max_train": ft.max_train,
        "max_dev": ft.max_dev,
        "length_group": ft.length_group,
        "precision": ft.precision,
        "malformed_rows": ft.malformed_rows,
        # Only when set: the keys (and so the stored runs) of sweeps from before these settings stay valid.
        **({"dropout": ft.dropout} if ft.dropout != -1.0 else {}),
        **({"pooling": ft.pooling} if ft.pooling != "cls" else {}),
    }


def protocol_hash(ft) -> str:
    return hashlib.sha256(json.dumps(protocol(ft), sort_keys=True).encode()).hexdigest()[:8]


def run_key(ref: CheckpointRef, task: str, batch_size: int, lr: float, seed: int, proto: str) -> str:
    return f"{ref.key}/{task}/bs={batch_size}/lr={lr:g}/seed={seed}/p={proto}"


def make_plan(refs: list[CheckpointRef], tasks: list[str], ft) -> list[PlanItem]:
    proto = protocol_hash(ft)
    return [
        PlanItem(ref, task, bs, lr, seed, run_key(ref, task, bs, lr, seed, proto))
        for ref in refs
        for task in tasks
        for bs in ft.batch_sizes
        for lr in ft.learning_rates
        for seed in range(ft.seed, ft.seed + ft.seeds)
    ]


# ---------------------------------------------------------------- data
def data_report(data: dict[str, TaskData]) -> dict:
    rep = {}
    for name, d in data.items():
        rep[name] = {
            split.entry: {
                "path": str(split.path),
                "rows": len(split),
                "skipped_malformed": split.skipped,
                "skipped_lines": split.skipped_lines,
            }
            for split in [d.train, *d.dev]
        }
    return rep


# ---------------------------------------------------------------- results file


def load_results(path: Path) -> dict:
    if not path.is_file():
        return {"schema": SCHEMA, "runs": {}}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MapnetError(f"{path} is unreadable ({exc}); move it away to start a fresh sweep") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("runs"), dict):
        raise MapnetError(f"{path} is not a mapnet GLUE results file (schema {SCHEMA})")
    return doc


# ---------------------------------------------------------------- summary
def _mean_std(values: list[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


def _chosen(record: dict, rule: str) -> dict:
    epochs = record["epochs"]
    # Scores stored as null (non-finite) compare as -inf.
    fixed = [{**e, "score": e["score"] if e["score"] is not None else -math.inf} for e in epochs]
    return epochs[select_epoch(fixed, rule)]


def _ci(values: list[float]) -> dict:
    from ...intervals import mean_ci  # one definition of the interval for every table

    return mean_ci(values)


def _seed_stats(seeds: list[int], scores: list[float]) -> dict:
    return {**_ci(scores), "seeds": list(seeds), "scores": list(scores)}


def _paired(a: dict, b: dict) -> dict | None:
    """a - b over the seeds both ran ({seeds, scores} each): mean, t-interval, n, the differences."""
    mine = dict(zip(a["seeds"], a["scores"]))
    theirs = dict(zip(b["seeds"], b["scores"]))
    common = [s for s in mine if s in theirs]
    if not common:
        return None
    diffs = [mine[s] - theirs[s] for s in common]
    return {**_ci(diffs), "seeds": common, "differences": diffs}


def summarize(runs: dict, plan: list[PlanItem], rule: str, controls: dict[str, str] | None = None) -> dict:
    """Per checkpoint: every configuration's mean, the best one per task, entry scores and the GLUE score,
    each entry's and the GLUE score's t-interval over fine-tuning seeds, and (with `controls`,
    {checkpoint key: control key}) the paired margin over the random-init control."""
    by_ckpt: dict[str, dict] = {}
    for item in plan:
        ck = by_ckpt.setdefault(item.ref.key, {"ref": item.ref, "tasks": {}})
        configs = ck["tasks"].setdefault(item.task, {})
        cfg = configs.setdefault((item.batch_size, item.lr), {"planned": 0, "records": [], "seeds": []})
        cfg["planned"] += 1
        if item.key in runs:
            cfg["records"].append(runs[item.key])
            cfg["seeds"].append(item.seed)

    checkpoints = []
    for ck in by_ckpt.values():
        ref = ck["ref"]
        tasks_out, entry_scores, stats = {}, {}, {}
        for task, configs in ck["tasks"].items():
            rows = []
            for (bs, lr), cfg in configs.items():
                done = cfg["records"]
                row = {"batch_size": bs, "lr": lr, "seeds_done": len(done), "seeds_planned": cfg["planned"]}
                if done:
                    chosen = [_chosen(r, rule) for r in done]
                    row["score"], row["score_std"] = _mean_std(
                        [c["score"] if c["score"] is not None else 0.0 for c in chosen]
                    )
                    row["epochs"] = [c["epoch"] for c in chosen]
                    row["seeds"] = list(cfg["seeds"])
                    row["entries"] = {}
                    for entry in TASKS[task].entries:
                        e_scores = [c["entries"][entry]["score"] or 0.0 for c in chosen]
                        m, s = _mean_std(e_scores)
                        row["entries"][entry] = {
                            "score": m,
                            "score_std": s,
                            "ci95": _ci(e_scores)["ci95"],
                            "seed_scores": e_scores,
                            "metrics": {
                                name: dict(
                                    zip(
                                        ("mean", "std"),
                                        _mean_std([c["entries"][entry]["metrics"][name] or 0.0 for c in chosen]),
                                    )
                                )
                                for name in TASKS[task].metrics
                            },
                        }
                rows.append(row)
            scored = [r for r in rows if "score" in r]
            best = max(scored, key=lambda r: r["score"]) if scored else None  # max keeps the first of equals
            tasks_out[task] = {
                "configs": rows,
                "best": best,
                "complete": all(r["seeds_done"] == r["seeds_planned"] for r in rows),
            }
            if best is not None:
                for entry, e in best["entries"].items():
                    entry_scores[entry] = e["score"]
                    stats[entry] = _seed_stats(best["seeds"], e["seed_scores"])
        score, used = M.glue_score(entry_scores)
        # The GLUE score per fine-tuning seed: the mean over entries of that seed's scores (seeds every entry ran).
        per_seed = [dict(zip(stats[e]["seeds"], stats[e]["scores"])) for e in used]
        glue_seeds = [s for s in (stats[used[0]]["seeds"] if used else []) if all(s in d for d in per_seed)]
        if glue_seeds:
            stats["GLUE"] = _seed_stats(glue_seeds, [float(np.mean([d[s] for d in per_seed])) for s in glue_seeds])
        checkpoints.append(
            {
                "checkpoint": ref.key,
                "run": ref.run,
                "step": ref.step,
                "path": str(ref.path),
                "sha256": ref.sha,
                "init": ref.init,
                "tasks": tasks_out,
                "entries": entry_scores,
                "glue": {
                    "score": score if used else None,
                    "entries": used,
                    "of": len(M.SCORE_ENTRIES),
                    "ci95": stats["GLUE"]["ci95"] if "GLUE" in stats else None,
                },
                "stats": stats,
            }
        )
    by_key = {ck["checkpoint"]: ck for ck in checkpoints}
    for ck in checkpoints:
        control = by_key.get((controls or {}).get(ck["checkpoint"]))
        if control is None:
            continue
        margin = {
            entry: _paired(st, control["stats"][entry])
            for entry, st in ck["stats"].items()
            if entry in control["stats"]
        }
        ck["margin"] = {
            "control": control["checkpoint"],
            "control_run": control["run"],
            "pairing": "fine-tuning seed",
            "entries": {e: m for e, m in margin.items() if m is not None},
        }
    return {"run_score": rule, "checkpoints": checkpoints}


# ---------------------------------------------------------------- the sweep
def run_sweep(
    refs: list[CheckpointRef],
    tasks: list[str],
    glue_dir: Path,
    out_dir: Path,
    ft,
    events: Events | None = None,
    controls: dict[str, str] | None = None,
    preset: str | None = None,
    spread=None,
) -> dict:
    """Run every planned run that the results file lacks; returns the results document.

    `refs` may hold random-init controls (`pretrained.with_controls`); `controls` maps a checkpoint's
    key to its control's, for the margins; `preset` is the protocol's name, recorded. `spread` (a
    `spread.Spread`): the runs as tasks of its Dask engine, side by side; this process alone writes results.json.
    """
    events = events or Events()
    # finetune.device = cuda without one is refused before anything is written; a cluster's workers bring theirs.
    dev, precision = device_of(ft) if spread is None or spread.gpus else (None, None)
    out_dir = Path(out_dir)
    path = out_dir / RESULTS
    doc = load_results(path)
    data = load_tasks(tasks, glue_dir, ft)  # every input problem surfaces before anything is written
    make_dirs(out_dir)
    for name, d in data.items():
        for split in [d.train, *d.dev]:
            if split.skipped:
                more = ", ..." if split.skipped > len(split.skipped_lines) else ""
                events.note(
                    f"{name} {split.path.name}: skipped {split.skipped} malformed rows "
                    f"(lines {', '.join(map(str, split.skipped_lines))}{more})"
                )
    plan = make_plan(refs, tasks, ft)
    pending = [p for p in plan if p.key not in doc["runs"]]
    total = sum(ft.epochs * steps_per_epoch(len(data[p.task].train), p.batch_size) for p in pending)

    doc["protocol"] = {
        **protocol(ft),
        "batch_sizes": list(ft.batch_sizes),
        "learning_rates": list(ft.learning_rates),
        "seeds": ft.seeds,
        "first_seed": ft.seed,
        "run_score": ft.run_score,
        "hash": protocol_hash(ft),
        "preset": preset or "paper",
    }
    doc["data"] = data_report(data)
    doc["tasks"] = tasks
    doc["init"] = sorted({ref.init for ref in refs})
    doc["controls"] = dict(controls or {})

    def save() -> None:
        # The plan's order whatever order the runs finished in, so a sweep's file does not depend on its engine.
        order = [p.key for p in plan if p.key in doc["runs"]]
        doc["runs"] = {**{k: doc["runs"][k] for k in order}, **doc["runs"]}
        doc["summary"] = summarize(doc["runs"], plan, ft.run_score, controls)
        write_json(path, json_safe(doc))

    def finished(item: PlanItem, record: dict) -> None:
        doc["runs"][item.key] = record
        save()
        events.run_finished(item.key, record)

    # Written once a run has finished, not before: a sweep that fails first leaves no results.json
    # that looks like a result (a summary whose every score is missing).
    if doc["runs"]:
        save()
    else:
        doc["summary"] = summarize(doc["runs"], plan, ft.run_score, controls)
    events.start(total, len(pending), len(plan) - len(pending))

    # Each checkpoint's texts encoded here first, once per task: the notes come from this process, and the cache
    # (out_dir/cache) is then what the workers read.
    encoded: dict[tuple[str, str], tuple] = {}
    prepared: dict[str, Prepared] = {}
    for item in pending:
        if item.ref.key not in prepared:
            prepared = {item.ref.key: prepare(item.ref, ft, out_dir)}  # one checkpoint's weights at a time
            encoded = {}
        if item.task not in {task for _, task in encoded}:
            events.run_started(f"{item.ref.run}@{item.ref.step} {item.task}: encoding")
            train, devs, cut = encode_task(prepared[item.ref.key], data[item.task])
            if cut:
                events.note(f"{item.task}: {cut} examples truncated to {prepared[item.ref.key].max_len} tokens")
            encoded[(item.ref.key, item.task)] = (train, devs)
        if spread is None:
            train, devs = encoded[(item.ref.key, item.task)]
            events.run_started(
                f"{item.ref.run}@{item.ref.step} {item.task} bs={item.batch_size} lr={item.lr:g} seed={item.seed}"
            )
            finished(item, run_one(item, prepared[item.ref.key], train, devs, ft, dev, precision, events.advance))
    if spread is not None and pending:
        del prepared, encoded  # the coordinator's copies: the workers load their own
        _run_side_by_side(pending, spread, ft, glue_dir, out_dir, events, finished)
    return doc


def _run_side_by_side(pending: list[PlanItem], spread, ft, glue_dir: Path, out_dir: Path, events, finished) -> None:
    """Every pending run as a task of `spread`'s engine (runs.finetune_task); `finished` with each record, here."""
    threads = spread.threads(len(pending))
    specs = [
        {"item": item, "ft": ft, "glue_dir": str(glue_dir), "out_dir": str(out_dir), "threads": threads}
        for item in pending
    ]
    events.note(f"{len(pending)} fine-tuning runs side by side ({spread.where()})")
    with spread.engine(len(pending)) as engine:
        for index, record in engine.as_completed(finetune_task, specs, "finetune-glue"):
            if index is not None:
                finished(pending[index], record)
                events.advance(record["steps"])
