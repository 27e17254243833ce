"""The numbers across runs: steps to a target loss, per-strategy means with 95% intervals, differences
paired by seed, and the checks that make the comparison fair."""

from __future__ import annotations

import json

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
