"""Does MAP-Net make pretraining cheaper? Strategies x seeds, same start, same data, one table.

    mapnet compare shards/ --out runs/compare --preset tiny --steps 300 --seeds 3
    mapnet compare shards/ --out runs/warm --init-from runs/uniform-long --strategies uniform,mapnet   # warm start
    mapnet compare shards/ --out runs/cmp --strategies uniform,mapnet,mapnet-noweight --variance \
        --glue-tasks cola,sst2,mrpc --glue-data glue_data

Library entry points: `plan_runs` (settings of every strategy x seed), `run_all`
(train what is missing), `collect` (every raw number + `aggregate`), `table_rows`.

Fairness. For seed index k every strategy trains with train.seed = base + k: the
same initial encoder (MAP-Net is built after it, see `train.Run`), the same data
order and the same dropout streams; only the masks differ. The results record the
hashes that show it (initial weights, first batch, evaluation set) and the step-0
held-out loss, which must be identical across strategies of a seed.

Checkpoints. Every run checkpoints at its evaluation steps (train.checkpoint_every
= train.eval_every, all of them kept) so the gradient variance can be measured post
hoc at each of them. A run whose final checkpoint exists is reused; one that stopped
after a checkpoint is resumed; one with none is started again.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from .. import settings as settings_mod
from ..errors import MapnetError
from ..metrics_file import read_metrics
from ..intervals import mean_ci, t_quantile_975

SCHEMA = "mapnet.compare/1"
RESULTS = "results.json"

_PAPER = {"strategy": "mapnet", "importance": "clipped", "explore_start": 1.0, "explore_end": 0.33,
          "proposal_target": "loss", "mix_uniform": 0.0}
# The principled arms: per-position Horvitz-Thompson weights over systematic PPS masks, a per-token
# mixture with uniform (alpha = 0.5: every weight <= 2) instead of the per-sequence exploration coin.
_HT = {"strategy": "mapnet", "importance": "ht", "mix_uniform": 0.5, "explore_start": 0.0, "explore_end": 0.0}
# Each ablation is the paper's MAP-Net with one thing changed.
STRATEGIES = {
    "uniform": {"strategy": "uniform"},
    "mapnet": _PAPER,
    "mapnet-noweight": {**_PAPER, "importance": "none"},
    "mapnet-unclipped": {**_PAPER, "importance": "unclipped"},
    "mapnet-noexplore": {**_PAPER, "explore_start": 0.0, "explore_end": 0.0},
    # The paper's exploration schedule is 1M steps long; a short run compresses it ~1000x. Here it
    # is set to 10x the run (train.steps), so the run ends at ~93% uniform masking (a fairness check).
    "mapnet-uncompressed": {**_PAPER, "explore_steps": "10x"},
    "mapnet-ht": {**_HT, "proposal_target": "gradnorm"},
    "mapnet-ht-loss": {**_HT, "proposal_target": "loss"},
    "mapnet-ht-learnability": {**_HT, "proposal_target": "learnability"},
    "stratified": {"strategy": "stratified"},
    "frequency-ht": {"strategy": "frequency", "mix_uniform": 0.5},
    # The no-network unit schemes people use (word_masking.py): unweighted, the uniform token budget.
    "whole-word": {"strategy": "whole-word"},
    "span": {"strategy": "span"},
    "pmi": {"strategy": "pmi"},
}
# The variance-decomposition scheme that matches what each strategy trains with.
SCHEME = {"uniform": "uniform", "mapnet": "mapnet_clipped", "mapnet-noweight": "mapnet_unweighted",
          "mapnet-unclipped": "mapnet_unclipped", "mapnet-noexplore": "mapnet_clipped",
          "mapnet-uncompressed": "mapnet_clipped", "mapnet-ht": "ht", "mapnet-ht-loss": "ht",
          "mapnet-ht-learnability": "ht", "stratified": "stratified", "frequency-ht": "frequency",
          # Unit masks are not a variance scheme yet: their arms show no variance curve (uniform is still measured).
          "whole-word": None, "span": None, "pmi": None}


def split_name(name: str) -> tuple[str, float | None]:
    """"uniform@0.4" -> ("uniform", 0.4): any strategy at another masking rate (masking.mask_prob)."""
    base, at, rate = name.partition("@")
    if not at:
        return base, None
    try:
        value = float(rate)
    except ValueError:
        raise MapnetError(f"strategy {name!r}: the masking rate after @ must be a number, e.g. uniform@0.3") from None
    if not 0.0 < value < 1.0:
        raise MapnetError(f"strategy {name!r}: the masking rate must be in (0, 1)")
    return base, value


def strategy_masking(name: str, steps: int) -> dict:
    """The masking settings strategy `name` (optionally NAME@RATE) trains with, for a run of `steps` steps."""
    base, rate = split_name(name)
    values = dict(STRATEGIES[base])
    if values.get("explore_steps") == "10x":
        values["explore_steps"] = 10 * steps
    if rate is not None:
        values["mask_prob"] = rate
    return values


# ---------------------------------------------------------------- the plan
@dataclass(frozen=True)
class PlannedRun:
    strategy: str
    index: int  # seed index k: train.seed = base seed + k
    settings: settings_mod.Settings
    path: Path

    @property
    def label(self) -> str:
        return f"{self.strategy}/seed-{self.index}"


def eval_steps(train) -> list[int]:
    """The steps `train.Run` evaluates at: 0, every eval_every, and the last."""
    every = range(train.eval_every, train.steps + 1, train.eval_every) if train.eval_every else []
    return sorted({0, *every, train.steps})


def parse_strategies(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if split_name(s)[0] not in STRATEGIES]
    if unknown or not names:
        raise MapnetError(f"unknown strategies {unknown or [text]} (choose from {', '.join(STRATEGIES)}; "
                          "NAME@RATE sets the masking rate, e.g. uniform@0.3)")
    return list(dict.fromkeys(names))


def plan_runs(base: settings_mod.Settings, strategies: list[str], seeds: int, out: Path) -> list[PlannedRun]:
    """One run per strategy x seed index, in the order they are trained (seed-major, so a stopped
    comparison already holds complete seeds)."""
    if seeds < 1:
        raise MapnetError(f"--seeds must be >= 1 (got {seeds})")
    t = base.train
    kept = [s for s in eval_steps(t) if s > 0]
    defaults = settings_mod.MaskingSettings()
    out_runs: list[PlannedRun] = []
    unused: dict[str, str] | None = None  # strategy-specific keys given that no arm uses
    for k in range(seeds):
        for name in strategies:
            updates = {"masking": strategy_masking(name, t.steps),
                       "train": {"seed": t.seed + k, "checkpoint_every": t.eval_every, "keep_steps": kept}}
            s = settings_mod.apply(base, updates, f"compare strategy {name}")
            # A strategy-specific key (--set masking.span_p=0.3) goes to the arms that use it; the others
            # keep its default, as their own `pretrain` would need.
            ignored = s.masking.ignored_keys()
            unused = dict(ignored) if unused is None else {key: w for key, w in unused.items() if key in ignored}
            s = replace(s, masking=replace(s.masking, **{key: getattr(defaults, key) for key in ignored}))
            if s.problems():
                raise MapnetError(f"invalid settings for strategy {name}: " + "; ".join(s.problems()))
            out_runs.append(PlannedRun(name, k, s, Path(out) / "runs" / name / f"seed-{k}"))
    if unused:
        raise MapnetError("; ".join(f"masking.{key} = {getattr(base.masking, key)!r} only applies with {where}, "
                                    "and no compared strategy uses it" for key, where in unused.items()))
    return out_runs


# ---------------------------------------------------------------- training
def _pretraining_part(values: dict) -> dict:
    """The settings a finished run's outcome depends on: fine-tuning and variance are post hoc, progress is display."""
    out = {k: v for k, v in values.items() if k not in ("finetune", "variance")}
    # Only these logging keys change what a run records; the rest (progress, TensorBoard, W&B) is display.
    out["logging"] = {k: v for k, v in out.get("logging", {}).items() if k in ("log_every", "metrics_file")}
    return out


