"""BLiMP of the compared runs (each kept checkpoint, or the final one), cached in each run folder, and the
controls: one random-init encoder per pretraining seed and the unigram model of the shards."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..atomic import write_json
from ..evaluation.blimp import SCORER_VERSION  # part of every cache key: caches of another scorer are rescored
from .glue_scores import control_label
from .plan import PlannedRun, split_name

CACHE = "compare-blimp.json"
UNIGRAM = "unigram"


def _cached(path: Path, key: dict) -> dict:
    """The run folder's BLiMP cache ({weights sha: entry}) when it was made for `key`; else empty. A damaged or
    foreign cache is not trusted: its checkpoints are scored again."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        made_for = {"scorer": 1, **doc["key"]}
        return doc["scores"] if made_for == key and isinstance(doc.get("scores"), dict) else {}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _brief(entry: dict) -> dict:
    return {
        "step": entry["step"],
        "accuracy": entry["accuracy"],
        "fields": entry["fields"],
        "paradigms": {uid: p["accuracy"] for uid, p in entry["paradigms"].items()},
    }


@dataclass
class _Job:
    """One model to score: where its entry is cached, how it is named, and how a worker finds it again."""

    cache: Path
    target: object  # evaluation.blimp.models.Target
    label: str
    spec: dict


def blimp_results(
    plan: list[PlannedRun],
    shards: Path,
    suite,
    cfg,
    out: Path,
    every_checkpoint: bool = False,
    note: Callable[[str], None] = lambda _: None,
    device: str = "auto",
    spread=None,
) -> dict:
    """{run label: {accuracy, fields, paradigms, curve}} for every planned run (BLiMP at its final checkpoint;
    `curve`: at each kept one with `every_checkpoint`), plus `control_label(k)` for the random-init encoder of
    seed index k (seed k's uniform run, else its first, gives architecture, tokenizer and pretraining seed,
    as for GLUE) and "unigram" for the frequencies-only model of `shards`. `device`: cpu, cuda or auto, resolved
    where the models are scored. `spread`: the models not yet cached are scored as tasks of its engine (each on its
    worker's device); this process writes every cache."""
    from ..evaluation.blimp.models import control_targets, find_targets

    key = {
        "suite": suite.sha256,
        "pairs_per_paradigm": suite.pairs_per_paradigm,
        "method": cfg.method,
        "scorer": SCORER_VERSION,
    }
    control_cache = out / "blimp-controls.json"
    caches: dict[Path, dict] = {control_cache: _cached(control_cache, key)}
    jobs: list[_Job] = []
    targets_of, finals = {}, {}
    for pr in plan:
        targets = sorted(find_targets([pr.path]), key=lambda t: t.step)
        if not every_checkpoint:
            targets = targets[-1:]
        targets_of[pr.label], finals[pr.label] = targets, targets[-1]
        cache = caches.setdefault(pr.path / CACHE, _cached(pr.path / CACHE, key))
        for t in targets:
            if t.sha not in cache:
                jobs.append(_Job(pr.path / CACHE, t, f"{pr.label}@{t.step}", {"run": str(pr.path), "sha": t.sha}))
    controls_of = []  # (seed index, control target, label)
    first = min(pr.index for pr in plan)
    for k in sorted({pr.index for pr in plan}):
        mine = [pr for pr in plan if pr.index == k]
        source = next((pr for pr in mine if split_name(pr.strategy) == ("uniform", None)), mine[0])
        controls, _, _ = control_targets([finals[source.label]], shards, random=True, unigram=k == first)
        for ctl in controls:
            label = control_label(k) if ctl.init == "random" else UNIGRAM
            controls_of.append((k, ctl, label))
            if ctl.sha not in caches[control_cache]:
                spec = {
                    "run": str(source.path),
                    "source": finals[source.label].sha,
                    "sha": ctl.sha,
                    "shards": str(shards),
                    "unigram": k == first,
                }
                jobs.append(_Job(control_cache, ctl, label, spec))

    def scored(job: _Job, brief: dict, seconds: float) -> None:
        caches[job.cache][job.target.sha] = brief
        write_json(job.cache, {"key": key, "scores": caches[job.cache]})
        note(f"BLiMP {job.label}: {100 * brief['accuracy']:.1f}% ({seconds:.0f} s)")

    if spread is None:
        from ..evaluation.blimp.evaluate import Scorer
        from ..evaluation.device import evaluation_device

        scorer = Scorer(suite, cfg, evaluation_device(device))
        for job in jobs:
            entry = scorer.score(job.target)
            scored(job, _brief(entry), entry["seconds"])
    elif jobs:
        note(f"scoring {len(jobs)} models side by side ({spread.where()})")
        threads = spread.threads(len(jobs))
        specs = [{**job.spec, "suite": suite, "cfg": cfg, "device": device, "threads": threads} for job in jobs]
        with spread.engine(len(jobs)) as engine:
            for index, answer in engine.as_completed(blimp_task, specs, "blimp"):
                if index is not None:  # (None, None): a second passed with none finished
                    scored(jobs[index], *answer)

    results = {}
    for pr in plan:
        cache = caches[pr.path / CACHE]
        curve = [cache[t.sha] | {"step": t.step} for t in targets_of[pr.label]]
        results[pr.label] = {**curve[-1], "curve": [{"step": c["step"], "accuracy": c["accuracy"]} for c in curve]}
    for k, ctl, label in controls_of:
        entry = caches[control_cache][ctl.sha]
        results[label] = {**entry, "init": ctl.init, "seed_index": k if ctl.init == "random" else None}
    return results


# A worker scores many models of one suite: its sentences are tokenised once per text path (Scorer keeps them).
_SCORERS: dict = {}


def blimp_task(spec: dict) -> tuple[dict, float]:
    """On a worker: score one model (a run's checkpoint by weights sha, or a control of a run's final checkpoint);
    (its cache entry, seconds). A top-level function, as Dask pickles it."""
    from ..evaluation.blimp.evaluate import Scorer
    from ..evaluation.blimp.models import control_targets, find_targets
    from ..evaluation.device import evaluation_device
    from ..spread import set_task_threads

    set_task_threads(spec["threads"])
    targets = find_targets([Path(spec["run"])])
    if "source" in spec:
        source = [t for t in targets if t.sha == spec["source"]]
        targets = control_targets(source, Path(spec["shards"]), random=True, unigram=spec["unigram"])[0]
    target = next(t for t in targets if t.sha == spec["sha"])
    suite, cfg = spec["suite"], spec["cfg"]
    key = (suite.sha256, suite.pairs_per_paradigm, repr(cfg), spec["device"])
    if key not in _SCORERS:
        _SCORERS.clear()
        _SCORERS[key] = Scorer(suite, cfg, evaluation_device(spec["device"]))
    entry = _SCORERS[key].score(target)
    return _brief(entry), entry["seconds"]


def blimp_controls(blimp: dict | None) -> dict:
    """{"random": {seed index: record}, "unigram": record or None} from `blimp_results`' answer."""
    blimp = blimp or {}
    return {
        "random": {rec["seed_index"]: rec for rec in blimp.values() if rec.get("init") == "random"},
        "unigram": blimp.get(UNIGRAM),
    }
