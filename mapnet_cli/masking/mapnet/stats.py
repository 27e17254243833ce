"""Cheap per-step numbers that say what MAP-Net is doing, as sums that add across micro-batches and ranks.

    stats = MapnetStats()
    for micro in micro_batches:
        loss, part = mapnet_micro_batch_loss(...)
        stats.add(part)                   # tensors stay on the device: no sync per micro-batch
    flat = stats.as_tensor()              # one all_reduce(SUM) over ranks, then
    summary = MapnetStats.from_tensor(stats.names(), flat).summary()   # {"mapnet/entropy": ...}

Every number is kept as a (sum, count) pair, so averages over a step are exact whatever the micro-batch split.
The summary keys (`mapnet/p_uniform`, `entropy`, `ess` = (sum w)^2 / sum w^2 / sequences, `clipped_fraction`, ...;
`token_weight`, `token_ess`, `max_token_weight` with HT weights; `mass/<kind>`, `share/<kind>`, means over
sequences, with token kinds): docs/masking.md#map-net-masking-mapnet ("Metrics") and its HT metrics. `histograms()`
gives samples, not sums, of this process's micro-batches, for TensorBoard / W&B only, because a mean hides whether
a few sequences or positions carry the skew: docs/pretraining.md#watching-a-run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch

_P = "mapnet/"


class MapnetStats:
    """Named (sum, count) pairs; `add` merges, `summary` divides."""

    def __init__(self, totals: Mapping[str, tuple[torch.Tensor | float, torch.Tensor | float]] | None = None):
        self.totals: dict[str, list] = {k: [s, c] for k, (s, c) in (totals or {}).items()}
        self.samples: dict[str, list[torch.Tensor]] = {}  # histogram name -> 1-d tensors, one per micro-batch

    def sample(self, name: str, values: torch.Tensor) -> None:
        self.samples.setdefault(name, []).append(values.detach().reshape(-1))

    def put(self, name: str, total, count) -> None:
        if name in self.totals:
            self.totals[name][0] = self.totals[name][0] + total
            self.totals[name][1] = self.totals[name][1] + count
        else:
            self.totals[name] = [total, count]

    def add(self, other: MapnetStats) -> MapnetStats:
        for name, (s, c) in other.totals.items():
            self.put(name, s, c)
        for name, parts in other.samples.items():
            self.samples.setdefault(name, []).extend(parts)
        return self

    def histograms(self) -> dict[str, np.ndarray]:
        """{"mapnet/histogram/<name>": float64 values} of the samples taken (this process only)."""
        return {
            f"{_P}histogram/{name}": torch.cat(parts).to("cpu", torch.float64).numpy()
            for name, parts in sorted(self.samples.items())
            if sum(p.numel() for p in parts)
        }

    def names(self) -> list[str]:
        return sorted(self.totals)

    def as_tensor(self, device=None) -> torch.Tensor:
        """[sum_0, count_0, sum_1, ...] in `names()` order, float64 — for one all_reduce(SUM)."""
        vals = []
        for name in self.names():
            for v in self.totals[name]:
                vals.append(
                    v.detach().to(torch.float64).reshape(())
                    if torch.is_tensor(v)
                    else torch.tensor(float(v), dtype=torch.float64)
                )
        if not vals:
            return torch.zeros(0, dtype=torch.float64, device=device)
        dev = device or next((v.device for v in vals if v.device.type != "cpu"), torch.device("cpu"))
        return torch.stack([v.to(dev) for v in vals])

    @classmethod
    def from_tensor(cls, names: list[str], flat: torch.Tensor) -> MapnetStats:
        values = flat.tolist()
        return cls({n: (values[2 * i], values[2 * i + 1]) for i, n in enumerate(names)})

    def summary(self) -> dict[str, float]:
        """Means (sum / count; NaN-free: a count of 0 gives no key), plus `ess` from its raw sums."""
        names = self.names()
        flat = self.as_tensor(torch.device("cpu")).tolist()  # one device sync for all numbers
        raw = {n: (flat[2 * i], flat[2 * i + 1]) for i, n in enumerate(names)}
        out = {}
        for name, (s, c) in raw.items():
            if name.startswith("_"):
                continue
            if c > 0:
                out[_P + name] = s / c
        if "_w" in raw and "_w2" in raw and raw["_w2"][0] > 0 and raw["_w"][1] > 0:
            w_sum, n = raw["_w"]
            out[_P + "ess"] = w_sum * w_sum / raw["_w2"][0] / n
            out[_P + "weight"] = w_sum / n
        if "_tw" in raw and "_tw2" in raw and raw["_tw2"][0] > 0 and raw["_tw"][1] > 0:
            tw_sum, count = raw["_tw"]
            out[_P + "token_ess"] = tw_sum * tw_sum / raw["_tw2"][0] / count
            out[_P + "token_weight"] = tw_sum / count
        return out


def summary_keys(kinds=()) -> list[str]:
    """Every key `MapnetStats.summary` can give (the list in the module doc), for token kinds `kinds`."""
    names = [
        "p_uniform",
        "uniform_fraction",
        "entropy",
        "ess",
        "weight",
        "clipped_fraction",
        "log_ratio",
        "loss_map_tokens",
        "loss_uniform_tokens",
        "map_objective",
        "token_weight",
        "token_ess",
        "max_token_weight",
    ]
    names += [f"{what}/{kind}" for kind in kinds for what in ("mass", "share")]
    return [_P + n for n in names]


@torch.no_grad()
def collect(
    *,
    log_probs: torch.Tensor,
    eligible: torch.Tensor,
    input_ids: torch.Tensor,
    chosen: torch.Tensor,
    uniform_rows: torch.Tensor,
    log_ratio: torch.Tensor,
    weights: torch.Tensor,
    token_losses: torch.Tensor,
    train_rows: torch.Tensor,
    map_terms: torch.Tensor,
    p_uniform: float,
    clip_epsilon: float,
    token_kinds: Mapping[str, torch.Tensor] | None = None,
    token_weights: torch.Tensor | None = None,
) -> MapnetStats:
    """The numbers of one micro-batch (all tensors (B, T) or (B,); `token_losses` dense (B, T), 0 off `chosen`)."""
    st = MapnetStats()
    B = input_ids.shape[0]
    f = torch.float64
    n = eligible.sum(1)
    st.put("p_uniform", p_uniform * B, B)
    st.put("uniform_fraction", uniform_rows.sum().to(f), B)

    log_p = log_probs.detach().to(f)
    p = log_p.exp()  # exactly 0 off the eligible set
    plogp = torch.where(eligible, p * log_p, torch.zeros_like(p))
    entropy = -plogp.sum(1)
    multi = n >= 2  # entropy / log n is undefined for n < 2
    normalised = (entropy / torch.log(n.clamp(min=2).to(f)))[multi]
    st.put("entropy", normalised.sum(), multi.sum())
    st.sample("entropy", normalised)
    st.sample("log10_relative_p", torch.log10(p * n[:, None].to(f))[eligible & (p > 0)])

    map_rows = ~uniform_rows & (chosen.sum(1) > 0)
    w = weights.to(f)
    st.put("_w", w.sum(), B)
    st.put("_w2", (w * w).sum(), B)
    lr = log_ratio.to(f)
    outside = (lr < math.log1p(-clip_epsilon)) | (lr > math.log1p(clip_epsilon))
    st.put("clipped_fraction", (outside & map_rows).sum().to(f), map_rows.sum())
    st.put("log_ratio", torch.where(map_rows, lr, torch.zeros_like(lr)).sum(), map_rows.sum())

    tl = token_losses.detach().to(f)
    map_tok = chosen & map_rows[:, None]
    uni_tok = chosen & uniform_rows[:, None]
    st.put("loss_map_tokens", torch.where(map_tok, tl, torch.zeros_like(tl)).sum(), map_tok.sum())
    st.put("loss_uniform_tokens", torch.where(uni_tok, tl, torch.zeros_like(tl)).sum(), uni_tok.sum())
    st.put(
        "map_objective",
        torch.where(train_rows, map_terms.detach().to(f), torch.zeros(B, dtype=f, device=tl.device)).sum(),
        train_rows.sum(),
    )

    if token_weights is not None:  # HT: per-position weights at chosen positions
        tw = torch.where(chosen, token_weights.to(f), torch.zeros_like(tl))
        st.put("_tw", tw.sum(), chosen.sum())
        st.put("_tw2", (tw * tw).sum(), chosen.sum())
        row_max = tw.max(1).values
        st.put("max_token_weight", row_max[n > 0].sum(), (n > 0).sum())
        st.sample("token_weight", token_weights.to(f)[chosen])

    if token_kinds:
        has = n > 0
        for kind, ids in token_kinds.items():
            ids = torch.as_tensor(ids, device=input_ids.device, dtype=input_ids.dtype)
            of_kind = torch.isin(input_ids, ids) & eligible
            mass = torch.where(of_kind, p, torch.zeros_like(p)).sum(1)
            share = of_kind.sum(1).to(f) / n.clamp(min=1).to(f)
            st.put(f"mass/{kind}", mass[has].sum(), has.sum())
            st.put(f"share/{kind}", share[has].sum(), has.sum())
    return st


__all__ = ["MapnetStats", "summary_keys", "collect"]
