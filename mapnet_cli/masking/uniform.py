"""Uniform masking (the paper's RandMask) and BERT's 80/10/10 replacement, vectorised on the tensors' device.

    rng = SequenceRNG(sequence_keys(seed, step, slots))   # one stream per sequence
    eligible = eligible_positions(ids, special_ids)
    mask = uniform_mask(ids, eligible, 0.15, "exact", rng)
    inputs = apply_replacement(ids, mask, vocab_size, special_ids, generator=rng)

`count="exact"` masks K = round(mask_prob x n) of a sequence's n eligible (not special: [PAD] [UNK] [CLS] [SEP]
[MASK]) positions, half rounding up, at least 1 — the K MAP-Net samples without replacement, so the importance ratio
(1/n)^K / prod p_prop(pos_k) compares like with like and both losses average the same number of terms.
`count="bernoulli"` masks each eligible position with probability mask_prob (RoBERTa's way), also forcing one
position when the draw masks none, so every sequence has a defined loss. A `torch.Generator` gives one stream for
the batch; a `SequenceRNG` one per sequence, keyed by (seed, step, global slot), so a mask is the same however the
batch is split across ranks and micro-batches (1 x 8 and 2 x 4 runs give the same losses); its draws are made on the
CPU (Mersenne Twister, identical on every machine) and moved to the device in one copy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import torch

_M64 = (1 << 64) - 1
SPECIAL_NAMES = ("pad", "unk", "cls", "sep", "mask")

# Seed domains: unrelated random streams from the same (seed, step, slot). Training masks, evaluation
# masks and dropout are the training loop's; STRATA keys a stratified sequence's partition (shared by its
# copies), SYSTEMATIC_START the start of systematic PPS sampling (apart from the mask streams, so a
# MAP-Net row masked uniformly draws exactly what the uniform strategy draws).
TRAIN_MASKS, EVAL_MASKS, DROPOUT, STRATA, SYSTEMATIC_START = 1, 2, 3, 4, 5


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def mix_seed(*parts: int) -> int:
    """A well-spread 63-bit seed from integers (order matters); stable across runs and machines."""
    h = 0
    for p in parts:
        h = _splitmix64(h ^ (int(p) & _M64))
    return h >> 1


def sequence_keys(seed: int, step: int, slots: Sequence[int], domain: int = 0) -> list[int]:
    """Seeds of the sequences at global-batch `slots` of `step`. `domain`
    separates unrelated uses of the same (seed, step, slot) — training masks,
    evaluation masks, MAP-Net's sampling."""
    return [mix_seed(domain, seed, step, s) for s in slots]


def piece_slots(slots: Sequence[int], factor: int, batch_size: int) -> list[int]:
    """The slots of `slots`' sequences cut into `factor` pieces each (sequence-length warm-up): piece j
    of slot s is slot j x batch_size + s — unique, a function of (s, j) only, and consecutive slots
    (a stratified sequence's copies) stay in one group for every piece. In order: each sequence's pieces together."""
    return [j * batch_size + s for s in slots for j in range(factor)] if factor > 1 else list(slots)


