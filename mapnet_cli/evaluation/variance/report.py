"""The JSON document of `mapnet variance --json` (schema `mapnet.variance/1`).

Top-level keys: `schema`, `checkpoint` (what was measured), `data` (shards, split, sentences), `gradient`
(parameters, dimension, exact or sketch, method, counts, seconds; `gradient.oracle`: the oracle's extra passes),
`schemes` (per scheme: the mask, sentence and total variance and their sum, the raw and pooled terms, ||E g||^2,
the noise scales, the weights, the bias against uniform for weighted schemes; or {"available": false, "reason"}
when asked for but not measurable), `minibatch` (per scheme and batch size: the predicted and the directly
measured variance of a mean) and `settings`. Schemes appear, in a fixed order, when asked for (variance.schemes,
or the defaults of `schemes.default_schemes`, plus the oracle with --oracle); the others are absent.

Variances are traces (sums over all measured coordinates) of squared gradient units; `ci95` are bias-corrected
percentile bootstrap intervals (null with --bootstrap 0). Undefined numbers are null; a null noise-scale estimate
or interval end means unbounded: ||E g||^2 is not distinguishable from 0 there. Every key, in order:
docs/formats.md#gradient-variance-mapnet-variance-checkpoint-json.
"""

from __future__ import annotations

from dataclasses import asdict

from ...atomic import json_safe
from . import measure as measure_mod
from .measure import Measurement
from .schemes import ALL_SCHEMES, default_schemes
from .target import Target

SCHEMA = "mapnet.variance/1"


def build_report(meas: Measurement, analysis: dict, *, settings, checkpoint: dict, data: dict) -> dict:
    """Assemble the document above from a measurement and its analysis."""
    schemes = {}
    for name in ALL_SCHEMES:
        if name in analysis["schemes"]:
            schemes[name] = {"available": True, **analysis["schemes"][name]}
        elif name in meas.unavailable:
            schemes[name] = {"available": False, "reason": meas.unavailable[name]}
    data = {
        **data,
        "eligible_mean": float(meas.eligible.double().mean()),
        "mask_size_mean": float(meas.mask_sizes.double().mean()),
        "masks_per_sentence": meas.gram6.shape[2],
    }
    return json_safe(
        {
            "schema": SCHEMA,
            "checkpoint": checkpoint,
            "data": data,
            "gradient": meas.gradient,
            "schemes": schemes,
            "minibatch": analysis["minibatch"],
            "settings": {"variance": _plain(asdict(settings.variance)), "masking": _plain(asdict(settings.masking))},
        }
    )


def _plain(d: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


def variance_report(target: Target, settings, schemes=None) -> dict:
    """Measure + analyse + assemble the JSON document (`report.SCHEMA`) with `settings.variance`.

    `schemes`: what to measure (default: variance.schemes, or `schemes.default_schemes` of the
    checkpoint's masking when that is empty). Frequency counts come from the training split of
    the validation reader's shard folder.
    """
    v, m = settings.variance, settings.masking
    wanted = tuple(schemes) if schemes is not None else (v.schemes or default_schemes(m))
    type_scores, reason = (
        measure_mod.frequency_scores(target.reader.dir, m.frequency.power, settings.shard.verify)
        if "frequency" in wanted
        else (None, None)
    )
    idx, sequences = measure_mod.pick_sentences(target.reader, v.sentences, v.seed)
    meas = measure_mod.measure(
        target.model,
        target.proposal,
        sequences,
        target.reader.special_ids,
        target.reader.vocab_size,
        m,
        masks=v.masks,
        project_dim=v.project_dim,
        params=v.params,
        seed=v.seed,
        method=v.method,
        memory_gb=v.memory_gb,
        schemes=wanted,
        type_scores=type_scores,
        counts_reason=reason,
        oracle_rounds=v.oracle_rounds,
        oracle_basis=v.oracle_basis,
    )
    analysis = measure_mod.analyse(
        meas, v.batch_sizes, v.bootstrap, v.bootstrap_masks, v.batch_draws, v.seed, m.mapnet.clip_epsilon
    )
    ckpt = {"path": target.meta.get("path"), "step": target.meta.get("step"), "masking": target.meta["masking"]}
    data = {"shards": str(target.reader.dir), "split": "valid", "sentences": idx}
    return build_report(meas, analysis, settings=settings, checkpoint=ckpt, data=data)


__all__ = ["variance_report", "SCHEMA", "build_report"]