def _normalised(recorded: dict, path: Path) -> dict:
    """A run's recorded settings with the defaults of settings added since it was written, so a
    finished run is not refused only because mapnet grew a setting. Evaluation masks were drawn at
    masking.mask_prob before train.eval_mask_prob existed."""
    recorded.setdefault("train", {}).setdefault("eval_mask_prob", recorded.get("masking", {}).get("mask_prob", 0.15))
    return settings_mod.from_dict(recorded, str(path / "settings.toml")).to_dict()


def run_all(plan: list[PlannedRun], shards: Path, train_fn: Callable[[PlannedRun, bool], None],
            note: Callable[[str], None] = lambda _: None) -> dict[str, bool]:
    """Train every run that lacks its final checkpoint; returns {label: reused}."""
    from .. import checkpoint  # torch-heavy: only when the command runs, not for `mapnet --help`

    reused = {}
    for pr in plan:
        done = dict(checkpoint.list_checkpoints(pr.path)) if pr.path.is_dir() else {}
        if done:
            recorded = _normalised(tomllib.loads((pr.path / "settings.toml").read_text(encoding="utf-8")), pr.path)
            if _pretraining_part(recorded) != _pretraining_part(pr.settings.to_dict()):
                raise MapnetError(f"{pr.path} was trained with other settings than this comparison asks for; "
                                  "choose another --out or remove that run")
        elif pr.path.exists():
            shutil.rmtree(pr.path)  # never reached a checkpoint: nothing worth keeping, and stale metrics lines
        reused[pr.label] = pr.settings.train.steps in done
        if reused[pr.label]:
            note(f"reusing {pr.label} ({pr.path})")
            continue
        note(f"{'resuming' if done else 'training'} {pr.label} -> {pr.path}")
        train_fn(pr, bool(done))
    return reused


