"""The numbers across runs: steps to a target loss, per-strategy means with 95% intervals, differences
paired by seed, and the checks that make the comparison fair."""

from __future__ import annotations

import json

import numpy as np

from ..intervals import mean_ci
from .plan import SCHEME, split_name


def steps_to_target(steps: list[float], losses: list[float], target: float) -> float | None:
    """The first step at which `losses` reaches `target`, interpolated linearly between eval steps; None if never."""
    for i, (s, loss) in enumerate(zip(steps, losses)):
        if loss <= target:
            if i == 0:
                return float(s)
            s0, l0 = steps[i - 1], losses[i - 1]
            return float(s0 + (l0 - target) / (l0 - loss) * (s - s0))
    return None


def extra_metrics(run: dict) -> list[str]:
    """The train.extra_eval metrics a run recorded: eval_loss@NAME, eval_accuracy@NAME
    (`run_record` has checked that every evaluation has every set)."""
    return sorted(k for k in run["eval"][0] if k.startswith(("eval_loss@", "eval_accuracy@")))


def _steps_to_target(agg: dict, mine: list[dict], metric: str, target: float) -> dict:
    """Steps to `target` on the mean curve of `metric` and on each seed's own curve."""
    return {
        "mean_curve": steps_to_target(agg["steps"], [p["mean"] for p in agg["curve"][metric]], target),
        "per_seed": [
            steps_to_target([p["step"] for p in r["eval"]], [p[metric] for p in r["eval"]], target) for r in mine
        ],
    }


def _glue_vs_control(mine: list[dict], control: dict[int, dict]) -> dict | None:
    """Strategy minus the random-init control of the same pretraining seed, each already averaged over
    fine-tuning seeds; a t-interval over pretraining seeds (the independent comparisons)."""
    pairs = [(r["glue"], control[r["seed_index"]]) for r in mine if r["seed_index"] in control]
    pairs = [(g, c) for g, c in pairs if g["score"] is not None and c["score"] is not None]
    if not pairs:
        return None
    entries = sorted(set.intersection(*(set(g["entries"]) & set(c["entries"]) for g, c in pairs)))
    return {
        "score": mean_ci([g["score"] - c["score"] for g, c in pairs]),
        "entries": {e: mean_ci([g["entries"][e] - c["entries"][e] for g, c in pairs]) for e in entries},
        "seed_indices": [r["seed_index"] for r in mine if r["seed_index"] in control],
        "independent_comparisons": len(pairs),
        "pairing": "pretraining seed; fine-tuning seeds averaged first",
    }


def _blimp(mine: list[dict], control: dict) -> dict:
    """BLiMP of one strategy over seeds: final accuracy and per field (mean, CI), the curve over kept
    checkpoints, and the margins over the controls, paired by pretraining seed (`blimp_scores.blimp_controls`)."""
    out = {"blimp": mean_ci([r["blimp"]["accuracy"] for r in mine])}
    fields = sorted(set.intersection(*(set(r["blimp"]["fields"]) for r in mine)))
    out["blimp_fields"] = {f: mean_ci([r["blimp"]["fields"][f] for r in mine]) for f in fields}
    curves = [r["blimp"]["curve"] for r in mine]
    steps = [c["step"] for c in curves[0]]
    if len(steps) > 1 and all([c["step"] for c in curve] == steps for curve in curves):
        out["blimp_curve"] = {
            "steps": steps,
            "accuracy": [mean_ci([c[i]["accuracy"] for c in curves]) for i in range(len(steps))],
        }
    random = control.get("random") or {}
    pairs = [(r["blimp"]["accuracy"], random[r["seed_index"]]["accuracy"]) for r in mine if r["seed_index"] in random]
    if pairs:
        out["blimp_vs_random_init"] = {
            **mean_ci([a - c for a, c in pairs]),
            "independent_comparisons": len(pairs),
            "pairing": "pretraining seed: each seed's own random-init encoder",
        }
    if control.get("unigram"):
        out["blimp_vs_unigram"] = mean_ci([r["blimp"]["accuracy"] - control["unigram"]["accuracy"] for r in mine])
    return out


