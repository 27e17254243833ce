"""The cheap decomposition recorded during pretraining (`variance.every`) and by `mapnet compare --variance`.

    snap = variance_snapshot(model, proposal, valid_reader, settings, step)   # one metrics.jsonl record

The training loop does not import this module: the command that starts training passes
`variance_snapshot` in (`train.pretrain(..., variance_snapshot=)`), so training stays below
evaluation.
"""

from __future__ import annotations

import math

from . import estimator as est
from . import schemes as sch
from .measure import frequency_scores, measure, pick_sentences


def variance_snapshot(model, proposal_or_None, reader, settings, step: int) -> dict:
    """A cheap decomposition for the metrics file during pretraining (and `mapnet compare --variance`).

    Uses variance.snapshot_sentences x variance.snapshot_masks (default 8 x 4)
    with a variance.snapshot_project_dim sketch (default 4096), the same
    sentences and masks at every step (fixed seeds), no bootstrap. Measures
    uniform (the reference) and the scheme(s) of the run's own strategy
    (`schemes.snapshot_schemes`: the three mapnet_* for a paper-weighted MAP-Net,
    ht for masking.mapnet.importance = "ht", stratified, frequency — the names
    `compare.SCHEME` looks up); variance.schemes does not apply here. Returns
    {"step", "sentences", "masks", "project_dim", "seconds", "schemes":
    {scheme: {"mask_variance", "sentence_variance", "total_variance",
    "mask_share", "noise_scale", "mask_noise_scale"[, "relative_bias"]}}}
    (undefined or unbounded numbers are None); MAP-Net schemes only when a
    proposal is given, frequency only when the training split of `reader.dir`
    can be read. `model` must be the bare module (not DDP-wrapped); the model's
    train/eval flags, its `.grad`s and the global RNG are left as found.
    """
    v, m = settings.variance, settings.masking
    wanted = sch.snapshot_schemes(m)
    type_scores, reason = (
        frequency_scores(getattr(reader, "dir", None), m.frequency.power, "size")
        if "frequency" in wanted
        else (None, None)
    )
    _, sequences = pick_sentences(reader, v.snapshot_sentences, v.seed)
    meas = measure(
        model,
        proposal_or_None,
        sequences,
        reader.special_ids,
        reader.vocab_size,
        m,
        masks=v.snapshot_masks,
        project_dim=v.snapshot_project_dim,
        params=v.params,
        seed=v.seed,
        method=v.method,
        memory_gb=v.memory_gb,
        schemes=wanted,
        type_scores=type_scores,
        counts_reason=reason,
    )
    full = est.summarise(meas.gram6)
    M = v.snapshot_masks
    out = {}
    for a, n in enumerate(meas.schemes):
        d = est.decompose(full.norms[a], full.means[a, a], M)
        sf = est.scale_free(d)
        total = float(d["total_variance"])
        out[n] = {
            "mask_variance": float(d["mask_variance"]),
            "sentence_variance": float(d["sentence_variance"]),
            "total_variance": total,
            "mask_share": float(d["mask_variance"]) / total if total > 0 else math.nan,
            "noise_scale": float(sf["noise_scale"]),
            "mask_noise_scale": float(sf["mask_noise_scale"]),
        }
        if n != "uniform" and "uniform" in meas.schemes:
            ref = meas.schemes.index("uniform")
            dist = est.mean_distance(full.means[a, a], full.means[ref, ref], full.means[a, ref])
            out[n]["relative_bias"] = float(dist["relative_unbiased"])
    from ...atomic import json_safe  # NaN (an undefined relative bias) would make the metrics line invalid JSON

    return json_safe(
        {
            "step": int(step),
            "sentences": v.snapshot_sentences,
            "masks": M,
            "project_dim": v.snapshot_project_dim,
            "seconds": meas.gradient["seconds"],
            "schemes": out,
        }
    )


__all__ = ["variance_snapshot"]