def keyed_uniforms(
    seed: int, step: int, slots: Sequence[int], domain: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """One float64 uniform in [0, 1) per slot, a pure function of (domain, seed, step, slot) (53 bits)."""
    u = [(mix_seed(domain, seed, step, int(s)) >> 10) * 2.0**-53 for s in slots]
    return torch.tensor(u, dtype=torch.float64, device=device)


class SequenceRNG:
    """Independent random streams, one per batch row, each seeded by its key.

    Successive draws advance every row's stream, so callers must draw in a
    fixed order (mask selection, then replacement) to reproduce a batch.
    """

    def __init__(self, keys: Sequence[int]):
        self.generators = [torch.Generator().manual_seed(int(k)) for k in keys]

    def __len__(self) -> int:
        return len(self.generators)

    def uniform(self, length: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """(B, length) floats in [0, 1), row b from stream b."""
        rows = [torch.rand(length, generator=g) for g in self.generators]
        return torch.stack(rows).to(device, non_blocking=True)


def _uniform(
    shape: tuple[int, int], device: torch.device, generator: torch.Generator | SequenceRNG | None
) -> torch.Tensor:
    if isinstance(generator, SequenceRNG):
        if len(generator) != shape[0]:
            raise ValueError(f"SequenceRNG has {len(generator)} streams for a batch of {shape[0]}")
        return generator.uniform(shape[1], device)
    if generator is None:
        return torch.rand(shape, device=device)
    return torch.rand(shape, generator=generator, device=generator.device).to(device)


def special_id_list(special_ids: Mapping[str, int] | Sequence[int]) -> list[int]:
    return sorted(set(special_ids.values() if isinstance(special_ids, Mapping) else special_ids))


def eligible_positions(input_ids: torch.Tensor, special_ids: Mapping[str, int] | Sequence[int]) -> torch.Tensor:
    """True where a token may be masked: anything but the special tokens (pad included)."""
    specials = torch.tensor(special_id_list(special_ids), dtype=input_ids.dtype, device=input_ids.device)
    return ~torch.isin(input_ids, specials)


def mask_counts(eligible_counts: torch.Tensor, mask_prob: float) -> torch.Tensor:
    """K per sequence: round(mask_prob x n) with halves rounded up, at least 1, at most n."""
    k = torch.floor(eligible_counts.double() * mask_prob + 0.5).long().clamp(min=1)
    return torch.minimum(k, eligible_counts.long())


def uniform_mask(
    input_ids: torch.Tensor,
    eligible: torch.Tensor,
    mask_prob: float = 0.15,
    count: Literal["exact", "bernoulli"] = "exact",
    generator: torch.Generator | SequenceRNG | None = None,
) -> torch.Tensor:
    """A bool mask (B, T) of positions to predict, drawn uniformly among `eligible` ones."""
    B, T = input_ids.shape
    u = _uniform((B, T), input_ids.device, generator)
    # Ineligible positions get a score above every uniform, so they rank last.
    scores = u.masked_fill(~eligible, 2.0)
    n = eligible.sum(1)
    if count == "exact":
        order = scores.argsort(dim=1, stable=True)  # stable: ties in float32 draws still give exactly K
        ranks = torch.empty_like(order).scatter_(1, order, torch.arange(T, device=order.device).expand(B, T))
        return ranks < mask_counts(n, mask_prob)[:, None]
    if count == "bernoulli":
        mask = (u < mask_prob) & eligible
        empty = (mask.sum(1) == 0) & (n > 0)
        forced = torch.zeros_like(mask).scatter_(1, scores.argmin(1, keepdim=True), True)
        return mask | (forced & empty[:, None])
    raise ValueError(f"count must be 'exact' or 'bernoulli' (got {count!r})")


def replacement_draws(
    shape: tuple[int, int],
    vocab_size: int,
    special_ids: Mapping[str, int],
    device: torch.device | str,
    generator: torch.Generator | SequenceRNG | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """What the 80/10/10 replacement draws: (choice uniforms, random non-special token ids), both (B, T).
    Two uniforms per position, in this order; a token id is the `pick` uniform's share of the ordinary ids."""
    choice = _uniform(shape, device, generator)
    pick = _uniform(shape, device, generator)
    specials = torch.tensor(special_id_list(special_ids), dtype=torch.long, device=device)
    ordinary = torch.arange(vocab_size, device=device)
    ordinary = ordinary[~torch.isin(ordinary, specials)]
    return choice, ordinary[(pick * len(ordinary)).long().clamp(max=len(ordinary) - 1)]


def apply_replacement(
    input_ids: torch.Tensor,
    mask: torch.Tensor,
    vocab_size: int,
    special_ids: Mapping[str, int],
    replace_mask: float = 0.8,
    replace_random: float = 0.1,
    generator: torch.Generator | SequenceRNG | None = None,
    choice_at: torch.Tensor | None = None,
    drawn: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """The corrupted input: at masked positions [MASK] with probability
    `replace_mask`, a random non-special token with probability
    `replace_random`, else the original token. Positions outside `mask` are
    untouched. Draws two uniforms per position (choice, then random token;
    `replacement_draws`), or takes them ready in `drawn` (drawn on the host
    beforehand: nothing here then copies or reads anything between host and device).
    `choice_at` (B, T), optional: the position whose choice draw decides each
    position, so a whole unit (a word, a span) gets one 80/10/10 decision
    (`units.py`); the draws themselves are the same."""
    if drawn is not None and generator is not None:
        raise ValueError("apply_replacement takes its draws from drawn or from generator, not both")
    if drawn is None:
        drawn = replacement_draws(tuple(input_ids.shape), vocab_size, special_ids, input_ids.device, generator)
    choice, random_ids = drawn
    if choice_at is not None:
        choice = choice.gather(1, choice_at)
    to_mask = mask & (choice < replace_mask)
    to_random = mask & (choice >= replace_mask) & (choice < replace_mask + replace_random)
    out = input_ids.masked_fill(to_mask, special_ids["mask"])
    return torch.where(to_random, random_ids.to(input_ids.dtype), out)


__all__ = [
    "SPECIAL_NAMES",
    "TRAIN_MASKS",
    "EVAL_MASKS",
    "DROPOUT",
    "STRATA",
    "SYSTEMATIC_START",
    "piece_slots",
    "keyed_uniforms",
    "mix_seed",
    "sequence_keys",
    "SequenceRNG",
    "eligible_positions",
    "mask_counts",
    "uniform_mask",
    "replacement_draws",
    "apply_replacement",
    "special_id_list",
]