# ---------------------------------------------------------------- what each run shows
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

    from .. import init_from
    from ..model import BertConfig

    cfg = BertConfig.from_settings(settings.model, vocab_size, pad_id)
    source = init_from.open_source(settings.model.init_from) if settings.model.init_from else None
    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG as found
        return tensors_sha256(init_from.start_model(cfg, settings.train.seed, source)[0].state_dict())


def data_order_sha256(settings, train_sequences: int) -> str:
    from ..train import DataOrder

    first = DataOrder(train_sequences, settings.train.seed).take(0, settings.train.batch_size)
    return hashlib.sha256(np.asarray(first, np.int64).tobytes()).hexdigest()


def run_record(pr: PlannedRun, vocab_size: int, pad_id: int, train_sequences: int) -> dict:
    evals, trains = read_metrics(pr.path / pr.settings.logging.metrics_file)
    if not trains or trains[-1]["step"] != pr.settings.train.steps:
        raise MapnetError(f"{pr.path} has no metrics line for its final step {pr.settings.train.steps}")
    # elapsed counts training steps only (evaluation excluded); interpolated at the eval steps.
    t_steps, t_elapsed = [0] + [r["step"] for r in trains], [0.0] + [r["elapsed"] for r in trains]
    curve = [{"step": e["step"], "eval_loss": e["eval_loss"], "eval_accuracy": e["eval_accuracy"],
              **{k: e[k] for k in e if k.startswith(("eval_loss@", "eval_accuracy@"))},
              "elapsed": float(np.interp(e["step"], t_steps, t_elapsed))} for e in evals]
    shas = sorted({e["eval_sha256"] for e in evals})
    # train.extra_eval sets: one hash per named set, which must not change along the run either.
    names = sorted({k.partition("@")[2] for e in evals for k in e if k.startswith("eval_sha256@")})
    for e in evals:
        missing = [n for n in names if f"eval_sha256@{n}" not in e]
        if missing:
            raise MapnetError(f"{pr.path}: the evaluation at step {e['step']} lacks held-out set(s) {missing} "
                              "(train.extra_eval changed during the run?)")
    extra_shas = {n: sorted({e[f"eval_sha256@{n}"] for e in evals}) for n in names}
    return {
        "strategy": pr.strategy, "seed_index": pr.index, "seed": pr.settings.train.seed, "path": str(pr.path),
        "initial_weights_sha256": initial_weights_sha256(pr.settings, vocab_size, pad_id),
        "data_order_sha256": data_order_sha256(pr.settings, train_sequences),
        "eval_sha256": shas[0] if len(shas) == 1 else shas,
        "extra_eval_sha256": {name: v[0] if len(v) == 1 else v for name, v in extra_shas.items()},
        "eval": curve, "train": [{"step": r["step"], "loss": r["loss"], "elapsed": r["elapsed"]} for r in trains],
        "seconds_per_step": trains[-1]["elapsed"] / trains[-1]["step"],
        "settings": pr.settings.to_dict(),
    }


