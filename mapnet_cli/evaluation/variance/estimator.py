"""Unbiased estimators of the paper's gradient-variance decomposition, from inner products only.

    gram = gram_matrix(n_examples, example_gradient, panel_size)      # any per-example gradient function
    stats = summarise(gram.view(A, S, M, A, S, M))                    # A schemes x S sentences x M masks
    terms = decompose(stats.norms[a], stats.means[a, a], M)          # mask / sentence / total, one scheme

S sentences x_s i.i.d., M masks each, gradients g_{s,m} (times the scheme's weight); gbar_s their mean per
sentence, gbar the grand mean, w_s = 1/(M-1) sum_m ||g_{s,m} - gbar_s||^2, b^ = 1/(S-1) sum_s ||gbar_s - gbar||^2:

    W^ = (1/S) sum_s w_s      B^ = b^ - W^ / M      T^ = W^ + B^ (exactly, also by the pair formula)
    N^ = 1/(S(S-1)) sum_{s != t} <gbar_s, gbar_t>      noise_scale = T^ / N^      mask_noise_scale = W^ / N^

W^, B^, T^, N^ are unbiased for E_x tr Var(g|x), tr Var_x E(g|x), tr Var(g) and ||E g||^2 (Theorem 1's terms);
the ratios are consistent and scale-free. All need only the Gram matrix, in fact two sentence-level summaries,
which bootstrap replicates re-index. The derivation: docs/internals.md#evaluationvarianceestimatorpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

TERMS = (
    "mask_variance",
    "sentence_variance",
    "total_variance",
    "sum_of_terms",
    "between_sentence_raw",
    "pooled_biased",
    "mean_gradient_sq",
)
SCALE_FREE = ("noise_scale", "mask_noise_scale")  # ratio -> its variance term: noise_scale = total / mean_gradient_sq
_SCALE_FREE_TERM = {"noise_scale": "total_variance", "mask_noise_scale": "mask_variance"}


# ---------------------------------------------------------------- the Gram matrix of a per-example gradient function
def gram_matrix(n: int, example_gradient: Callable[[int], Sequence[torch.Tensor]], panel_size: int) -> torch.Tensor:
    """G[i, j] = <g_i, g_j> (float64) for i, j < n, where `example_gradient(i)` returns g_i as a list of blocks.

    A gradient is a list of tensors (one per parameter, or one projected
    vector); blocks are never concatenated. At most `panel_size` gradients
    are held at once: rows are filled panel by panel, and examples after the
    panel are recomputed and streamed past it. Gradient evaluations:
    n + sum over later panels of the examples after them, i.e. n when
    panel_size >= n and about n^2 / (2 panel_size) otherwise — exact
    inner products for any model size, bought with recomputation.
    `example_gradient` must be deterministic (eval mode, fixed masks).
    """
    if n < 1:
        raise ValueError("gram_matrix needs at least one example")
    panel_size = max(1, min(int(panel_size), n))
    gram = torch.zeros(n, n, dtype=torch.float64)
    for start in range(0, n, panel_size):
        stop = min(n, start + panel_size)
        panel: list[torch.Tensor] | None = None  # per block: (panel, numel) float32
        for i in range(start, stop):
            blocks = example_gradient(i)
            if panel is None:
                panel = [torch.empty(stop - start, b.numel(), dtype=b.dtype, device=b.device) for b in blocks]
            for store, b in zip(panel, blocks):
                store[i - start] = b.reshape(-1)
        # Float32 products per block, summed in float64 across blocks.
        block = sum(
            ((p @ p.T).double().cpu() for p in panel), torch.zeros(stop - start, stop - start, dtype=torch.float64)
        )
        gram[start:stop, start:stop] = block
        for j in range(stop, n):
            blocks = example_gradient(j)
            col = sum(
                ((p @ b.reshape(-1)).double().cpu() for p, b in zip(panel, blocks)),
                torch.zeros(stop - start, dtype=torch.float64),
            )
            gram[start:stop, j] = col
            gram[j, start:stop] = col
        del panel
    return gram


# ---------------------------------------------------------------- sentence-level summaries
@dataclass(frozen=True)
class Summaries:
    """Sufficient statistics of A groups (schemes) x S sentences x M masks of gradients.

    norms[..., a, s]       = sum_m ||g_{a,s,m}||^2
    means[..., a, b, s, t] = <gbar^a_s, gbar^b_t>     (gbar^a_s: mean over the M masks)
    Leading dimensions hold bootstrap replicates.
    """

    norms: torch.Tensor
    means: torch.Tensor
    masks: int


def summarise(gram6: torch.Tensor) -> Summaries:
    """Summaries from a Gram tensor shaped (..., A, S, M, A, S, M)."""
    *_, A, S, M, A2, S2, M2 = gram6.shape
    if (A, S, M) != (A2, S2, M2):
        raise ValueError(f"gram must be (..., A, S, M, A, S, M), got {tuple(gram6.shape)}")
    g = gram6.double()
    # diagonal over (a, s, m) of the first and second index triples
    diag = torch.diagonal(torch.diagonal(torch.diagonal(g, dim1=-6, dim2=-3), dim1=-5, dim2=-3), dim1=-4, dim2=-3)
    norms = diag.sum(-1)  # (..., A, S)
    # <gbar^a_s, gbar^b_t> = (1/M^2) sum_{m, m'} G[a, s, m, b, t, m']
    means = g.sum(dim=(-4, -1)) / (M * M)  # (..., A, S, A, S)
    means = means.movedim(-2, -3)  # (..., A, A, S, S)
    return Summaries(norms, means, M)


# ---------------------------------------------------------------- the decomposition of one scheme
def decompose(norms: torch.Tensor, means: torch.Tensor, masks: int) -> dict[str, torch.Tensor]:
    """The unbiased traces of one scheme from norms (..., S) and means (..., S, S); see the module doc.

    Returns mask_variance (W^), sentence_variance (B^), total_variance (T^,
    by the cross-sentence pair formula), sum_of_terms (W^ + B^, equal to T^
    up to rounding), between_sentence_raw (b^, biased by W/M),
    pooled_biased (the naive pooled sample variance, for comparison) and
    mean_gradient_sq (N^, the unbiased ||E g||^2 of this scheme).
    """
    S, M = norms.shape[-1], masks
    if S < 2 or M < 2:
        raise ValueError(f"the decomposition needs S >= 2 sentences and M >= 2 masks (got S={S}, M={M})")
    self_means = torch.diagonal(means, dim1=-2, dim2=-1)  # ||gbar_s||^2
    within = (norms - M * self_means) / (M - 1)  # w_s: sum_m ||g - gbar_s||^2 = n_s - M ||gbar_s||^2
    mask_var = within.mean(-1)
    total_means = means.sum(dim=(-2, -1))  # S^2 ||gbar||^2
    trace_means = self_means.sum(-1)
    between_raw = (trace_means - total_means / S) / (S - 1)
    sentence_var = between_raw - mask_var / M
    cross = (total_means - trace_means) / (S * (S - 1))  # mean <gbar_s, gbar_t> over s != t
    total = norms.sum(-1) / (S * M) - cross
    pooled = (norms.sum(-1) - total_means * M / S) / (S * M - 1)  # sum ||g - gbar||^2 / (SM - 1)
    return {
        "mask_variance": mask_var,
        "sentence_variance": sentence_var,
        "total_variance": total,
        "sum_of_terms": mask_var + sentence_var,
        "between_sentence_raw": between_raw,
        "pooled_biased": pooled,
        "mean_gradient_sq": cross,
    }


def scale_free(terms: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """noise_scale = T^/N^ and mask_noise_scale = W^/N^ (+inf where N^ <= 0), and their reciprocals
    `<name>_inverse` = N^/T^, N^/W^ (finite; where intervals are taken). See the module doc."""
    signal = terms["mean_gradient_sq"]
    out = {}
    for name, term in _SCALE_FREE_TERM.items():
        var = terms[term]
        out[name] = torch.where(signal > 0, var / signal.clamp(min=1e-300), torch.full_like(var, math.inf))
        out[name + "_inverse"] = signal / var.clamp(min=1e-300)
    return out


def inverse_interval(replicates: torch.Tensor, estimate: float, level: float = 0.95) -> list[float]:
    """An interval for x = 1/y from bootstrap replicates of the signed reciprocal y (see `scale_free`).

    The interval [a, b] of y (`interval`, bias-corrected) maps to [1/b, 1/a]; an end at y <= 0
    means the mean gradient may be 0 there, and that end of x is +inf (null in the report).
    """
    lo, hi = interval(replicates, estimate, level)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return [math.nan, math.nan]
    return [1.0 / hi if hi > 0 else math.inf, 1.0 / lo if lo > 0 else math.inf]


def mean_distance(means_aa: torch.Tensor, means_uu: torch.Tensor, means_au: torch.Tensor) -> dict[str, torch.Tensor]:
    """How far scheme a's mean gradient lies from the reference (uniform) one on the same sentences.

    d_s = gbar^a_s - gbar^u_s are i.i.d. over sentences with mean
    delta = E[g^a] - E[g^u] (the bias of scheme a's gradient). The plug-in
    ||dbar||^2 has expectation ||delta||^2 + tr Var(d_s) / S; subtracting the
    unbiased v^ / S (v^ = sample-covariance trace of the d_s) gives an
    unbiased ||delta||^2. Likewise ||mu^u||^2 is estimated by
    ||gbar^u||^2 - b^_u / S. Returned: `distance` = ||dbar|| (plug-in),
    `distance_unbiased` = sqrt(max(0, unbiased ||delta||^2)), their ratios to
    the uniform mean-gradient norm (`relative`, `relative_unbiased`; NaN when
    the unbiased ||mu^u||^2 is not positive), and
    `distance_sq_unbiased` and `relative_sq_unbiased` (signed: intervals are
    taken on these and mapped through sqrt(max(0, .)), so a distance of 0
    stays inside them when it should).
    """
    S = means_aa.shape[-1]
    d = means_aa + means_uu - means_au - means_au.transpose(-2, -1)  # <d_s, d_t>
    dbar_sq = d.sum(dim=(-2, -1)) / S**2
    v = (torch.diagonal(d, dim1=-2, dim2=-1).sum(-1) - d.sum(dim=(-2, -1)) / S) / (S - 1)
    delta_sq = dbar_sq - v / S
    ref_sq = means_uu.sum(dim=(-2, -1)) / S**2
    ref_between = (torch.diagonal(means_uu, dim1=-2, dim2=-1).sum(-1) - means_uu.sum(dim=(-2, -1)) / S) / (S - 1)
    ref_sq_unbiased = ref_sq - ref_between / S
    # When the uniform mean gradient is not distinguishable from 0 (its unbiased squared norm
    # is <= 0), a relative distance means nothing: NaN, reported as null.
    ref_u = torch.where(ref_sq_unbiased > 0, ref_sq_unbiased, torch.full_like(ref_sq_unbiased, math.nan))
    dist, dist_u = dbar_sq.clamp(min=0).sqrt(), delta_sq.clamp(min=0).sqrt()
    return {
        "distance": dist,
        "distance_unbiased": dist_u,
        "distance_sq_unbiased": delta_sq,
        "relative": dist / ref_sq.sqrt(),
        "relative_unbiased": dist_u / ref_u.sqrt(),
        "relative_sq_unbiased": delta_sq / ref_u,
        "reference_norm": ref_sq.sqrt(),
    }


# ---------------------------------------------------------------- bootstrap
def bootstrap(
    gram6: torch.Tensor, replicates: int, generator: torch.Generator, resample_masks: bool = False, chunk: int = 100
):
    """Yield `Summaries` of bootstrap replicates (leading dim = replicates in the chunk).

    Sentences are resampled with replacement, the same draw for every scheme
    (the schemes were measured on the same sentences, so their comparison
    stays paired). Every statistic here is an average of i.i.d. sentence-level
    quantities (w_s) or a U-statistic of them (b^, T^), so resampling
    sentences alone reproduces their sampling spread, mask noise included
    (it is inside each w_s and gbar_s); this is the default. With
    `resample_masks` the M masks of each resampled sentence are resampled too
    — the textbook two-stage bootstrap. It counts the mask noise a second
    time and shrinks every w_s by (M-1)/M in expectation (a resample of M
    draws repeats some), so its replicates are biased and their spread mixes
    both effects; it is offered for comparison.
    """
    A, S, M = gram6.shape[:3]
    full = summarise(gram6)
    done = 0
    if resample_masks:
        chunk = max(1, min(chunk, 8))  # each replicate gathers a full-size Gram
        diag = torch.diagonal(gram6.reshape(A * S * M, A * S * M)).reshape(A, S, M)
    while done < replicates:
        r = min(chunk, replicates - done)
        sent = torch.randint(0, S, (r, S), generator=generator)
        if not resample_masks:
            norms = full.norms[:, sent].movedim(1, 0)  # (r, A, S)
            means = full.means[:, :, sent[:, :, None], sent[:, None, :]].movedim(2, 0)  # (r, A, A, S, S)
        else:
            # counts[r, s, m]: how often mask m of resampled sentence s was drawn; the summaries of
            # a resample are count-weighted sums, so no per-example index is ever materialised.
            mask = torch.randint(0, M, (r, S, M), generator=generator)
            counts = torch.zeros(r, S, M, dtype=torch.float64).scatter_add_(
                2, mask, torch.ones(r, S, M, dtype=torch.float64)
            )
            g = gram6[:, sent].movedim(1, 0)  # (r, A, S, M, A, S, M) with sentences resampled in the first slot
            g = torch.stack([g[k][:, :, :, :, sent[k]] for k in range(r)])
            norms = torch.einsum("rsm,rasm->ras", counts, diag[:, sent].movedim(1, 0))
            means = torch.einsum("rsm,rasmbtn,rtn->rabst", counts, g, counts) / (M * M)
        yield Summaries(norms, means, M)
        done += r


def interval(replicates: torch.Tensor, estimate: float | None = None, level: float = 0.95) -> list[float]:
    """Bias-corrected percentile interval of bootstrap replicates.

    A resample that repeats a sentence treats the copies as two independent
    sentences, so variance statistics are biased low under resampling (b^ by
    a factor (S-1)/S). Given the `estimate`, the percentile interval is
    shifted by estimate - mean(replicates): the bootstrap's spread and skew,
    centred where the unbiased estimate is.
    """
    lo, hi = (1 - level) / 2, 1 - (1 - level) / 2
    reps = replicates.double()
    if not bool(torch.isfinite(reps).all()) or not math.isfinite(estimate if estimate is not None else 0.0):
        return [math.nan, math.nan]  # e.g. a relative distance whose reference is 0 in some resample
    q = torch.quantile(reps, torch.tensor([lo, hi], dtype=torch.float64))
    shift = 0.0 if estimate is None else float(estimate) - float(reps.mean())
    return [float(q[0]) + shift, float(q[1]) + shift]


# ---------------------------------------------------------------- the mini-batch view
def minibatch_direct(
    gram_a: torch.Tensor, batch_size: int, draws: int, generator: torch.Generator
) -> dict[str, float] | None:
    """tr Var of a mini-batch mean (B sentences x 1 mask), measured by drawing batches.

    Each draw takes 2B distinct sentences at random, one random mask each,
    splits them into two batches and records (1/2)||mean_1 - mean_2||^2: the
    two batches share no sentence, so under i.i.d. sentences each record has
    expectation tr Var(batch mean) = T / B exactly. Returns the average over
    `draws` draws and its Monte-Carlo standard error, or None when 2B > S.
    (Averaged over every possible draw, this equals T^ / B exactly — the
    check is that batch means computed the plain way agree with the formula.)
    `gram_a`: (S, M, S, M) of one scheme.
    """
    S, M = gram_a.shape[:2]
    if 2 * batch_size > S or draws < 1:
        return None
    G = gram_a.reshape(S * M, S * M).double()
    order = torch.rand(draws, S, generator=generator).argsort(dim=1)[:, : 2 * batch_size]
    mask = torch.randint(0, M, (draws, 2 * batch_size), generator=generator)
    idx = order * M + mask
    sign = torch.cat([torch.full((batch_size,), 1.0), torch.full((batch_size,), -1.0)]).double() / batch_size
    coef = torch.zeros(draws, S * M, dtype=torch.float64).scatter_(1, idx, sign.expand(draws, -1).contiguous())
    values = 0.5 * ((coef @ G) * coef).sum(1)
    return {
        "estimate": float(values.mean()),
        "mc_stderr": float(values.std() / math.sqrt(draws)) if draws > 1 else float("nan"),
    }


__all__ = [
    "TERMS",
    "SCALE_FREE",
    "gram_matrix",
    "Summaries",
    "summarise",
    "decompose",
    "scale_free",
    "inverse_interval",
    "mean_distance",
    "bootstrap",
    "interval",
    "minibatch_direct",
]