def blimp_at_time(run: dict, seconds: float) -> float | None:
    """A run's BLiMP accuracy after `seconds` of training (its recorded elapsed time, evaluation excluded),
    interpolated linearly between its scored checkpoints; None outside them (before the first or past the last)."""
    steps = [0] + [r["step"] for r in run["train"]]
    elapsed = [0.0] + [r["elapsed"] for r in run["train"]]
    curve = run["blimp"]["curve"]
    at = np.interp([c["step"] for c in curve], steps, elapsed)
    if seconds > at[-1] * (1 + 1e-9) or seconds < at[0]:
        return None
    return float(np.interp(seconds, at, [c["accuracy"] for c in curve]))


def _blimp_at_uniform_time(mine: list[dict], uniform: dict[int, dict]) -> dict:
    """Strategy minus uniform at uniform's final training time, per seed: the strategy's curve read at the
    time uniform took for all its steps. A seed whose run ended sooner (a cheaper step) or whose curve does
    not reach back that far counts as not reached."""
    diffs, per_seed = [], []
    for r in mine:
        u = uniform.get(r["seed_index"])
        value = None if u is None else blimp_at_time(r, u["train"][-1]["elapsed"])
        per_seed.append(None if value is None else value - u["blimp"]["accuracy"])
        if value is not None:
            diffs.append(value - u["blimp"]["accuracy"])
    return {
        "paired_vs_uniform": mean_ci(diffs) if diffs else None,
        "per_seed": per_seed,
        "basis": "each run's recorded training seconds (a shared machine's load moves them)",
    }


def aggregate(
    runs: list[dict],
    strategies: list[str],
    glue_control: dict[int, dict] | None = None,
    blimp_control: dict | None = None,
) -> dict:
    """Per strategy: curves (mean, CI), final numbers, steps- and seconds-to-target vs. uniform's final mean;
    with `glue_control` ({seed index: control record}) the GLUE margin over the random-init control; with
    BLiMP scores in the runs, their means, curves and margins over `blimp_control`'s controls."""
    out: dict = {}
    for name in strategies:
        mine = sorted((r for r in runs if r["strategy"] == name), key=lambda r: r["seed_index"])
        # The steps every seed evaluated at: all of them in a step run; in a time-budget run each seed's last
        # step is what its time bought, so the mean curve stops at the last shared one and `final` is each
        # seed's own last evaluation (the state at the budget's end).
        steps = sorted(set.intersection(*({p["step"] for p in r["eval"]} for r in mine)))
        at = [{p["step"]: p for p in r["eval"]} for r in mine]
        scores = ["eval_loss", "eval_accuracy", *extra_metrics(mine[0])]
        curve = {m: [mean_ci([a[s][m] for a in at]) for s in steps] for m in (*scores, "elapsed")}
        out[name] = {
            "seeds": [r["seed"] for r in mine],
            "steps": steps,
            "curve": curve,
            "final": {m: mean_ci([r["eval"][-1][m] for r in mine]) for m in scores},
            "seconds_per_step": mean_ci([r["seconds_per_step"] for r in mine]),
        }
        if all("budget" in r for r in mine):
            out[name]["steps_bought"] = mean_ci([r["budget"]["steps"] for r in mine])
        if SCHEME[split_name(name)[0]] is not None and all("variance" in r for r in mine):
            scheme = SCHEME[split_name(name)[0]]
            vsteps = sorted(set.intersection(*(set(map(int, r["variance"])) for r in mine)))
            out[name]["variance"] = {
                "scheme": scheme,
                "steps": vsteps,
                **{
                    term: [mean_ci([r["variance"][str(s)]["schemes"][scheme][term] for r in mine]) for s in vsteps]
                    for term in (
                        "mask_variance",
                        "sentence_variance",
                        "total_variance",
                        "noise_scale",
                        "mask_noise_scale",
                    )
                    if all(term in r["variance"][str(s)]["schemes"].get(scheme, {}) for r in mine for s in vsteps)
                },
            }
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
            if len(gsteps) > 1 and all(
                [p["step"] for p in c] == gsteps and None not in [p["score"] for p in c] for c in curves
            ):
                out[name]["glue_curve"] = {
                    "steps": gsteps,
                    "score": [mean_ci([c[i]["score"] for c in curves]) for i in range(len(gsteps))],
                }
        if all("blimp" in r for r in mine):
            out[name].update(_blimp(mine, blimp_control or {}))
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
                m.partition("@")[2]: {
                    "target": out["uniform"]["final"][m]["mean"],
                    **_steps_to_target(agg, mine, m, out["uniform"]["final"][m]["mean"]),
                }
                for m in agg["final"]
                if m.startswith("eval_loss@") and m in out["uniform"]["final"]
            }
        by_seed = {r["seed_index"]: r for r in runs if r["strategy"] == "uniform"}
        for name, agg in out.items():
            mine = [r for r in runs if r["strategy"] == name and r["seed_index"] in by_seed]
            if name == "uniform" or not mine:
                continue
            # Paired by seed (same initial weights, data order, evaluation masks): the difference to
            # uniform at each seed, then a t-interval over seeds. One independent comparison per seed.
            agg["paired_vs_uniform"] = {
                m: mean_ci([r["eval"][-1][m] - by_seed[r["seed_index"]]["eval"][-1][m] for r in mine])
                for m in agg["final"]
                if m.startswith("eval_loss")
            }
            if all("blimp" in r for r in mine) and all("blimp" in by_seed[r["seed_index"]] for r in mine):
                agg["paired_vs_uniform"]["blimp"] = mean_ci(
                    [r["blimp"]["accuracy"] - by_seed[r["seed_index"]]["blimp"]["accuracy"] for r in mine]
                )
                if all(len(r["blimp"]["curve"]) > 1 for r in mine + [by_seed[r["seed_index"]] for r in mine]):
                    agg["blimp_at_uniform_time"] = _blimp_at_uniform_time(mine, by_seed)  # needs curves
    control = None
    if glue_control:
        recs = [glue_control[k] for k in sorted(glue_control)]
        scores = [c["score"] for c in recs]
        names = sorted(set.intersection(*(set(c["entries"]) for c in recs)))
        control = {
            "seed_indices": sorted(glue_control),
            "glue": mean_ci(scores) if None not in scores else None,
            "glue_entries": {e: mean_ci([c["entries"][e] for c in recs]) for e in names},
        }
    blimp = None
    if blimp_control and (blimp_control.get("random") or blimp_control.get("unigram")):
        recs = [blimp_control["random"][k] for k in sorted(blimp_control.get("random") or {})]
        blimp = {
            "seed_indices": sorted(blimp_control.get("random") or {}),
            "random_init": mean_ci([c["accuracy"] for c in recs]) if recs else None,
            "unigram": blimp_control["unigram"]["accuracy"] if blimp_control.get("unigram") else None,
        }
    return {
        "target": {"strategy": "uniform", "final_mean_eval_loss": target} if target is not None else None,
        "strategies": out,
        "glue_control": control,
        "blimp_control": blimp,
    }


