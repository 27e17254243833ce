"""Per-example gradients of the (importance-weighted) MLM loss, exact or sketched.

    grads = ExampleGradients(model, patterns=("encoder.blocks.*",), project_dim=4096, seed=0)
    vec, blocks = grads.vector(example), grads.blocks(example)   # (D,) sketch of w * d loss / d theta; exact blocks

One example is one masked sequence; its loss is the per-sequence loss training differentiates (mean cross-entropy
over the masked positions, or sum_i w_i l_i / K with per-position weights) times the scheme's scalar weight,
w.r.t. every parameter of the MLM model or those matching fnmatch `patterns`; dropout off (a noise source that is
neither mask nor sentence); `loop` (default) or `vmap`, never touching `.grad`. With `project_dim` D > 0 a sparse
Rademacher sketch (CountSketch, one +-1 per column, seeded per parameter name) maps each gradient to R^D, and
every estimate (linear in the Gram entries) stays unbiased:

    E[<S x, S y>] = <x, y>,   a squared norm's relative std <= sqrt(2/D) (2.2% at D = 4096).

The derivation, the loss in full, the timings that chose `loop`: docs/internals.md#evaluationvariancegradientspy.
"""

from __future__ import annotations

import contextlib
import fnmatch
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import MapnetError
from ...masking.uniform import mix_seed


@dataclass(frozen=True)
class MaskedExample:
    """One masked sequence: what the encoder sees, what it must predict, and its loss weight."""

    inputs: torch.Tensor  # (T,) corrupted token ids
    positions: torch.Tensor  # (K,) masked positions, ascending
    labels: torch.Tensor  # (K,) the original tokens at those positions
    weight: float = 1.0  # importance weight on this sequence's loss
    attention_mask: torch.Tensor | None = None  # (T,) bool, None when nothing is padded
    token_weights: torch.Tensor | None = None  # (K,) weight of each masked position (aligned with positions), or None


