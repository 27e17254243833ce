"""Measure the decomposition on real sentences: draw masks, take per-example gradients, estimate.

    meas = measure(model, proposal, sequences, special_ids, vocab_size, settings.masking, settings.variance)
    body = analyse(meas, settings.variance)                  # estimates + bootstrap intervals + mini-batch view
    snap = variance_snapshot(model, proposal, valid_reader, settings, step)   # cheap, for the training loop

Order of work: every scheme's masks are drawn first (a generator per
(scheme source, sentence), seeded from variance.seed, so the same sentences
get the same masks at every call — across training steps too), then every
example's gradient is taken once (the three MAP-Net schemes share masks and
differ by a scalar weight, so their gradients are one set, scaled), and the
Gram matrix of all gradients is formed: sketched vectors directly, exact
gradients in memory-bounded panels (`estimator.gram_matrix`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch

from ..errors import MapnetError
from ..masking import mix_seed
from . import estimator as est
from .gradients import ExampleGradients, MaskedExample, eval_mode, example_gradient_fn
from .schemes import SCHEMES, SOURCES, Proposal, draw_proposal, draw_uniform, scheme_weights

_SOURCE_DOMAIN = {"uniform": 1, "mapnet": 2}
NO_PROPOSAL = "this model has no MAP-Net (trained with uniform masking): nothing to sample MAP-Net masks from"


@dataclass
class Measurement:
    """Everything the estimators need, plus what the report says about how it was obtained."""

    schemes: list[str]  # measured, in report order
    unavailable: dict[str, str]  # scheme -> why it was not measured
    gram6: torch.Tensor  # (A, S, M, A, S, M) float64 Gram of the weighted gradients
    weights: dict[str, torch.Tensor]  # scheme -> (S, M) importance weights
    log_ratio: torch.Tensor | None  # (S, M) log r of the MAP-Net masks
    mask_sizes: torch.Tensor  # (S,) K per sentence (uniform scheme)
    eligible: torch.Tensor  # (S,) n per sentence
    gradient: dict = field(default_factory=dict)  # parameters, dimension, mode, evaluations, seconds


def pick_sentences(reader, count: int, seed: int) -> tuple[list[int], torch.Tensor]:
    """`count` distinct validation sequences chosen by `seed` (the same every call), as (indices, (S, T) ids)."""
    n = len(reader)
    if n < count:
        raise MapnetError(f"the validation split holds {n} sequences; {count} were asked for (lower --sentences)")
    g = torch.Generator().manual_seed(mix_seed(seed, 0x5E17))
    idx = torch.randperm(n, generator=g)[:count].tolist()
    return idx, torch.from_numpy(reader.take(idx).astype("int64"))


def measure(model, proposal: Proposal | None, sequences: torch.Tensor, special_ids, vocab_size: int, masking,
            *, masks: int, project_dim: int = 0, params=(), seed: int = 0, method: str = "loop",
            memory_gb: float = 4.0, schemes=SCHEMES) -> Measurement:
    """Draw `masks` masks per sequence for each scheme and form the Gram matrix of the weighted gradients."""
    if proposal is None and any(SOURCES[s] == "mapnet" for s in schemes):
        unavailable = {s: NO_PROPOSAL for s in schemes if SOURCES[s] == "mapnet"}
        schemes = [s for s in schemes if SOURCES[s] != "mapnet"]
    else:
        unavailable = {}
    schemes = list(schemes)
    sources = sorted({SOURCES[s] for s in schemes}, key=["uniform", "mapnet"].index)
    device = next(model.parameters()).device
    S, M = sequences.shape[0], masks
    grads = ExampleGradients(model, params, project_dim, seed, method)
    t0 = time.perf_counter()
    with eval_mode(model, proposal if isinstance(proposal, torch.nn.Module) else None), \
            torch.autocast(device.type, enabled=False):
        draws = {src: [] for src in sources}
        for s in range(S):
            ids = sequences[s].to(device)
            for src in sources:
                key = mix_seed(seed, _SOURCE_DOMAIN[src], s)
                if src == "uniform":
                    draws[src].append(draw_uniform(ids, special_ids, vocab_size, masking, M, key))
                else:
                    draws[src].append(draw_proposal(ids, special_ids, vocab_size, masking, M, key, proposal))
        examples: list[MaskedExample] = [e for src in sources for d in draws[src] for e in d.examples]
        if grads.sketch is not None:
            x = grads.vectors(examples).double().cpu()
            gram = x @ x.T
        else:
            panel = max(1, int(memory_gb * 2**30 // (4 * grads.numel)))
            gram = est.gram_matrix(len(examples), example_gradient_fn(grads, examples), panel)
    seconds = time.perf_counter() - t0

    n_src = len(sources)
    base = gram.view(n_src, S, M, n_src, S, M)
    log_ratio = torch.stack([d.log_ratio for d in draws["mapnet"]]).cpu() if "mapnet" in sources else None
    weights = {}
    for name in schemes:
        lr = log_ratio if SOURCES[name] == "mapnet" else torch.zeros(S, M, dtype=torch.float64)
        weights[name] = scheme_weights(name, lr, masking.clip_epsilon).reshape(S, M)
    A = len(schemes)
    gram6 = torch.empty(A, S, M, A, S, M, dtype=torch.float64)
    for a, na in enumerate(schemes):
        for b, nb in enumerate(schemes):
            block = base[sources.index(SOURCES[na]), :, :, sources.index(SOURCES[nb])]
            gram6[a, :, :, b] = weights[na][:, :, None, None] * block * weights[nb][None, None]
    ref = draws[sources[0]]
    info = {"parameters": grads.numel, "tensors": len(grads.names), "dimension": grads.dim,
            "mode": "sketch" if grads.sketch is not None else "exact", "method": method,
            "examples": len(examples), "evaluations": grads.evaluations, "seconds": seconds}
    return Measurement(schemes, unavailable, gram6, weights, log_ratio,
                       torch.tensor([d.examples[0].positions.numel() for d in ref]),
                       torch.tensor([d.eligible for d in ref]), info)


def _ci(values: list[torch.Tensor] | None, estimate: float) -> list[float] | None:
    if not values:
        return None
    return est.interval(torch.cat(values), estimate)


def _sqrt_ci(values: list[torch.Tensor] | None, estimate: float) -> list[float] | None:
    """An interval for a norm from one for its (signed, unbiased) square."""
    ci = _ci(values, estimate)
    return None if ci is None else [math.sqrt(max(0.0, c)) if math.isfinite(c) else math.nan for c in ci]


def analyse(meas: Measurement, batch_sizes=(1, 8, 32), bootstrap: int = 1000, bootstrap_masks: bool = False,
            batch_draws: int = 2000, seed: int = 0, clip_epsilon: float | None = None) -> dict:
    """Point estimates, bootstrap intervals, the bias of weighted schemes and the mini-batch view (floats only)."""
    schemes, M = meas.schemes, meas.gram6.shape[2]
    full = est.summarise(meas.gram6)
    ref = schemes.index("uniform") if "uniform" in schemes else None
    point = {n: est.decompose(full.norms[a], full.means[a, a], M) for a, n in enumerate(schemes)}
    dist = {n: est.mean_distance(full.means[a, a], full.means[ref, ref], full.means[a, ref])
            for a, n in enumerate(schemes) if ref is not None and a != ref}
    reps = {n: {k: [] for k in est.TERMS} for n in schemes}
    dist_reps = {n: {k: [] for k in ("distance_sq_unbiased", "relative_sq_unbiased")} for n in dist}
    if bootstrap:
        g = torch.Generator().manual_seed(mix_seed(seed, 0xB007))
        for rep in est.bootstrap(meas.gram6, bootstrap, g, bootstrap_masks):
            for a, n in enumerate(schemes):
                d = est.decompose(rep.norms[:, a], rep.means[:, a, a], M)
                for k in est.TERMS:
                    reps[n][k].append(d[k])
                if n in dist:
                    dd = est.mean_distance(rep.means[:, a, a], rep.means[:, ref, ref], rep.means[:, a, ref])
                    for k in dist_reps[n]:
                        dist_reps[n][k].append(dd[k])
    out: dict = {}
    for a, n in enumerate(schemes):
        p = point[n]
        entry = {k: {"estimate": float(p[k]), "ci95": _ci(reps[n][k], float(p[k]))} for k in est.TERMS}
        total = float(p["total_variance"])
        entry["mask_share"] = float(p["mask_variance"]) / total if total > 0 else math.nan
        w = meas.weights[n]
        entry["weights"] = {"mean": float(w.mean()), "min": float(w.min()), "max": float(w.max())}
        if n != "uniform" and meas.log_ratio is not None:
            r = meas.log_ratio.exp()
            entry["weights"]["mean_unclipped_ratio"] = float(r.mean())
            if n == "mapnet_clipped" and clip_epsilon is not None:
                entry["weights"]["clipped_fraction"] = float(((r < 1 - clip_epsilon) | (r > 1 + clip_epsilon)).double().mean())
        if n in dist:
            dd = dist[n]
            entry["bias_vs_uniform"] = {
                "distance": float(dd["distance"]), "relative": float(dd["relative"]),
                "distance_unbiased": {"estimate": float(dd["distance_unbiased"]),
                                      "ci95": _sqrt_ci(dist_reps[n]["distance_sq_unbiased"], float(dd["distance_sq_unbiased"]))},
                "relative_unbiased": {"estimate": float(dd["relative_unbiased"]),
                                      "ci95": _sqrt_ci(dist_reps[n]["relative_sq_unbiased"], float(dd["relative_sq_unbiased"]))},
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
            rows.append({
                "batch_size": B,
                "predicted": {"estimate": float(p["total_variance"]) / B, "ci95": [c / B for c in t_ci] if t_ci else None},
                "mask_part": float(p["mask_variance"]) / B, "sentence_part": float(p["sentence_variance"]) / B,
                "direct": direct,
                "direct_unavailable": None if direct else f"needs 2B <= S sentences (B={B}, S={meas.gram6.shape[1]})",
            })
        minibatch[n] = rows
    return {"schemes": out, "minibatch": minibatch}


def variance_snapshot(model, proposal_or_None, reader, settings, step: int) -> dict:
    """A cheap decomposition for the metrics file during pretraining.

    Uses variance.snapshot_sentences x variance.snapshot_masks (default 8 x 4)
    with a variance.snapshot_project_dim sketch (default 4096), the same
    sentences and masks at every step (fixed seeds), no bootstrap. Returns
    {"step", "sentences", "masks", "project_dim", "seconds", "schemes":
    {scheme: {"mask_variance", "sentence_variance", "total_variance",
    "mask_share"[, "relative_bias"]}}} (undefined numbers are None); MAP-Net schemes only when a proposal is
    given. `model` must be the bare module (not DDP-wrapped); the model's
    train/eval flags, its `.grad`s and the global RNG are left as found.
    """
    v = settings.variance
    _, sequences = pick_sentences(reader, v.snapshot_sentences, v.seed)
    meas = measure(model, proposal_or_None, sequences, reader.special_ids, reader.vocab_size, settings.masking,
                   masks=v.snapshot_masks, project_dim=v.snapshot_project_dim, params=v.params, seed=v.seed,
                   method=v.method, memory_gb=v.memory_gb)
    full = est.summarise(meas.gram6)
    M = v.snapshot_masks
    out = {}
    for a, n in enumerate(meas.schemes):
        d = est.decompose(full.norms[a], full.means[a, a], M)
        total = float(d["total_variance"])
        out[n] = {"mask_variance": float(d["mask_variance"]), "sentence_variance": float(d["sentence_variance"]),
                  "total_variance": total, "mask_share": float(d["mask_variance"]) / total if total > 0 else math.nan}
        if n != "uniform":
            ref = meas.schemes.index("uniform")
            dist = est.mean_distance(full.means[a, a], full.means[ref, ref], full.means[a, ref])
            out[n]["relative_bias"] = float(dist["relative_unbiased"])
    from ..atomic import json_safe  # NaN (an undefined relative bias) would make the metrics line invalid JSON

    return json_safe({"step": int(step), "sentences": v.snapshot_sentences, "masks": M,
                    "project_dim": v.snapshot_project_dim, "seconds": meas.gradient["seconds"], "schemes": out})




# ---------------------------------------------------------------- a checkpoint on disk
@dataclass
class Target:
    """What `mapnet variance` measures: a checkpoint's model (+ MAP-Net) and its validation sequences."""

    model: torch.nn.Module
    proposal: torch.nn.Module | None
    reader: object  # ShardReader of the validation split
    settings: object  # the checkpoint's own settings (masking as trained)
    meta: dict  # config.json + path