def variance_curve(pr: PlannedRun, shards: Path) -> dict[str, dict]:
    """A cheap decomposition (variance.snapshot_*) at each of the run's checkpoints, cached in the run
    folder by weights hash and variance settings: a rerun measures nothing twice."""
    from .. import checkpoint
    from ..atomic import sha256_file, write_json
    from ..variance.measure import load_target, variance_snapshot

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


def control_label(seed_index: int) -> str:
    """The GLUE random-init control of pretraining seed index k (a row of the tables, a key of `glue_results`)."""
    return f"random-init/seed-{seed_index}"


def glue_results(plan: list[PlannedRun], tasks: list[str], glue_data: Path, out: Path, ft, events=None,
                 every_checkpoint: bool = False, preset: str | None = None) -> dict:
    """The GLUE sweep (settings.finetune) on every run's final checkpoint, or on all its kept
    checkpoints (`every_checkpoint`: a GLUE-vs-step curve); {label: {entries, score, curve}}.

    Plus one random-init control per pretraining seed index k, under `control_label(k)`: seed k's
    uniform run (else its first strategy) gives the architecture, tokenizer and pretraining seed
    (`glue.pretrained.random_init_ref`), so controls of different seeds are independent draws and
    the margin over them can be paired by pretraining seed (`aggregate`).
    """
    from ..glue.pretrained import find_checkpoints, random_init_ref
    from ..glue.sweep import run_sweep

    # Every run folder is called seed-k: label checkpoints by strategy too, or the tables mix them up.
    refs = {pr.label: [replace(ref, run=pr.label) for ref in
                       (find_checkpoints(every=[pr.path]) if every_checkpoint else find_checkpoints([pr.path]))]
            for pr in plan}
    controls = {}
    for k in sorted({pr.index for pr in plan}):
        mine = [pr for pr in plan if pr.index == k]
        source = next((pr for pr in mine if split_name(pr.strategy) == ("uniform", None)), mine[0])
        final = max(refs[source.label], key=lambda ref: ref.step)
        controls[k] = random_init_ref(final, run=control_label(k))
    of = {ref.key: controls[pr.index].key for pr in plan for ref in refs[pr.label]}
    doc = run_sweep([*(ref for mine in refs.values() for ref in mine), *controls.values()], tasks, glue_data,
                    out / "glue", ft, events, controls=of, preset=preset)
    by_sha = {ck["sha256"]: ck for ck in doc["summary"]["checkpoints"]}
    results = {}
    for pr in plan:
        mine = sorted(refs[pr.label], key=lambda ref: ref.step)
        final = by_sha[mine[-1].sha]
        results[pr.label] = {"entries": final["entries"], "score": final["glue"]["score"],
                             "score_entries": final["glue"]["entries"],
                             "curve": [{"step": ref.step, "score": by_sha[ref.sha]["glue"]["score"]} for ref in mine]}
    for k, ref in controls.items():
        ck = by_sha[ref.sha]
        results[control_label(k)] = {"seed_index": k, "init": "random", "pretraining_seed": ref.init_seed,
                                     "entries": ck["entries"], "score": ck["glue"]["score"],
                                     "score_entries": ck["glue"]["entries"]}
    return results