def example_loss(model: nn.Module, ex: MaskedExample, params: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """w * mean_k CE(logits at pos_k, label_k) for one sequence (a batch of 1);
    with `token_weights` w * sum_k w_k CE_k / K, the loss training uses with per-position weights."""
    att = None if ex.attention_mask is None else ex.attention_mask[None]
    args = (ex.inputs[None], att, ex.positions)  # flat indices into 1 x T are the positions themselves
    logits = model(*args) if params is None else torch.func.functional_call(model, params, args)
    if ex.token_weights is None:  # the scalar path, unchanged
        return ex.weight * F.cross_entropy(logits.float(), ex.labels)
    token = F.cross_entropy(logits.float(), ex.labels, reduction="none")
    return ex.weight * (token * ex.token_weights.to(token.dtype)).sum() / max(ex.positions.numel(), 1)


def select_parameters(model: nn.Module, patterns: Sequence[str] = ()) -> list[tuple[str, nn.Parameter]]:
    """(name, parameter) of `model` matching any fnmatch pattern (all when `patterns` is empty)."""
    named = list(model.named_parameters())  # shared tensors appear once (the tied embedding)
    if not patterns:
        return named
    chosen = [(n, p) for n, p in named if any(fnmatch.fnmatchcase(n, pat) for pat in patterns)]
    unmatched = [pat for pat in patterns if not any(fnmatch.fnmatchcase(n, pat) for n, _ in named)]
    if unmatched:
        some = ", ".join(n for n, _ in named[:4])
        raise MapnetError(
            f"--params pattern(s) {', '.join(map(repr, unmatched))} match no parameter (names look like: {some}, ...)"
        )
    return chosen


@contextlib.contextmanager
def eval_mode(*modules: nn.Module | None) -> Iterator[None]:
    """Switch dropout off for the measurement and restore every submodule's flag afterwards."""
    saved = [(m, m.training) for mod in modules if mod is not None for m in mod.modules()]
    for mod in modules:
        if mod is not None:
            mod.eval()
    try:
        yield
    finally:
        for m, flag in saved:
            m.training = flag


class CountSketch:
    """A seeded sparse Rademacher projection R^P -> R^D applied block by block (see the module doc)."""

    def __init__(self, blocks: Sequence[tuple[str, int]], dim: int, seed: int, device: torch.device | str = "cpu"):
        if dim < 1:
            raise ValueError("sketch dimension must be >= 1")
        self.dim = dim
        self.index: list[torch.Tensor] = []
        for name, numel in blocks:
            g = torch.Generator().manual_seed(mix_seed(seed, zlib.crc32(name.encode())))
            rows = torch.randint(0, dim, (numel,), generator=g, dtype=torch.int64)
            negative = torch.randint(0, 2, (numel,), generator=g, dtype=torch.int64)
            # int32 halves the memory of the hash (P entries); index_add_ accepts it.
            self.index.append((rows + dim * negative).to(torch.int32).to(device))

    def project(self, grads: Sequence[torch.Tensor]) -> torch.Tensor:
        acc = torch.zeros(2 * self.dim, dtype=torch.float32, device=self.index[0].device if self.index else "cpu")
        for idx, g in zip(self.index, grads):
            acc.index_add_(0, idx, g.reshape(-1).float())
        return acc[: self.dim] - acc[self.dim :]


class ExampleGradients:
    """Gradients of single masked sequences w.r.t. a chosen set of parameters, exact or sketched."""

    def __init__(
        self, model: nn.Module, patterns: Sequence[str] = (), project_dim: int = 0, seed: int = 0, method: str = "loop"
    ):
        if method not in ("loop", "vmap"):
            raise ValueError(f"method must be 'loop' or 'vmap' (got {method!r})")
        self.model = model
        self.method = method
        self.named = select_parameters(model, patterns)
        self.names = [n for n, _ in self.named]
        self.params = [p for _, p in self.named]
        self.numel = sum(p.numel() for p in self.params)
        device = self.params[0].device
        self.sketch = (
            CountSketch([(n, p.numel()) for n, p in self.named], project_dim, seed, device) if project_dim else None
        )
        self.dim = project_dim or self.numel
        self.evaluations = 0  # gradient evaluations so far (recomputation included)

    # -------------------------------------------------------------- exact
    def blocks(self, ex: MaskedExample) -> list[torch.Tensor]:
        """The exact gradient of one example, one tensor per selected parameter (caller holds eval mode)."""
        with torch.enable_grad():
            loss = example_loss(self.model, ex)
            grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        self.evaluations += 1
        return [torch.zeros_like(p) if g is None else g for g, p in zip(grads, self.params)]

    def blocks_vmap(self, examples: Sequence[MaskedExample]) -> list[list[torch.Tensor]]:
        """Exact gradients of examples that share mask size and padding, via vmap(grad)."""
        first = examples[0]
        if any(e.positions.numel() != first.positions.numel() for e in examples):
            raise ValueError("vmap needs examples with the same number of masked positions")
        if any((e.token_weights is None) != (first.token_weights is None) for e in examples):
            raise ValueError("vmap needs examples that all have, or all lack, per-position weights")
        params = {n: p.detach() for n, p in self.named}
        per_position = first.token_weights is not None

        def loss(p, inputs, positions, labels, weight, token_weights):
            ex = MaskedExample(
                inputs, positions, labels, weight, first.attention_mask, token_weights if per_position else None
            )
            return example_loss(self.model, ex, p)

        token_weights = (
            torch.stack([e.token_weights for e in examples])
            if per_position
            else torch.zeros(len(examples), device=first.inputs.device)
        )  # unused placeholder
        stacked = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0, 0, 0, 0))(
            params,
            torch.stack([e.inputs for e in examples]),
            torch.stack([e.positions for e in examples]),
            torch.stack([e.labels for e in examples]),
            torch.tensor([float(e.weight) for e in examples], device=first.inputs.device),
            token_weights,
        )
        self.evaluations += len(examples)
        return [[stacked[n][i] for n in self.names] for i in range(len(examples))]

    # -------------------------------------------------------------- sketched
    def vectors(self, examples: Sequence[MaskedExample]) -> torch.Tensor:
        """(len(examples), D): the sketch of each example's gradient (caller holds eval mode)."""
        if self.sketch is None:
            raise ValueError("vectors() needs project_dim > 0; use blocks() for exact gradients")
        out = []
        for group in self._runs(examples) if self.method == "vmap" else ([e] for e in examples):
            grads = self.blocks_vmap(group) if self.method == "vmap" else [self.blocks(group[0])]
            out.extend(self.sketch.project(g) for g in grads)
        return torch.stack(out)

    @staticmethod
    def _runs(examples: Sequence[MaskedExample]) -> Iterator[list[MaskedExample]]:
        """Consecutive runs that vmap can batch: same mask size, same padding, same kind of weight."""
        run: list[MaskedExample] = []
        for e in examples:
            if run and (
                e.positions.numel() != run[0].positions.numel()
                or e.attention_mask is not run[0].attention_mask
                or (e.token_weights is None) != (run[0].token_weights is None)
            ):
                yield run
                run = []
            run.append(e)
        if run:
            yield run


def example_gradient_fn(grads: ExampleGradients, examples: Sequence[MaskedExample]):
    """`i -> blocks of example i` for `estimator.gram_matrix`; with vmap, computes a run at a time and keeps it."""
    if grads.method == "loop":
        return lambda i: grads.blocks(examples[i])
    runs, owner = [], {}
    for run in ExampleGradients._runs(examples):
        start = sum(len(r) for r in runs)
        runs.append(run)
        for k in range(len(run)):
            owner[start + k] = (len(runs) - 1, k)
    cache: dict[int, list[list[torch.Tensor]]] = {}

    def fn(i: int) -> list[torch.Tensor]:
        r, k = owner[i]
        if r not in cache:
            cache.clear()  # gram_matrix walks indices in order: one run in memory at a time
            cache[r] = grads.blocks_vmap(runs[r])
        return cache[r][k]

    return fn


__all__ = [
    "MaskedExample",
    "example_loss",
    "select_parameters",
    "eval_mode",
    "CountSketch",
    "ExampleGradients",
    "example_gradient_fn",
]