def load_target(path, data=None) -> Target:
    """Load a checkpoint (or a run's newest), its MAP-Net when it has one, and the validation shards.

    The shards are `data`, else the folder recorded in the run's run.json.
    Refuses shards encoded with another tokenizer than the checkpoint's.
    """
    import json
    from pathlib import Path

    from safetensors import safe_open

    from .. import checkpoint
    from ..data.shards import ShardReader
    from ..mapnet.proposal import ProposalConfig, ProposalNetwork, has_proposal_weights, load_proposal_state_dict

    ckpt = checkpoint.resolve_checkpoint(path)
    model, meta = checkpoint.load_model(ckpt)
    settings = checkpoint.load_settings(ckpt)
    with safe_open(str(ckpt / checkpoint.WEIGHTS), framework="pt") as fh:
        keys = list(fh.keys())
        tensors = {k: fh.get_tensor(k) for k in keys if k.startswith("mapnet.")} if has_proposal_weights(keys) else None
    proposal = None
    if tensors is not None:
        proposal = ProposalNetwork(ProposalConfig.from_settings(settings.model, settings.masking), model.encoder.tok_embeddings)
        load_proposal_state_dict(proposal, tensors)
    if data is None:
        run_json = ckpt.parent.parent / "run.json"
        try:
            data = json.loads(run_json.read_text(encoding="utf-8"))["shards"]["path"]
        except (OSError, ValueError, KeyError, TypeError):
            raise MapnetError(f"cannot tell which shards {ckpt} was trained on ({run_json} is missing or has no "
                              "shards.path); pass --data SHARDS") from None
    reader = ShardReader(Path(data), "valid", verify=settings.shard.verify)
    if len(reader) == 0:
        raise MapnetError(f"{reader.dir} has no validation sequences (shard.valid_fraction was 0); the variance is measured on held-out data")
    if reader.manifest.get("tokenizer_sha256") != meta.get("tokenizer_sha256"):
        raise MapnetError(f"{reader.dir} was encoded with another tokenizer than {ckpt}")
    return Target(model, proposal, reader, settings, meta)


def variance_report(target: Target, settings) -> dict:
    """Measure + analyse + assemble the JSON document (`report.SCHEMA`) with `settings.variance`."""
    from .report import build_report

    v = settings.variance
    idx, sequences = pick_sentences(target.reader, v.sentences, v.seed)
    meas = measure(target.model, target.proposal, sequences, target.reader.special_ids, target.reader.vocab_size,
                   settings.masking, masks=v.masks, project_dim=v.project_dim, params=v.params, seed=v.seed,
                   method=v.method, memory_gb=v.memory_gb)
    analysis = analyse(meas, v.batch_sizes, v.bootstrap, v.bootstrap_masks, v.batch_draws, v.seed,
                       settings.masking.clip_epsilon)
    ckpt = {"path": target.meta.get("path"), "step": target.meta.get("step"),
            "masking": target.meta.get("masking", settings.masking.strategy)}
    data = {"shards": str(target.reader.dir), "split": "valid", "sentences": idx}
    return build_report(meas, analysis, settings=settings, checkpoint=ckpt, data=data)


__all__ = ["Measurement", "pick_sentences", "measure", "analyse", "variance_snapshot", "NO_PROPOSAL", "Target",
           "load_target", "variance_report"]