def glue_controls(glue: dict | None) -> dict[int, dict]:
    """{seed index: that seed's random-init control record} from `glue_results`' answer."""
    return {rec["seed_index"]: rec for label, rec in (glue or {}).items() if label.startswith("random-init/seed-")}


# ---------------------------------------------------------------- statistics
def steps_to_target(steps: list[float], losses: list[float], target: float) -> float | None:
    """The first step at which `losses` reaches `target`, interpolated linearly between eval steps; None if never."""
    for i, (s, loss) in enumerate(zip(steps, losses)):
        if loss <= target:
            if i == 0:
                return float(s)
            s0, l0 = steps[i - 1], losses[i - 1]
            return float(s0 + (l0 - target) / (l0 - loss) * (s - s0))
    return None


# ---------------------------------------------------------------- aggregation
def extra_metrics(run: dict) -> list[str]:
    """The train.extra_eval metrics a run recorded: eval_loss@NAME, eval_accuracy@NAME
    (`run_record` has checked that every evaluation has every set)."""
    return sorted(k for k in run["eval"][0] if k.startswith(("eval_loss@", "eval_accuracy@")))


def _steps_to_target(agg: dict, mine: list[dict], metric: str, target: float) -> dict:
    """Steps to `target` on the mean curve of `metric` and on each seed's own curve."""
    return {"mean_curve": steps_to_target(agg["steps"], [p["mean"] for p in agg["curve"][metric]], target),
            "per_seed": [steps_to_target(agg["steps"], [p[metric] for p in r["eval"]], target) for r in mine]}


def _glue_vs_control(mine: list[dict], control: dict[int, dict]) -> dict | None:
    """Strategy minus the random-init control of the same pretraining seed, each already averaged over
    fine-tuning seeds; a t-interval over pretraining seeds (the independent comparisons)."""
    pairs = [(r["glue"], control[r["seed_index"]]) for r in mine if r["seed_index"] in control]
    pairs = [(g, c) for g, c in pairs if g["score"] is not None and c["score"] is not None]
    if not pairs:
        return None
    entries = sorted(set.intersection(*(set(g["entries"]) & set(c["entries"]) for g, c in pairs)))
    return {"score": mean_ci([g["score"] - c["score"] for g, c in pairs]),
            "entries": {e: mean_ci([g["entries"][e] - c["entries"][e] for g, c in pairs]) for e in entries},
            "seed_indices": [r["seed_index"] for r in mine if r["seed_index"] in control],
            "independent_comparisons": len(pairs),
            "pairing": "pretraining seed; fine-tuning seeds averaged first"}