def fairness_checks(runs: list[dict]) -> dict:
    """What makes the comparison fair, checked on the recorded numbers."""
    by_seed: dict[int, list[dict]] = {}
    for r in runs:
        by_seed.setdefault(r["seed_index"], []).append(r)
    same = lambda key: all(
        len({g[key] if isinstance(g[key], str) else json.dumps(g[key]) for g in group}) == 1  # noqa: E731
        for group in by_seed.values()
    )
    step0 = all(
        len({g["eval"][0]["eval_loss"] for g in group}) == 1 and all(g["eval"][0]["step"] == 0 for g in group)
        for group in by_seed.values()
    )
    eval_shas = {r["eval_sha256"] if isinstance(r["eval_sha256"], str) else "mixed" for r in runs}
    extra = {
        json.dumps(r["extra_eval_sha256"], sort_keys=True)
        if all(isinstance(v, str) for v in r["extra_eval_sha256"].values())
        else "mixed"
        for r in runs
    }
    # Every start of every run in one precision (runs recorded before mapnet recorded it say nothing either way).
    recorded = {p for r in runs for p in r.get("precision", [])}
    return {
        "same_initial_weights_per_seed": same("initial_weights_sha256"),
        "same_data_order_per_seed": same("data_order_sha256"),
        "same_step0_eval_loss_per_seed": step0,
        "same_eval_set": len(eval_shas) == 1 and "mixed" not in eval_shas,
        "same_extra_eval_sets": len(extra) == 1 and "mixed" not in extra,
        "same_precision": len(recorded) <= 1,
    }
