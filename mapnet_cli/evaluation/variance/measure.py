"""Measure the decomposition on real sentences: draw masks, take per-example gradients, estimate.

    meas = measure(model, proposal, sequences, special_ids, vocab_size, settings.masking, masks=8,
                   schemes=("uniform", "ht", "oracle"))
    body = analyse(meas, settings.variance)                  # estimates + bootstrap intervals + mini-batch view

Where the model and sentences come from is beside this module: `target.py` (a checkpoint on disk, for
`mapnet variance`) and `snapshot.py` (the cheap measurement the training loop and `mapnet compare --variance` record).

Order of work: every scheme's masks first (a generator per (scheme source, sentence), seeded from variance.seed,
so the same sentences get the same masks at every call, whatever else is measured), then every example's gradient
once (the three MAP-Net schemes share masks and differ by a scalar weight, so their gradients are one set, scaled;
every per-position scheme is a source of its own), then the Gram matrix of all gradients (sketched vectors
directly, exact gradients in memory-bounded panels). The oracle's scores come before its masks, at extra passes
the report counts. In full: docs/internals.md#evaluationvariancemeasurepy.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field

import torch

from ...errors import MapnetError
from ...masking.uniform import mix_seed
from . import estimator as est
from . import schemes as sch
from .gradients import ExampleGradients, MaskedExample, eval_mode, example_gradient_fn
from .schemes import ALL_SCHEMES, SCHEMES, SOURCES, Proposal

_SOURCE_DOMAIN = {"uniform": 1, "mapnet": 2, "ht": 3, "stratified": 4, "frequency": 5, "oracle": 6}
_SOURCE_ORDER = tuple(_SOURCE_DOMAIN)
NO_PROPOSAL = "this model has no MAP-Net (trained with uniform masking): nothing to sample MAP-Net masks from"
NO_COUNTS = "no training-split token counts were given: the frequency proposal is built from them"


@dataclass
class Measurement:
    """Everything the estimators need, plus what the report says about how it was obtained."""

    schemes: list[str]  # measured, in report order
    unavailable: dict[str, str]  # scheme -> why it was not measured
    gram6: torch.Tensor  # (A, S, M, A, S, M) float64 Gram of the weighted gradients
    weights: dict[str, torch.Tensor]  # scheme -> (S, M) per-mask importance weights (1 for per-position schemes)
    log_ratio: torch.Tensor | None  # (S, M) log r of the MAP-Net masks
    mask_sizes: torch.Tensor  # (S,) K per sentence (the first measured source)
    eligible: torch.Tensor  # (S,) n per sentence
    gradient: dict = field(default_factory=dict)  # parameters, dimension, mode, evaluations, seconds[, oracle]
    position_weights: dict[str, torch.Tensor] = field(default_factory=dict)  # per-position scheme -> all its w_i, flat
    inclusion: dict[str, torch.Tensor] = field(default_factory=dict)  # PPS scheme -> (S, T) pi_i per sentence


def pick_sentences(reader, count: int, seed: int) -> tuple[list[int], torch.Tensor]:
    """`count` distinct validation sequences chosen by `seed` (the same every call), as (indices, (S, T) ids)."""
    n = len(reader)
    if n < count:
        raise MapnetError(f"the validation split holds {n} sequences; {count} were asked for (lower --sentences)")
    g = torch.Generator().manual_seed(mix_seed(seed, 0x5E17))
    idx = torch.randperm(n, generator=g)[:count].tolist()
    return idx, torch.from_numpy(reader.take(idx).astype("int64"))


def split_available(
    schemes, proposal: Proposal | None, type_scores: torch.Tensor | None, counts_reason: str | None = None
) -> tuple[list[str], dict[str, str]]:
    """(schemes that can be measured, in the given order; {scheme: why not} for the rest)."""
    unknown = [s for s in schemes if s not in SOURCES]
    if unknown:
        raise MapnetError(
            f"unknown variance scheme(s) {', '.join(map(repr, unknown))} (known: {', '.join(ALL_SCHEMES)})"
        )
    measured, unavailable = [], {}
    for s in dict.fromkeys(schemes):  # de-duplicated, order kept
        if SOURCES[s] in ("mapnet", "ht") and proposal is None:
            unavailable[s] = NO_PROPOSAL
        elif s == "frequency" and type_scores is None:
            unavailable[s] = counts_reason or NO_COUNTS
        else:
            measured.append(s)
    return measured, unavailable


def _drawer(
    src: str,
    model,
    proposal,
    special_ids,
    vocab_size: int,
    masking,
    masks: int,
    type_scores,
    oracle_rounds: int,
    oracle_grads: ExampleGradients | None,
):
    """`(ids, key) -> SentenceDraw` for one source; the oracle scores each sentence first (key-derived seeds)."""
    args = (special_ids, vocab_size, masking, masks)
    if src == "uniform":
        return lambda ids, key: sch.draw_uniform(ids, *args, key)
    if src == "mapnet":
        return lambda ids, key: sch.draw_proposal(ids, *args, key, proposal)
    if src == "ht":
        return lambda ids, key: sch.draw_ht(ids, *args, key, proposal)
    if src == "stratified":
        return lambda ids, key: sch.draw_stratified(ids, *args, key)
    if src == "frequency":
        return lambda ids, key: sch.draw_frequency(ids, *args, key, type_scores)
    basis = "gradient" if oracle_grads is not None else "proxy"

    def oracle(ids, key):
        scores, cost = sch.oracle_scores(
            model, ids, special_ids, vocab_size, masking, oracle_rounds, mix_seed(key, 1), basis, oracle_grads
        )
        return sch.draw_oracle(ids, *args, mix_seed(key, 2), scores, cost)

    return oracle


def _gram(grads: ExampleGradients, examples: list[MaskedExample], memory_gb: float) -> torch.Tensor:
    """The Gram matrix of every example's gradient: sketched vectors directly, exact ones in panels."""
    if grads.sketch is not None:
        x = grads.vectors(examples).double().cpu()
        return x @ x.T
    panel = max(1, int(memory_gb * 2**30 // (4 * grads.numel)))
    return est.gram_matrix(len(examples), example_gradient_fn(grads, examples), panel)


def _scheme_gram(
    base: torch.Tensor, sources: list[str], schemes: list[str], weights: dict[str, torch.Tensor]
) -> torch.Tensor:
    """(A, S, M, A, S, M): each scheme's block of its source's Gram, scaled by its per-mask weights."""
    S, M = base.shape[1:3]
    A = len(schemes)
    gram6 = torch.empty(A, S, M, A, S, M, dtype=torch.float64)
    for a, na in enumerate(schemes):
        for b, nb in enumerate(schemes):
            block = base[sources.index(SOURCES[na]), :, :, sources.index(SOURCES[nb])]
            gram6[a, :, :, b] = weights[na][:, :, None, None] * block * weights[nb][None, None]
    return gram6


def measure(
    model,
    proposal: Proposal | None,
    sequences: torch.Tensor,
    special_ids,
    vocab_size: int,
    masking,
    *,
    masks: int,
    project_dim: int = 0,
    params=(),
    seed: int = 0,
    method: str = "loop",
    memory_gb: float = 4.0,
    schemes=SCHEMES,
    type_scores: torch.Tensor | None = None,
    counts_reason: str | None = None,
    oracle_rounds: int = 4,
    oracle_basis: str = "proxy",
) -> Measurement:
    """Draw `masks` masks per sequence for each scheme and form the Gram matrix of the weighted gradients.

    Schemes that cannot be measured are returned in `unavailable` with the reason: the
    MAP-Net ones and `ht` without a `proposal`, `frequency` without `type_scores`
    (`schemes.frequency_type_scores` of the training split's counts; `counts_reason` says why
    they are missing).
    """
    schemes, unavailable = split_available(schemes, proposal, type_scores, counts_reason)
    if not schemes:
        raise MapnetError(
            f"no variance scheme can be measured here ({'; '.join(f'{k}: {v}' for k, v in unavailable.items())})"
        )
    sources = sorted({SOURCES[s] for s in schemes}, key=_SOURCE_ORDER.index)
    device = next(model.parameters()).device
    S, M = sequences.shape[0], masks
    grads = ExampleGradients(model, params, project_dim, seed, method)
    oracle_grads = ExampleGradients(model, params) if "oracle" in sources and oracle_basis == "gradient" else None
    t0 = time.perf_counter()
    with (
        eval_mode(model, proposal if isinstance(proposal, torch.nn.Module) else None),
        torch.autocast(device.type, enabled=False),
    ):
        drawers = {
            src: _drawer(
                src, model, proposal, special_ids, vocab_size, masking, M, type_scores, oracle_rounds, oracle_grads
            )
            for src in sources
        }
        draws = {
            src: [drawers[src](sequences[s].to(device), mix_seed(seed, _SOURCE_DOMAIN[src], s)) for s in range(S)]
            for src in sources
        }
        examples: list[MaskedExample] = [e for src in sources for d in draws[src] for e in d.examples]
        gram = _gram(grads, examples, memory_gb)
    seconds = time.perf_counter() - t0

    base = gram.view(len(sources), S, M, len(sources), S, M)
    log_ratio = torch.stack([d.log_ratio for d in draws["mapnet"]]).cpu() if "mapnet" in sources else None
    weights = {}
    for name in schemes:
        lr = log_ratio if SOURCES[name] == "mapnet" else torch.zeros(S, M, dtype=torch.float64)
        weights[name] = sch.scheme_weights(name, lr, masking.mapnet.clip_epsilon).reshape(S, M)
    gram6 = _scheme_gram(base, sources, schemes, weights)
    position_weights = {
        n: torch.cat([e.token_weights.double().cpu() for d in draws[SOURCES[n]] for e in d.examples])
        for n in schemes
        if n in sch.POSITION_SCHEMES
    }
    inclusion = {
        n: torch.stack([d.inclusion for d in draws[SOURCES[n]]])
        for n in schemes
        if draws[SOURCES[n]][0].inclusion is not None
    }
    ref = draws[sources[0]]
    info = {
        "parameters": grads.numel,
        "tensors": len(grads.names),
        "dimension": grads.dim,
        "mode": "sketch" if grads.sketch is not None else "exact",
        "method": method,
        "examples": len(examples),
        "evaluations": grads.evaluations,
        "seconds": seconds,
    }
    if "oracle" in sources:
        passes = sum(d.cost for d in draws["oracle"])
        info["oracle"] = {
            "basis": oracle_basis,
            "rounds": max(1, oracle_rounds),
            ("backward_passes" if oracle_basis == "gradient" else "forward_rows"): passes,
        }
    return Measurement(
        schemes,
        unavailable,
        gram6,
        weights,
        log_ratio,
        torch.tensor([d.examples[0].positions.numel() for d in ref]),
        torch.tensor([d.eligible for d in ref]),
        info,
        position_weights,
        inclusion,
    )


def _ci(values: list[torch.Tensor] | None, estimate: float) -> list[float] | None:
    if not values:
        return None
    return est.interval(torch.cat(values), estimate)


def _sqrt_ci(values: list[torch.Tensor] | None, estimate: float) -> list[float] | None:
    """An interval for a norm from one for its (signed, unbiased) square."""
    ci = _ci(values, estimate)
    return None if ci is None else [math.sqrt(max(0.0, c)) if math.isfinite(c) else math.nan for c in ci]


def _weights_entry(meas: Measurement, n: str, clip_epsilon: float | None) -> dict:
    """Mean / min / max of the scheme's weights: per mask, or over all masked positions (`per_position`)."""
    if n in meas.position_weights:
        w = meas.position_weights[n]
        return {"mean": float(w.mean()), "min": float(w.min()), "max": float(w.max()), "per_position": True}
    w = meas.weights[n]
    entry = {"mean": float(w.mean()), "min": float(w.min()), "max": float(w.max())}
    if SOURCES[n] == "mapnet" and meas.log_ratio is not None:
        r = meas.log_ratio.exp()
        entry["mean_unclipped_ratio"] = float(r.mean())
        if n == "mapnet_clipped" and clip_epsilon is not None:
            entry["clipped_fraction"] = float(((r < 1 - clip_epsilon) | (r > 1 + clip_epsilon)).double().mean())
    return entry


def _scale_free_entries(point: dict, reps: list[dict] | None) -> dict:
    """{noise_scale, mask_noise_scale: {estimate, ci95}} from the terms and their bootstrap replicates."""
    sf = est.scale_free(point)
    rep_sf = [est.scale_free(r) for r in reps] if reps else None
    out = {}
    for name in est.SCALE_FREE:
        inverse = f"{name}_inverse"
        ci = est.inverse_interval(torch.cat([r[inverse] for r in rep_sf]), float(sf[inverse])) if rep_sf else None
        out[name] = {"estimate": float(sf[name]), "ci95": ci}
    return out


def analyse(
    meas: Measurement,
    batch_sizes=(1, 8, 32),
    bootstrap: int = 1000,
    bootstrap_masks: bool = False,
    batch_draws: int = 2000,
    seed: int = 0,
    clip_epsilon: float | None = None,
) -> dict:
    """Point estimates, bootstrap intervals, scale-free figures, the bias of weighted schemes and the mini-batch
    view."""
    schemes, M = meas.schemes, meas.gram6.shape[2]
    full = est.summarise(meas.gram6)
    ref = schemes.index("uniform") if "uniform" in schemes else None
    point = {n: est.decompose(full.norms[a], full.means[a, a], M) for a, n in enumerate(schemes)}
    dist = {
        n: est.mean_distance(full.means[a, a], full.means[ref, ref], full.means[a, ref])
        for a, n in enumerate(schemes)
        if ref is not None and a != ref
    }
    reps = {n: {k: [] for k in est.TERMS} for n in schemes}
    rep_terms = {n: [] for n in schemes}  # whole replicate dicts, chunk by chunk (for ratios of terms)
    dist_reps = {n: {k: [] for k in ("distance_sq_unbiased", "relative_sq_unbiased")} for n in dist}
    if bootstrap:
        g = torch.Generator().manual_seed(mix_seed(seed, 0xB007))
        for rep in est.bootstrap(meas.gram6, bootstrap, g, bootstrap_masks):
            for a, n in enumerate(schemes):
                d = est.decompose(rep.norms[:, a], rep.means[:, a, a], M)
                rep_terms[n].append(d)
                for k in est.TERMS:
                    reps[n][k].append(d[k])
                if n in dist:
                    dd = est.mean_distance(rep.means[:, a, a], rep.means[:, ref, ref], rep.means[:, a, ref])
                    for k in dist_reps[n]:
                        dist_reps[n][k].append(dd[k])
    out: dict = {}
    for n in schemes:
        p = point[n]
        entry = {k: {"estimate": float(p[k]), "ci95": _ci(reps[n][k], float(p[k]))} for k in est.TERMS}
        total = float(p["total_variance"])
        entry["mask_share"] = float(p["mask_variance"]) / total if total > 0 else math.nan
        entry.update(_scale_free_entries(p, rep_terms[n]))
        entry["weights"] = _weights_entry(meas, n, clip_epsilon)
        if n in dist:
            dd = dist[n]
            entry["bias_vs_uniform"] = {
                "distance": float(dd["distance"]),
                "relative": float(dd["relative"]),
                "distance_unbiased": {
                    "estimate": float(dd["distance_unbiased"]),
                    "ci95": _sqrt_ci(dist_reps[n]["distance_sq_unbiased"], float(dd["distance_sq_unbiased"])),
                },
                "relative_unbiased": {
                    "estimate": float(dd["relative_unbiased"]),
                    "ci95": _sqrt_ci(dist_reps[n]["relative_sq_unbiased"], float(dd["relative_sq_unbiased"])),
                },
                "uniform_mean_norm": float(dd["reference_norm"]),
            }
        out[n] = entry
    g = torch.Generator().manual_seed(mix_seed(seed, 0xBA7C))
    minibatch = {}
    for a, n in enumerate(schemes):
        p, rows = point[n], []
        t_ci = _ci(reps[n]["total_variance"], float(p["total_variance"]))
        for B in batch_sizes:
            direct = est.minibatch_direct(meas.gram6[a, :, :, a], B, batch_draws, g)
            rows.append(
                {
                    "batch_size": B,
                    "predicted": {
                        "estimate": float(p["total_variance"]) / B,
                        "ci95": [c / B for c in t_ci] if t_ci else None,
                    },
                    "mask_part": float(p["mask_variance"]) / B,
                    "sentence_part": float(p["sentence_variance"]) / B,
                    "direct": direct,
                    "direct_unavailable": None
                    if direct
                    else f"needs 2B <= S sentences (B={B}, S={meas.gram6.shape[1]})",
                }
            )
        minibatch[n] = rows
    return {"schemes": out, "minibatch": minibatch}


# ---------------------------------------------------------------- the frequency proposal's counts
_COUNTS_CACHE: dict[tuple, torch.Tensor] = {}


def frequency_scores(shard_dir, power: float, verify: str = "full") -> tuple[torch.Tensor | None, str | None]:
    """(count^-power type scores from the training split of `shard_dir`, None) or (None, why not).

    The counts are `data.unigram.token_counts` of the training split — what `FrequencyTraining`
    built its proposal from. Cached per folder and training files (manifest entries), so the
    snapshots of a run read the split once; pretraining snapshots open it with verify="size"
    (training has already verified it).
    """
    from ...data.shards import ShardReader, find_shard_dir, load_manifest
    from ...data.unigram import token_counts

    if shard_dir is None:
        return None, "the frequency proposal needs the training split, and no shard folder is known here"
    try:
        folder = find_shard_dir(shard_dir)
        key = (
            str(folder),
            json.dumps([f for f in load_manifest(folder)["files"] if f.get("split") == "train"], sort_keys=True),
        )
        if key not in _COUNTS_CACHE:
            reader = ShardReader(folder, "train", verify=verify)
            if len(reader) == 0:
                return None, f"the training split of {shard_dir} is empty: no token counts for the frequency proposal"
            _COUNTS_CACHE[key] = torch.from_numpy(token_counts(reader))
    except (OSError, ValueError, MapnetError) as exc:
        return (
            None,
            f"the training split of {shard_dir} cannot be read ({str(exc).splitlines()[0]}): no token counts for the "
            "frequency proposal",
        )
    return sch.frequency_type_scores(_COUNTS_CACHE[key], power), None


__all__ = [
    "Measurement",
    "pick_sentences",
    "split_available",
    "measure",
    "analyse",
    "frequency_scores",
    "NO_PROPOSAL",
    "NO_COUNTS",
]