def aggregate(runs: list[dict], strategies: list[str], glue_control: dict[int, dict] | None = None) -> dict:
    """Per strategy: curves (mean, CI), final numbers, steps- and seconds-to-target vs. uniform's final mean;
    with `glue_control` ({seed index: control record}) the GLUE margin over the random-init control."""
    out: dict = {}
    for name in strategies:
        mine = sorted((r for r in runs if r["strategy"] == name), key=lambda r: r["seed_index"])
        steps = [p["step"] for p in mine[0]["eval"]]
        scores = ["eval_loss", "eval_accuracy", *extra_metrics(mine[0])]
        curve = {m: [mean_ci([r["eval"][i][m] for r in mine]) for i in range(len(steps))] for m in (*scores, "elapsed")}
        out[name] = {"seeds": [r["seed"] for r in mine], "steps": steps, "curve": curve,
                     "final": {m: curve[m][-1] for m in scores},
                     "seconds_per_step": mean_ci([r["seconds_per_step"] for r in mine])}
        if SCHEME[split_name(name)[0]] is not None and all("variance" in r for r in mine):
            scheme = SCHEME[split_name(name)[0]]
            vsteps = sorted(set.intersection(*(set(map(int, r["variance"])) for r in mine)))
            out[name]["variance"] = {"scheme": scheme, "steps": vsteps, **{
                term: [mean_ci([r["variance"][str(s)]["schemes"][scheme][term] for r in mine]) for s in vsteps]
                for term in ("mask_variance", "sentence_variance", "total_variance", "noise_scale", "mask_noise_scale")
                if all(term in r["variance"][str(s)]["schemes"].get(scheme, {}) for r in mine for s in vsteps)}}
        if all("glue" in r for r in mine):
            scores = [r["glue"]["score"] for r in mine]
            out[name]["glue"] = mean_ci(scores) if None not in scores else None
            names = sorted(set.intersection(*(set(r["glue"]["entries"]) for r in mine)))
            out[name]["glue_entries"] = {e: mean_ci([r["glue"]["entries"][e] for r in mine]) for e in names}
            if glue_control:
                margin = _glue_vs_control(mine, glue_control)
                if margin is not None:
                    out[name]["glue_vs_random_init"] = margin
            curves = [r["glue"].get("curve") or [] for r in mine]
            gsteps = [p["step"] for p in curves[0]]
            if len(gsteps) > 1 and all([p["step"] for p in c] == gsteps and None not in [p["score"] for p in c] for c in curves):
                out[name]["glue_curve"] = {"steps": gsteps, "score": [mean_ci([c[i]["score"] for c in curves])
                                                                      for i in range(len(gsteps))]}
    target = None
    if "uniform" in out:
        target = out["uniform"]["final"]["eval_loss"]["mean"]
        for name, agg in out.items():
            mine = sorted((r for r in runs if r["strategy"] == name), key=lambda r: r["seed_index"])
            agg["steps_to_target"] = _steps_to_target(agg, mine, "eval_loss", target)
            reached = agg["steps_to_target"]["mean_curve"]
            agg["seconds_to_target"] = None if reached is None else reached * agg["seconds_per_step"]["mean"]
            # The same question on each extra held-out set, against uniform's final mean loss there.
            agg["steps_to_target_by_set"] = {
                m.partition("@")[2]: {"target": out["uniform"]["final"][m]["mean"],
                                      **_steps_to_target(agg, mine, m, out["uniform"]["final"][m]["mean"])}
                for m in agg["final"] if m.startswith("eval_loss@") and m in out["uniform"]["final"]}
        by_seed = {r["seed_index"]: r for r in runs if r["strategy"] == "uniform"}
        for name, agg in out.items():
            mine = [r for r in runs if r["strategy"] == name and r["seed_index"] in by_seed]
            if name == "uniform" or not mine:
                continue
            # Paired by seed (same initial weights, data order, evaluation masks): the difference to
            # uniform at each seed, then a t-interval over seeds. One independent comparison per seed.
            agg["paired_vs_uniform"] = {
                m: mean_ci([r["eval"][-1][m] - by_seed[r["seed_index"]]["eval"][-1][m] for r in mine])
                for m in agg["final"] if m.startswith("eval_loss")}
    control = None
    if glue_control:
        recs = [glue_control[k] for k in sorted(glue_control)]
        scores = [c["score"] for c in recs]
        names = sorted(set.intersection(*(set(c["entries"]) for c in recs)))
        control = {"seed_indices": sorted(glue_control), "glue": mean_ci(scores) if None not in scores else None,
                   "glue_entries": {e: mean_ci([c["entries"][e] for c in recs]) for e in names}}
    return {"target": {"strategy": "uniform", "final_mean_eval_loss": target} if target is not None else None,
            "strategies": out, "glue_control": control}


def fairness_checks(runs: list[dict]) -> dict:
    """What makes the comparison fair, checked on the recorded numbers."""
    by_seed: dict[int, list[dict]] = {}
    for r in runs:
        by_seed.setdefault(r["seed_index"], []).append(r)
    same = lambda key: all(len({g[key] if isinstance(g[key], str) else json.dumps(g[key]) for g in group}) == 1  # noqa: E731
                           for group in by_seed.values())
    step0 = all(len({g["eval"][0]["eval_loss"] for g in group}) == 1 and all(g["eval"][0]["step"] == 0 for g in group)
                for group in by_seed.values())
    eval_shas = {r["eval_sha256"] if isinstance(r["eval_sha256"], str) else "mixed" for r in runs}
    extra = {json.dumps(r["extra_eval_sha256"], sort_keys=True)
             if all(isinstance(v, str) for v in r["extra_eval_sha256"].values()) else "mixed" for r in runs}
    return {"same_initial_weights_per_seed": same("initial_weights_sha256"),
            "same_data_order_per_seed": same("data_order_sha256"),
            "same_step0_eval_loss_per_seed": step0,
            "same_eval_set": len(eval_shas) == 1 and "mixed" not in eval_shas,
            "same_extra_eval_sets": len(extra) == 1 and "mixed" not in extra}


