"""The unigram plateau: token-type counts, the training tokens' entropy and a held-out set's unigram level,
checked against hand computations on real shard folders."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from tiny_shards import SPECIAL_IDS, write_tiny_shards

from mapnet_cli.data.shards import ShardReader
from mapnet_cli.data.unigram import (
    entropy,
    sample_rows,
    token_counts,
    unigram_entropy,
    unigram_level,
    unigram_log_probs,
)


@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> ShardReader:
    return ShardReader(write_tiny_shards(tmp_path_factory.mktemp("shards") / "s", train=60, vocab_size=40), "train")


def test_log_probs_are_the_smoothed_frequencies_of_the_maskable_tokens(reader):
    tokens = Counter(int(t) for t in reader.take(np.arange(len(reader))).ravel() if t not in SPECIAL_IDS.values())
    maskable = [i for i in range(reader.vocab_size) if i not in SPECIAL_IDS.values()]
    total = sum(tokens.values()) + 0.5 * len(maskable)
    log_p = unigram_log_probs(reader)
    for i in maskable:
        assert log_p[i] == pytest.approx(math.log((tokens[i] + 0.5) / total), rel=1e-12)
    assert all(log_p[i] == -math.inf for i in SPECIAL_IDS.values())  # a special token is never a question
    assert np.exp(log_p).sum() == pytest.approx(1.0)
    want = -sum((tokens[i] + 0.5) / total * math.log((tokens[i] + 0.5) / total) for i in maskable)
    assert unigram_entropy(reader) == pytest.approx(want, rel=1e-12)


def test_entropy_of_known_distributions():
    assert entropy(np.log(np.full(8, 1 / 8))) == pytest.approx(math.log(8))
    assert entropy(np.array([0.0, -np.inf, -np.inf])) == 0.0  # one certain outcome


def test_unigram_level_is_the_cross_entropy_of_the_targets(reader):
    log_p = unigram_log_probs(reader)
    targets = np.array([5, 5, 9, 12])
    assert unigram_level(log_p, targets) == pytest.approx(-(2 * log_p[5] + log_p[9] + log_p[12]) / 4)
    assert math.isnan(unigram_level(log_p, np.array([], dtype=np.int64)))


def test_a_large_split_is_sampled_evenly_and_deterministically(reader):
    rows = sample_rows(1_000_000, 1000)
    assert len(rows) == 1000 and rows[0] == 0 and rows[-1] == 999_999 and np.all(np.diff(rows) > 0)
    assert np.array_equal(sample_rows(50, 1000), np.arange(50))
    few = token_counts(reader, max_sequences=10)
    assert few.sum() == 10 * reader.max_seq_len and np.array_equal(few, token_counts(reader, max_sequences=10))
