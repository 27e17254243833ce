"""Uniform masking and the 80/10/10 replacement."""

from __future__ import annotations

import pytest
import torch

from mapnet_cli.masking.uniform import (
    SequenceRNG,
    apply_replacement,
    eligible_positions,
    mask_counts,
    mix_seed,
    sequence_keys,
    uniform_mask,
)
from mapnet_cli.settings import MaskingSettings

SPECIAL = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
V = 50


def batch(B=16, T=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    ids[:, 0] = SPECIAL["cls"]
    ids[:, 17] = SPECIAL["sep"]
    for b in range(B):  # a different amount of padding per row
        ids[b, T - b :] = SPECIAL["pad"]
    ids[min(3, B - 1), 5] = SPECIAL["unk"]
    return ids


def test_mask_counts_round_half_up_and_at_least_one():
    n = torch.tensor([0, 1, 3, 10, 30, 100, 510])
    assert mask_counts(n, 0.15).tolist() == [0, 1, 1, 2, 5, 15, 77]


@pytest.mark.parametrize("count", ["exact", "bernoulli"])
def test_never_masks_specials_or_pad(count):
    ids = batch()
    elig = eligible_positions(ids, SPECIAL)
    for seed in range(20):
        mask = uniform_mask(ids, elig, 0.15, count, torch.Generator().manual_seed(seed))
        assert not (mask & ~elig).any()
        assert (mask.sum(1) >= 1).all()


def test_exact_masks_k_per_sequence():
    ids = batch()
    elig = eligible_positions(ids, SPECIAL)
    mask = uniform_mask(ids, elig, 0.15, "exact", torch.Generator().manual_seed(1))
    assert torch.equal(mask.sum(1), mask_counts(elig.sum(1), 0.15))


def test_exact_is_uniform_over_eligible_positions():
    ids = batch(B=1, T=40)
    elig = eligible_positions(ids, SPECIAL)
    g = torch.Generator().manual_seed(0)
    hits = sum(uniform_mask(ids, elig, 0.15, "exact", g).long() for _ in range(4000))[0]
    n = elig.sum().item()
    expected = 4000 * mask_counts(torch.tensor(n), 0.15).item() / n
    assert hits[~elig[0]].sum() == 0
    assert ((hits[elig[0]] - expected).abs() < 5 * expected**0.5).all()  # 5 sigma


def test_bernoulli_rate():
    ids = batch(B=64, T=40)
    elig = eligible_positions(ids, SPECIAL)
    mask = uniform_mask(ids, elig, 0.15, "bernoulli", torch.Generator().manual_seed(2))
    assert abs(mask.sum().item() / elig.sum().item() - 0.15) < 0.03
    with pytest.raises(ValueError):
        uniform_mask(ids, elig, 0.15, "poisson")


def test_replacement_is_80_10_10_and_never_draws_specials():
    ids = torch.randint(5, V, (64, 256), generator=torch.Generator().manual_seed(0))
    mask = torch.rand(64, 256, generator=torch.Generator().manual_seed(1)) < 0.5
    out = apply_replacement(ids, mask, V, SPECIAL, 0.8, 0.1, torch.Generator().manual_seed(2))
    assert torch.equal(out[~mask], ids[~mask])
    m = mask.sum().item()
    masked = (out == SPECIAL["mask"]) & mask
    changed = (out != ids) & ~masked & mask
    same = (out == ids) & mask
    assert abs(masked.sum().item() / m - 0.8) < 0.01
    # A random draw equals the original 1/45 of the time, so "same" is 10% + a bit.
    assert abs(changed.sum().item() / m - 0.1 * 44 / 45) < 0.01
    assert abs(same.sum().item() / m - (0.1 + 0.1 / 45)) < 0.01
    randoms = out[changed]
    assert randoms.min() >= 5 and randoms.max() < V
    assert len(randoms.unique()) == V - 5  # every ordinary token can be drawn


def mask_batch(
    input_ids: torch.Tensor,
    special_ids,
    vocab_size: int,
    masking,
    generator: torch.Generator | SequenceRNG | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform mask + replacement with the `masking` settings section: (corrupted inputs, mask). (The tests' own: the
    training strategies compose these pieces themselves.)"""
    eligible = eligible_positions(input_ids, special_ids)
    mask = uniform_mask(input_ids, eligible, masking.mask_prob, masking.mask_count, generator)
    inputs = apply_replacement(
        input_ids, mask, vocab_size, special_ids, masking.replace_mask, masking.replace_random, generator
    )
    return inputs, mask


def test_mask_batch_uses_settings():
    ids = batch()
    inputs, mask = mask_batch(ids, SPECIAL, V, MaskingSettings(), torch.Generator().manual_seed(0))
    assert torch.equal(inputs[~mask], ids[~mask]) and (inputs[mask] == 4).any()


def test_sequence_rng_masks_do_not_depend_on_how_the_batch_is_split():
    ids = batch(B=8)
    keys = sequence_keys(seed=7, step=3, slots=range(8))
    whole = mask_batch(ids, SPECIAL, V, MaskingSettings(), SequenceRNG(keys))
    halves = [mask_batch(ids[i : i + 4], SPECIAL, V, MaskingSettings(), SequenceRNG(keys[i : i + 4])) for i in (0, 4)]
    for part in range(2):
        assert torch.equal(whole[part], torch.cat([h[part] for h in halves]))


def test_sequence_keys_differ_by_step_slot_seed_and_domain():
    base = sequence_keys(0, 0, range(4))
    assert len(set(base)) == 4
    assert sequence_keys(0, 1, range(4)) != base
    assert sequence_keys(1, 0, range(4)) != base
    assert sequence_keys(0, 0, range(4), domain=1) != base
    assert sequence_keys(0, 0, range(4)) == base  # and reproducible
    assert 0 <= mix_seed(2**70, -1) < 2**63


def test_sequence_rng_checks_batch_size():
    ids = batch(B=4)
    with pytest.raises(ValueError, match="streams"):
        uniform_mask(ids, eligible_positions(ids, SPECIAL), 0.15, "exact", SequenceRNG([1, 2]))