def collect(plan: list[PlannedRun], shards: Path, reused: dict[str, bool], *, variance: bool = False,
            glue: dict | None = None) -> list[dict]:
    """Every run's raw record (metrics, hashes, optional variance and GLUE)."""
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
        runs.append(rec)
    return runs


def results_document(plan: list[PlannedRun], runs: list[dict], argv: list[str], shards: Path,
                     glue_control: dict[int, dict] | None = None) -> dict:
    from ..atomic import sha256_file
    from ..data.shards import find_shard_dir
    from ..train import versions

    checks = fairness_checks(runs)
    if not checks["same_eval_set"]:
        raise MapnetError("the runs were evaluated on different held-out sets (eval_sha256 differs): "
                          "their losses are not comparable")
    if not checks["same_extra_eval_sets"]:
        raise MapnetError("the runs' train.extra_eval sets differ (names or eval_sha256@NAME): "
                          "their losses on those sets are not comparable")
    strategies = list(dict.fromkeys(pr.strategy for pr in plan))
    return {"schema": SCHEMA, "command": list(argv), "versions": versions(),
            "shards": {"path": str(Path(shards).resolve()),
                       "manifest_sha256": sha256_file(find_shard_dir(shards) / "manifest.json")},
            "strategies": strategies, "seeds": sorted({pr.settings.train.seed for pr in plan}),
            "eval_steps": eval_steps(plan[0].settings.train), "checks": checks,
            "aggregate": aggregate(runs, strategies, glue_control), "runs": runs,
            **({"glue_control": {str(k): v for k, v in sorted(glue_control.items())}} if glue_control else {})}


# ---------------------------------------------------------------- presentation (plain strings; rich is the CLI's)
TABLE_HEADER = ["strategy", "seeds", "final eval loss", "Δ vs uniform (paired)", "accuracy", "s/step", "steps to target"]


def pm(ci: dict, fmt: str) -> str:
    if ci["ci95"] is None:
        return format(ci["mean"], fmt)
    return f"{format(ci['mean'], fmt)} ± {format((ci['ci95'][1] - ci['ci95'][0]) / 2, fmt.lstrip('+'))}"


def table_rows(doc: dict) -> tuple[list[str], list[list[str]]]:
    """The comparison table: header and one row per strategy, numbers from `doc['aggregate']`."""
    strategies = doc["aggregate"]["strategies"]
    has_var = any("variance" in a for a in strategies.values())
    has_glue = any("glue" in a for a in strategies.values())
    extra = sorted({m for a in strategies.values() for m in a["final"] if m.startswith("eval_loss@")})
    control = doc["aggregate"].get("glue_control")
    header = (TABLE_HEADER + [f"loss {m.partition('@')[2]}" for m in extra]
              + (["mask var", "total var", "noise scale"] if has_var else []) + (["GLUE"] if has_glue else [])
              + (["GLUE Δ vs random init (paired)"] if has_glue and control else []))
    rows = []
    for name, a in strategies.items():
        reached = (a.get("steps_to_target") or {}).get("mean_curve")
        diff = (a.get("paired_vs_uniform") or {}).get("eval_loss")
        row = [name, str(len(a["seeds"])), pm(a["final"]["eval_loss"], ".4f"), pm(diff, "+.4f") if diff else "-",
               pm(a["final"]["eval_accuracy"], ".4f"),
               pm(a["seconds_per_step"], ".4f"),
               "no baseline" if "steps_to_target" not in a else "not reached" if reached is None else f"{reached:.1f}"]
        row += [pm(a["final"][m], ".4f") if m in a["final"] else "-" for m in extra]
        if has_var:
            v = a.get("variance")
            ok = v and v["steps"]
            row += [pm(v["mask_variance"][-1], ".4g"), pm(v["total_variance"][-1], ".4g"),
                    pm(v["noise_scale"][-1], ".4g") if ok and "noise_scale" in v else "-"] if ok else ["-", "-", "-"]
        if has_glue:
            row.append(_points(a.get("glue"), ".2f"))  # in points, as `mapnet finetune-glue` prints it
            if control:
                d = (a.get("glue_vs_random_init") or {}).get("score")
                row.append(_points(d, "+.2f") + (f" (n={d['n']})" if d else ""))
        rows.append(row)
    if has_glue and control:  # the control row: GLUE columns only
        row = [CONTROL_ROW, str(len(control["seed_indices"]))] + ["-"] * (len(header) - 4)
        rows.append(row + [_points(control["glue"], ".2f"), "control"])
    return header, rows


