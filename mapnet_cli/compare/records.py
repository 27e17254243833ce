"""What each finished run shows: its metrics curve, the hashes that make the comparison fair, and
(optionally) its gradient variance at every checkpoint."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from ..errors import MapnetError
from ..metrics_file import read_metrics, read_unigram
from .plan import SCHEME, PlannedRun, split_name


def tensors_sha256(state: dict) -> str:
    digest = hashlib.sha256()
    for key in sorted(state):
        digest.update(key.encode())
        digest.update(state[key].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def initial_weights_sha256(settings, vocab_size: int, pad_id: int) -> str:
    """The MLM model (encoder + head) exactly as `train.Run` builds it before step 0 (SOURCE's weights
    with model.init_from)."""
    import torch

    from ..model.bert import BertConfig
    from ..train import init_from

    cfg = BertConfig.from_settings(settings.model, vocab_size, pad_id)
    source = init_from.open_source(settings.model.init_from) if settings.model.init_from else None
    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG as found
        return tensors_sha256(init_from.start_model(cfg, settings.train.seed, source)[0].state_dict())


def data_order_sha256(settings, train_sequences: int) -> str:
    from ..train import DataOrder

    first = DataOrder(train_sequences, settings.train.seed).take(0, settings.train.batch_size)
    return hashlib.sha256(np.asarray(first, np.int64).tobytes()).hexdigest()


def budget_record(pr: PlannedRun) -> dict | None:
    """run.json's `budget` of a train.time_budget run (asked, spent, steps bought; `train.record`), None if absent."""
    path = pr.path / "run.json"
    return json.loads(path.read_text(encoding="utf-8")).get("budget") if path.is_file() else None


def precisions(pr: PlannedRun) -> list[str]:
    """The precisions the run's starts trained in (run.json's first start and its `resumes`, `train.record`):
    train.precision=bf16-native resolves per machine, so a run resumed elsewhere may have trained in both. Empty
    for a run recorded before mapnet recorded it."""
    path = pr.path / "run.json"
    if not path.is_file():
        return []
    info = json.loads(path.read_text(encoding="utf-8"))
    return sorted({start["precision"] for start in [info, *info.get("resumes", [])] if "precision" in start})


def final_step(pr: PlannedRun) -> int | None:
    """The step a run ends at: train.steps, or the one its time budget bought (None: not recorded)."""
    if not pr.settings.train.time_budget:
        return pr.settings.train.steps
    budget = budget_record(pr)
    return budget["steps"] if budget and budget["finished"] else None


def run_record(pr: PlannedRun, vocab_size: int, pad_id: int, train_sequences: int) -> dict:
    evals, trains = read_metrics(pr.path / pr.settings.logging.metrics_file)
    last = final_step(pr)
    if last is None:
        raise MapnetError(
            f"{pr.path} has not spent its train.time_budget ({pr.settings.train.time_budget}); "
            "rerun the comparison to finish it"
        )
    if not trains or trains[-1]["step"] != last:
        raise MapnetError(f"{pr.path} has no metrics line for its final step {last}")
    # elapsed counts training steps only (evaluation excluded); interpolated at the eval steps.
    t_steps, t_elapsed = [0] + [r["step"] for r in trains], [0.0] + [r["elapsed"] for r in trains]
    curve = [
        {
            "step": e["step"],
            "eval_loss": e["eval_loss"],
            "eval_accuracy": e["eval_accuracy"],
            **{k: e[k] for k in e if k.startswith(("eval_loss@", "eval_accuracy@"))},
            "elapsed": float(np.interp(e["step"], t_steps, t_elapsed)),
        }
        for e in evals
    ]
    shas = sorted({e["eval_sha256"] for e in evals})
    # train.extra_eval sets: one hash per named set, which must not change along the run either.
    names = sorted({k.partition("@")[2] for e in evals for k in e if k.startswith("eval_sha256@")})
    for e in evals:
        missing = [n for n in names if f"eval_sha256@{n}" not in e]
        if missing:
            raise MapnetError(
                f"{pr.path}: the evaluation at step {e['step']} lacks held-out set(s) {missing} "
                "(train.extra_eval changed during the run?)"
            )
    extra_shas = {n: sorted({e[f"eval_sha256@{n}"] for e in evals}) for n in names}
    return {
        "strategy": pr.strategy,
        "seed_index": pr.index,
        "seed": pr.settings.train.seed,
        "path": str(pr.path),
        "initial_weights_sha256": initial_weights_sha256(pr.settings, vocab_size, pad_id),
        "data_order_sha256": data_order_sha256(pr.settings, train_sequences),
        "eval_sha256": shas[0] if len(shas) == 1 else shas,
        "extra_eval_sha256": {name: v[0] if len(v) == 1 else v for name, v in extra_shas.items()},
        "eval": curve,
        "train": [{"step": r["step"], "loss": r["loss"], "elapsed": r["elapsed"]} for r in trains],
        "seconds_per_step": trains[-1]["elapsed"] / trains[-1]["step"],
        "precision": precisions(pr),
        **({"budget": budget_record(pr)} if pr.settings.train.time_budget else {}),
        "unigram": read_unigram(pr.path / pr.settings.logging.metrics_file),
        "settings": pr.settings.to_dict(),
    }


def variance_curve(pr: PlannedRun, shards: Path) -> dict[str, dict]:
    """A cheap decomposition (variance.snapshot_*) at each of the run's checkpoints, cached in the run
    folder by weights hash and variance settings: a rerun measures nothing twice."""
    from ..atomic import sha256_file, write_json
    from ..evaluation.variance.snapshot import variance_snapshot
    from ..evaluation.variance.target import load_target
    from ..model import checkpoint

    cache_path = pr.path / "compare-variance.json"
    wanted = pr.settings.to_dict()["variance"]
    cache = json.loads(cache_path.read_text(encoding="utf-8")) if cache_path.is_file() else {}
    if cache.get("variance") != wanted:
        cache = {"variance": wanted, "snapshots": {}}
    out = {}
    for step, ckpt in checkpoint.list_checkpoints(pr.path):
        sha = sha256_file(ckpt / checkpoint.WEIGHTS)
        hit = cache["snapshots"].get(str(step))
        if hit is None or hit["weights_sha256"] != sha:
            target = load_target(ckpt, shards)
            snap = variance_snapshot(target.model, target.proposal, target.reader, pr.settings, step)
            hit = cache["snapshots"][str(step)] = {"weights_sha256": sha, **snap}
            write_json(cache_path, cache)
        out[str(step)] = hit
    return out


def collect(
    plan: list[PlannedRun],
    shards: Path,
    reused: dict[str, bool],
    *,
    variance: bool = False,
    glue: dict | None = None,
    blimp: dict | None = None,
) -> list[dict]:
    """Every run's raw record (metrics, hashes, optional variance, GLUE and BLiMP)."""
    from ..data.shards import ShardReader

    s0 = plan[0].settings
    reader = ShardReader(shards, "train", verify=s0.shard.verify)
    runs = []
    for pr in plan:
        rec = run_record(pr, reader.vocab_size, reader.special_ids["pad"], len(reader))
        rec["reused"] = reused.get(pr.label, False)
        if variance and SCHEME[split_name(pr.strategy)[0]] is not None:  # unit masks: no scheme, nothing to show
            rec["variance"] = variance_curve(pr, shards)
        if glue is not None:
            rec["glue"] = glue[pr.label]
        if blimp is not None:
            rec["blimp"] = blimp[pr.label]
        runs.append(rec)
    return runs
