"""BLiMP of the compared runs (each kept checkpoint, or the final one), cached in each run folder, and the
controls: one random-init encoder per pretraining seed and the unigram model of the shards."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

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


def blimp_results(
    plan: list[PlannedRun],
    shards: Path,
    suite,
    cfg,
    out: Path,
    every_checkpoint: bool = False,
    note: Callable[[str], None] = lambda _: None,
    device=None,
) -> dict:
    """{run label: {accuracy, fields, paradigms, curve}} for every planned run (BLiMP at its final checkpoint;
    `curve`: at each kept one with `every_checkpoint`), plus `control_label(k)` for the random-init encoder of
    seed index k (seed k's uniform run, else its first, gives architecture, tokenizer and pretraining seed,
    as for GLUE) and "unigram" for the frequencies-only model of `shards`."""
    from ..atomic import write_json
    from ..evaluation.blimp.evaluate import Scorer
    from ..evaluation.blimp.models import control_targets, find_targets

    scorer = Scorer(suite, cfg, device)
    key = {
        "suite": suite.sha256,
        "pairs_per_paradigm": suite.pairs_per_paradigm,
        "method": cfg.method,
        "scorer": SCORER_VERSION,
    }
    results, finals = {}, {}
    for pr in plan:
        targets = sorted(find_targets([pr.path]), key=lambda t: t.step)
        if not every_checkpoint:
            targets = targets[-1:]
        cache_path = pr.path / CACHE
        cache = _cached(cache_path, key)
        curve = []
        for t in targets:
            if t.sha not in cache:
                entry = scorer.score(t)
                cache[t.sha] = _brief(entry)
                write_json(cache_path, {"key": key, "scores": cache})
                note(f"BLiMP {pr.label}@{t.step}: {100 * entry['accuracy']:.1f}% ({entry['seconds']:.0f} s)")
            curve.append(cache[t.sha] | {"step": t.step})
        results[pr.label] = {**curve[-1], "curve": [{"step": c["step"], "accuracy": c["accuracy"]} for c in curve]}
        finals[pr.label] = targets[-1]
    control_cache = out / "blimp-controls.json"
    cache = _cached(control_cache, key)
    for k in sorted({pr.index for pr in plan}):
        mine = [pr for pr in plan if pr.index == k]
        source = next((pr for pr in mine if split_name(pr.strategy) == ("uniform", None)), mine[0])
        controls, links, _ = control_targets(
            [finals[source.label]], shards, random=True, unigram=k == min(pr.index for pr in plan)
        )
        for ctl in controls:
            label = control_label(k) if ctl.init == "random" else UNIGRAM
            if ctl.sha not in cache:
                entry = scorer.score(ctl)
                cache[ctl.sha] = _brief(entry)
                write_json(control_cache, {"key": key, "scores": cache})
                note(f"BLiMP {label}: {100 * entry['accuracy']:.1f}% ({entry['seconds']:.0f} s)")
            results[label] = {**cache[ctl.sha], "init": ctl.init, "seed_index": k if ctl.init == "random" else None}
    return results


def blimp_controls(blimp: dict | None) -> dict:
    """{"random": {seed index: record}, "unigram": record or None} from `blimp_results`' answer."""
    blimp = blimp or {}
    return {
        "random": {rec["seed_index"]: rec for rec in blimp.values() if rec.get("init") == "random"},
        "unigram": blimp.get(UNIGRAM),
    }
