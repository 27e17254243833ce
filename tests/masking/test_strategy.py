"""Masking strategies without a network: stratified (fully-explored) and frequency-HT; the batch-split invariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tiny_shards import SPECIAL_IDS, write_tiny_shards

from mapnet_cli.data.unigram import token_counts
from mapnet_cli.masking.strategy import (
    FrequencyTraining,
    StratifiedTraining,
    UniformTraining,
    strata_of,
    stratified_masks,
)
from mapnet_cli.masking.uniform import eligible_positions, mask_counts
from mapnet_cli.settings import resolve


def test_strata_cover_every_eligible_position_exactly_once_and_copies_never_overlap():
    g = torch.Generator().manual_seed(0)
    B, T = 6, 50
    ids = torch.randint(5, 100, (B, T), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3
    ids[1, 30:] = 0  # padding
    eligible = eligible_positions(ids, SPECIAL_IDS)
    order = torch.rand(B, T, generator=g)
    k = mask_counts(eligible.sum(1), 0.15)
    _, m = strata_of(eligible, k, order)
    offsets = torch.rand(B, generator=g)
    covered = torch.zeros(B, T, dtype=torch.long)
    for j in range(int(m.max())):
        mask, w = stratified_masks(ids, eligible, 0.15, order, offsets, torch.full((B,), j))
        covered += torch.where(j < m[:, None], mask.long(), 0)
        assert not (mask & ~eligible).any()
        # Every stratum's size is within one of K.
        assert ((mask.sum(1) - k).abs() <= 1).all()
    assert torch.equal(covered, eligible.long())  # each eligible position exactly once over the strata


def test_stratified_weights_make_the_loss_an_unbiased_estimate_of_the_uniform_one():
    """Average over the m equally likely strata of sum_{i in S_j} w_i l_i / |S_j| = mean over eligible l_i."""
    g = torch.Generator().manual_seed(1)
    T = 23  # n = 21 eligible, K = 3, m = 7 strata of 3; also try n where strata differ in size
    for n_pad in (0, 4):
        ids = torch.randint(5, 100, (1, T), generator=g)
        ids[0, 0], ids[0, T - 1 - n_pad] = 2, 3
        if n_pad:
            ids[0, T - n_pad :] = 0
        eligible = eligible_positions(ids, SPECIAL_IDS)
        losses = torch.rand(1, T, generator=g).double()
        order = torch.rand(1, T, generator=g)
        k = mask_counts(eligible.sum(1), 0.15)
        _, m = strata_of(eligible, k, order)
        total = 0.0
        for j in range(int(m)):
            mask, w = stratified_masks(ids, eligible, 0.15, order, torch.zeros(1), torch.tensor([j]))
            total += float((w.double() * losses * mask).sum() / mask.sum()) / int(m)
        assert total == pytest.approx(float(losses[eligible].mean()), rel=1e-6)


def _strategy(cls, shards, *extra):
    from mapnet_cli.data.shards import ShardReader

    s = resolve(
        None,
        {"model": {"preset": "tiny"}},
        ["model.max_position=64", "shard.max_seq_len=64", "train.batch_size=8", *extra],
    )
    return cls(s, None, ShardReader(shards, "train")), ShardReader(shards, "train")


@pytest.mark.parametrize(
    "cls,extra",
    [
        (StratifiedTraining, ["masking.strategy=stratified", "masking.stratified.copies=2"]),
        (FrequencyTraining, ["masking.strategy=frequency", "masking.frequency.mix_uniform=0.5"]),
        (UniformTraining, []),
    ],
)
def test_micro_batches_do_not_depend_on_the_batch_split(tmp_path, cls, extra):
    from mapnet_cli.masking.uniform import TRAIN_MASKS, sequence_keys

    shards = write_tiny_shards(tmp_path / "shards", train=32, valid=4, seq_len=64)
    strategy, reader = _strategy(cls, shards, *extra)
    rows = [s // strategy.copies for s in range(8)]
    ids = reader.take(rows)
    keys = sequence_keys(0, 5, range(8), TRAIN_MASKS)
    whole = strategy.micro_batch(ids, 5, range(8), keys, torch.device("cpu"))
    parts = [
        strategy.micro_batch(ids[a:b], 5, range(a, b), keys[a:b], torch.device("cpu")) for a, b in ((0, 3), (3, 8))
    ]
    for field in ("inputs", "mask", "weights"):
        got = [getattr(p, field) for p in parts]
        if getattr(whole, field) is None:
            assert all(x is None for x in got)
        else:
            assert torch.equal(getattr(whole, field), torch.cat(got))
    if cls is StratifiedTraining:  # the two copies of a sequence take disjoint strata
        assert not (whole.mask[0] & whole.mask[1]).any() and whole.mask[0].any()


def test_frequency_proposal_masks_rare_types_more_and_weights_them_down(tmp_path):
    shards = write_tiny_shards(tmp_path / "shards", train=64, valid=4, seq_len=64)
    strategy, reader = _strategy(
        FrequencyTraining, shards, "masking.strategy=frequency", "masking.frequency.mix_uniform=0.2"
    )
    counts = token_counts(reader)
    assert counts.sum() == reader.take(np.arange(len(reader))).size
    ids = reader.take(np.arange(32))
    from mapnet_cli.masking.uniform import TRAIN_MASKS, sequence_keys

    freq = []
    for step in range(30):
        b = strategy.micro_batch(
            ids, step, range(32), sequence_keys(0, step, range(32), TRAIN_MASKS), torch.device("cpu")
        )
        common = torch.from_numpy(counts)[b.targets] > np.median(counts[counts > 0])
        eligible = eligible_positions(b.targets, SPECIAL_IDS)
        freq.append(
            [
                (b.mask & common).sum() / (eligible & common).sum(),
                (b.mask & ~common & eligible).sum() / (eligible & ~common).sum(),
            ]
        )
        assert float(b.weights.max()) <= 1 / 0.2 + 1e-5
    common_rate, rare_rate = np.asarray(freq, dtype=float).mean(0)
    assert rare_rate > 1.5 * common_rate  # the tiny corpus: one theme token per sequence is common, noise is rare


def test_settings_a_strategy_would_ignore_are_refused_by_name():
    from mapnet_cli.errors import MapnetError

    with pytest.raises(MapnetError) as err:
        resolve(
            None,
            None,
            ["masking.mapnet.mix_uniform=0.3", "masking.stratified.copies=4", "masking.mapnet.temperature=2"],
        )
    text = str(err.value)
    for name in ("masking.mapnet.mix_uniform", "masking.stratified.copies", "masking.mapnet.temperature"):
        assert name in text  # all at once, each named
    with pytest.raises(MapnetError, match="masking.mapnet.learnability_decay"):
        resolve(None, None, ["masking.strategy=mapnet", "masking.mapnet.learnability_decay=0.9"])  # target is 'loss'
    # Where they apply they are accepted.
    resolve(
        None,
        None,
        [
            "masking.strategy=mapnet",
            "masking.mapnet.importance=ht",
            "masking.mapnet.mix_uniform=0.3",
            "masking.mapnet.temperature=2",
            "masking.mapnet.target=learnability",
            "masking.mapnet.learnability_decay=0.9",
            "masking.mapnet.lr=1e-3",
        ],
    )
    resolve(None, None, ["masking.strategy=stratified", "masking.stratified.copies=4"])
    resolve(
        None, None, ["masking.strategy=frequency", "masking.frequency.mix_uniform=0.5", "masking.frequency.power=1"]
    )