CONTROL_ROW = "random-init (control)"


def _points(ci: dict | None, fmt: str) -> str:
    """A mean_ci of fractions, shown in points (x100)."""
    if not ci:
        return "-"
    mean = format(100 * ci["mean"], fmt)
    if ci["ci95"] is None:
        return mean
    return f"{mean} ± {format(100 * (ci['ci95'][1] - ci['ci95'][0]) / 2, fmt.lstrip('+'))}"


def write_plots(doc: dict, out: Path) -> list[str]:
    """PNG plots when matplotlib is importable; returns one-line notes either way."""
    from ..plotting import MISSING, pyplot, save_figure

    plt = pyplot()
    if plt is None:
        return [f"no plots: {MISSING}"]

    aggs = doc["aggregate"]["strategies"]
    panels = [("loss_vs_step.png", "step", "held-out MLM loss", lambda a: (a["steps"], a["curve"]["eval_loss"])),
              ("loss_vs_time.png", "training seconds", "held-out MLM loss",
               lambda a: ([p["mean"] for p in a["curve"]["elapsed"]], a["curve"]["eval_loss"])),
              ("variance_vs_step.png", "step", "total gradient variance",
               lambda a: (a["variance"]["steps"], a["variance"]["total_variance"]) if "variance" in a else None),
              ("glue_vs_step.png", "step", "GLUE score",
               lambda a: (a["glue_curve"]["steps"], a["glue_curve"]["score"]) if "glue_curve" in a else None)]
    for m in sorted({m for a in aggs.values() for m in a["curve"] if m.startswith("eval_loss@")}):
        name = m.partition("@")[2]
        panels.append((f"loss_vs_step-{name}.png", "step", f"held-out MLM loss ({name})",
                       lambda a, m=m: (a["steps"], a["curve"][m]) if m in a["curve"] else None))
    notes = []
    for filename, xlabel, ylabel, pick in panels:
        series = {n: pick(a) for n, a in aggs.items() if pick(a) is not None}
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, (xs, ys) in series.items():
            mean = [y["mean"] for y in ys]
            ax.plot(xs, mean, marker="o", label=name)
            if all(y["ci95"] for y in ys):
                ax.fill_between(xs, [y["ci95"][0] for y in ys], [y["ci95"][1] for y in ys], alpha=0.2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend()
        fig.tight_layout()
        save_figure(fig, out / filename)
        notes.append(f"plot: {out / filename}")
    return notes


__all__ = ["STRATEGIES", "SCHEME", "PlannedRun", "eval_steps", "parse_strategies", "plan_runs", "run_all",
           "initial_weights_sha256", "data_order_sha256", "read_metrics", "run_record", "variance_curve",
           "glue_results", "glue_controls", "control_label", "t_quantile_975", "mean_ci", "steps_to_target", "aggregate", "fairness_checks",
           "collect", "results_document", "table_rows", "write_plots", "extra_metrics"]
