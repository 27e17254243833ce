"""Loss-adaptive masking (AMLM): the table's update rule, exactly K masks per sequence, HT weights by exact
enumeration, the one-step lag, exact resume and prefetch, and what the table learns on the synthetic corpus."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from tiny_shards import SPECIAL_IDS, write_tiny_shards

from mapnet_cli import distributed
from mapnet_cli.errors import MapnetError
from mapnet_cli.masking.adaptive import FLOOR, AdaptiveTable, AdaptiveTraining
from mapnet_cli.masking.strategy import frequency_masks
from mapnet_cli.masking.uniform import TRAIN_MASKS, eligible_positions, mask_counts, sequence_keys
from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain

V, P = 10, 0.4
INFO = distributed.DistInfo()


def hard_batch(correct: dict[int, tuple[int, int]], vocab: int = V) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(logits, token losses, labels) of masked positions: type v seen n times, right r of them ({v: (r, n)})."""
    labels, hits = [], []
    for v, (r, n) in correct.items():
        labels += [v] * n
        hits += [True] * r + [False] * (n - r)
    labels_t = torch.tensor(labels)
    logits = torch.zeros(len(labels), vocab)
    wrong = (labels_t + 1) % vocab
    logits[torch.arange(len(labels)), torch.where(torch.tensor(hits), labels_t, wrong)] = 1.0
    return logits, torch.ones(len(labels)), labels_t


def test_hard_and_soft_updates_follow_the_published_rule_and_unseen_types_keep_their_weight():
    table = AdaptiveTable(V, P, decay=0.2, every=3, score="hard")
    assert torch.equal(table.scores_for(0), torch.full((V,), P, dtype=torch.float64))
    # Two micro-batches of one period: type 5 right 3 of 4 times, type 6 never; nothing else is masked.
    table.observe(*hard_batch({5: (2, 2), 6: (0, 1)}))
    table.observe(*hard_batch({5: (1, 2), 6: (0, 3)}))
    table.update(INFO, takes_effect=3)
    w = table.table.tolist()
    assert w[5] == pytest.approx(0.2 * P + 0.8 * P * (1 - 0.75))
    assert w[6] == pytest.approx(P)  # never right: p (1 - 0) = p, whatever lambda
    assert w[7] == P and w[0] == P  # not masked this period: no evidence, no move
    assert table.observed.tolist()[5:8] == [4, 4, 0] and float(table.last_score) == pytest.approx(3 / 8)
    # The new table masks from step 3 on; step 2 still gets the old one (the one-step lag).
    assert table.scores_for(2)[5] == P and table.scores_for(3)[5] == pytest.approx(w[5])
    # A second period folds into the newest table, not the first.
    table.observe(*hard_batch({5: (0, 1)}))
    table.update(INFO, takes_effect=6)
    assert table.table[5].item() == pytest.approx(0.2 * w[5] + 0.8 * P)
    assert table.scores_for(5)[5].item() == pytest.approx(w[5])  # step 5 < 6: the table of step 3

    soft = AdaptiveTable(V, P, decay=0.2, every=3, score="soft")
    labels = torch.tensor([4, 4, 9])
    q = torch.tensor([0.5, 0.25, 0.9])  # probability given the true token: loss -log q
    soft.observe(torch.zeros(3, V), -q.log(), labels)
    soft.update(INFO, takes_effect=3)
    assert soft.table[4].item() == pytest.approx(0.2 * P + 0.8 * P * (1 - 0.375), rel=1e-6)
    assert soft.table[9].item() == pytest.approx(0.2 * P + 0.8 * P * 0.1, rel=1e-6)


def test_the_sums_are_exact_integers_so_the_split_does_not_change_the_table():
    """Fixed-point sums: one micro-batch of all positions or the same positions in any split and order
    give bitwise the same table (floating-point sums would not, in general)."""
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, V, (500,), generator=g)
    losses = torch.rand(500, generator=g) * 5
    whole = AdaptiveTable(V, P, decay=0.2, every=1, score="soft")
    whole.observe(torch.zeros(500, V), losses, labels)
    parts = AdaptiveTable(V, P, decay=0.2, every=1, score="soft")
    perm = torch.randperm(500, generator=g)
    for chunk in perm.split(37):
        parts.observe(torch.zeros(len(chunk), V), losses[chunk], labels[chunk])
    assert torch.equal(whole.pending, parts.pending)
    whole.update(INFO, 2), parts.update(INFO, 2)
    assert torch.equal(whole.table, parts.table)


def learned_table(decay: float = 0.0) -> AdaptiveTable:
    """With lambda = 0 the table is exactly p (1 - accuracy): type 5 never right, 6 right 70%, 7 40%, 8 85%."""
    table = AdaptiveTable(V, P, decay=decay, every=1, score="hard")
    table.observe(*hard_batch({5: (0, 20), 6: (14, 20), 7: (8, 20), 8: (17, 20)}))
    table.update(INFO, takes_effect=0)
    return table


def exact_masks(
    scores: torch.Tensor, ids: list[int], alpha: float
) -> tuple[list[float], dict[frozenset, tuple[float, list]]]:
    """Every mask the adaptive sampler can draw for one row, with its exact probability: all n! orders
    (each of probability 1/n!) x the pieces of the systematic start U in [0, 1) on which the sample is
    constant, each evaluated by the sampler itself (`frequency_masks`, as `AdaptiveTraining` calls it).
    Returns (pi, {S: (P(S), HT weights of S)})."""
    targets = torch.tensor([ids])
    eligible = eligible_positions(targets, SPECIAL_IDS)
    n = len(ids)
    _, _, pi = frequency_masks(targets, eligible, scores, P, alpha, torch.rand(1, n), torch.rand(1))
    pi = pi[0].tolist()
    K = round(sum(pi))
    out: dict[frozenset, tuple[float, list]] = {}
    orders = list(itertools.permutations(range(n)))
    for order in orders:
        order_u = torch.empty(1, n)
        order_u[0, list(order)] = torch.arange(n, dtype=torch.float32) / n  # argsort gives `order`
        cum = np.cumsum([pi[i] for i in order])
        cum = cum * K / cum[-1]
        cuts = sorted({0.0, 1.0, *(c - math.floor(c) for c in cum if 0 < c - math.floor(c) < 1)})
        for lo, hi in zip(cuts, cuts[1:]):
            mask, weights, _ = frequency_masks(
                targets, eligible, scores, P, alpha, order_u, torch.tensor([(lo + hi) / 2], dtype=torch.float64)
            )
            s = frozenset(torch.nonzero(mask[0]).flatten().tolist())
            prob, w = out.get(s, (0.0, weights[0].tolist()))
            assert weights[0].tolist() == w  # the weights are a function of the set
            out[s] = (prob + (hi - lo) / len(orders), w)
    return pi, out


@pytest.mark.parametrize("alpha", [0.0, 0.5])
def test_exactly_k_masks_inclusion_probabilities_and_unbiased_ht_weights_by_exact_enumeration(alpha):
    """n = 5 positions (type 5 twice), K = round(0.4 x 5) = 2: every draw has exactly K positions, position i
    is masked with probability pi_i proportional to the table (before the mixture), the HT loss averages to
    uniform masking's mean loss exactly, and the unweighted (published) loss does not."""
    table = learned_table()
    w = table.scores_for(0)
    assert w[5:9].tolist() == pytest.approx([P, 0.3 * P, 0.6 * P, 0.15 * P])
    ids = [5, 6, 5, 7, 8]
    losses = [0.3, 2.0, 1.1, 4.5, 0.7]
    pi, sets = exact_masks(w, ids, alpha)
    K, n = 2, 5
    assert sum(p for p, _ in sets.values()) == pytest.approx(1.0, abs=1e-12)
    assert all(len(s) == K for s in sets)  # exactly K: E[masks] = K with variance 0
    rel = [float(w[t]) for t in ids]
    expected = [alpha * K / n + (1 - alpha) * K * r / sum(rel) for r in rel]
    assert pi == pytest.approx(expected, abs=1e-12)
    for i in range(n):
        assert sum(p for s, (p, _) in sets.items() if i in s) == pytest.approx(pi[i], abs=1e-12)
    ht = sum(p * sum(wts[i] * losses[i] for i in s) / K for s, (p, wts) in sets.items())
    assert ht == pytest.approx(sum(losses) / n, abs=1e-6)
    if alpha:
        assert max(max(wts) for _, wts in sets.values()) <= 1 / alpha + 1e-6
    unweighted = sum(p * sum(losses[i] for i in s) / K for s, (p, _) in sets.items())
    assert unweighted == pytest.approx(sum(pi[i] * losses[i] for i in range(n)) / K, abs=1e-9)
    assert abs(unweighted - sum(losses) / n) > 0.05  # the published objective is biased


def test_a_type_the_model_always_gets_right_is_floored_not_zero():
    table = AdaptiveTable(V, P, decay=0.0, every=1, score="hard")
    table.observe(*hard_batch({5: (4, 4)}))
    table.update(INFO, takes_effect=0)
    assert table.table[5].item() == 0.0 and table.scores_for(0)[5].item() == pytest.approx(FLOOR * P)
    targets = torch.tensor([[5] * 8 + [6, 7]])
    mask, _, pi = frequency_masks(
        targets, eligible_positions(targets, SPECIAL_IDS), table.scores_for(0), P, 0.0, torch.rand(1, 10), torch.rand(1)
    )
    assert int(mask.sum()) == 4 and bool((pi > 0).all())  # K = 4 > the two other positions: type 5 fills the rest


def strategy(shards: Path, *extra: str) -> tuple[AdaptiveTraining, object]:
    from mapnet_cli.data.shards import ShardReader

    s = resolve(
        None,
        {"model": {"preset": "tiny"}},
        ["model.max_position=64", "shard.max_seq_len=64", "train.batch_size=8", "masking.strategy=adaptive", *extra],
    )
    reader = ShardReader(shards, "train")
    return AdaptiveTraining(s, None, reader), reader


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("adaptive") / "shards", train=64, valid=8, seq_len=64)


@pytest.mark.parametrize("weights", ["none", "ht"])
def test_micro_batches_hold_k_follow_the_table_and_do_not_depend_on_the_split(shards, weights):
    extra = ["masking.adaptive.weights=ht", "masking.adaptive.mix_uniform=0.5"] if weights == "ht" else []
    strat, reader = strategy(shards, "masking.adaptive.decay=0", *extra)
    # Teach the table that every type but 5..14 is always predicted: those are then masked far more often.
    right = {v: (50, 50) for v in range(15, reader.vocab_size)}
    right.update({v: (0, 50) for v in range(5, 15)})
    strat.table.observe(*hard_batch(right, reader.vocab_size))
    strat.table.update(INFO, takes_effect=0)
    ids = np.random.default_rng(0).integers(5, reader.vocab_size, size=(8, 64)).astype(np.uint16)
    ids[:, 0], ids[:, -1] = SPECIAL_IDS["cls"], SPECIAL_IDS["sep"]
    keys = sequence_keys(0, 5, range(8), TRAIN_MASKS)
    whole = strat.micro_batch(ids, 5, range(8), keys, torch.device("cpu"))
    eligible = eligible_positions(whole.targets, SPECIAL_IDS)
    assert torch.equal(whole.mask.sum(1), mask_counts(eligible.sum(1), 0.15))  # exactly K per row
    favoured = (whole.targets < 15) & eligible
    share = float((whole.mask & favoured).sum() / whole.mask.sum())
    # Measured: 0.97 unweighted, 0.51 with the mixture (alpha = 0.5 keeps half the mass uniform), against a share of
    # 0.17.
    assert share > (0.9 if weights == "none" else 2.5 * float(favoured.sum() / eligible.sum()))
    if weights == "none":
        assert whole.weights is None
    else:
        w = whole.weights[whole.mask]
        assert float(w.max()) <= 2.0 + 1e-6 and float(w.min()) > 0
    parts = [strat.micro_batch(ids[a:b], 5, range(a, b), keys[a:b], torch.device("cpu")) for a, b in ((0, 3), (3, 8))]
    for field in ("inputs", "mask") + (("weights",) if weights == "ht" else ()):
        assert torch.equal(getattr(whole, field), torch.cat([getattr(p, field) for p in parts]))


def test_settings_refuse_ht_without_a_mixture_and_mapnets_importance():
    def problems(*sets: str) -> str:
        try:
            resolve(None, None, list(sets))
        except MapnetError as exc:
            return str(exc)
        return ""

    assert problems("masking.strategy=adaptive") == ""
    adaptive = "masking.strategy=adaptive"
    assert "needs masking.adaptive.mix_uniform > 0" in problems(adaptive, "masking.adaptive.weights=ht")
    assert problems(adaptive, "masking.adaptive.weights=ht", "masking.adaptive.mix_uniform=0.5") == ""
    for importance in ("none", "ht"):
        assert "masking.mapnet.importance" in problems(adaptive, f"masking.mapnet.importance={importance}")  # MAP-Net's
    assert "adaptive.every must be >= 1" in problems(adaptive, "masking.adaptive.every=0")
    assert "adaptive.decay must be in [0, 1)" in problems(adaptive, "masking.adaptive.decay=1")
    assert "masking.adaptive.every = 50 only applies with masking.strategy 'adaptive'" in problems(
        "masking.adaptive.every=50"
    )


# ---------------------------------------------------------------- end to end
RUN = [
    "train.recipe=paper",
    "model.max_position=64",
    "shard.max_seq_len=64",
    "train.batch_size=8",
    "train.steps=12",
    "train.eval_sequences=8",
    "train.eval_every=0",
    "train.checkpoint_every=0",
    "optim.warmup.steps=2",
    "optim.lr=3e-3",
    "logging.log_every=3",
    "logging.progress=false",
    "masking.strategy=adaptive",
    "masking.adaptive.every=3",
]


def rows(run: Path, kind: str = "train") -> list[dict]:
    return [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


@pytest.mark.slow
def test_resume_and_prefetch_are_bitwise_exact_across_table_updates(shards, tmp_path):
    """T = 3: the table is updated after steps 1, 4, 7, 10 and masks from 3, 6, 9, 12. Stopped after step 5
    (a new table waits for step 6: the lag is in the checkpoint) and after step 9 (pending sums of step 8),
    resumed each time; and once with the next step's batches made in a background thread."""
    s = resolve(
        None, {"model": {"preset": "tiny"}}, [*RUN, "masking.adaptive.weights=ht", "masking.adaptive.mix_uniform=0.5"]
    )
    straight = pretrain(s, shards, tmp_path / "a")
    pretrain(s, shards, tmp_path / "b", stop_at=5)
    wb5 = load_file(str(tmp_path / "b" / "checkpoints" / "step-00000005" / "model.safetensors"))
    assert int(wb5["adaptive.takes_effect"]) == 6 and not torch.equal(wb5["adaptive.table"], wb5["adaptive.previous"])
    pretrain(s, shards, tmp_path / "b", stop_at=9, resume=True)
    wb9 = load_file(str(tmp_path / "b" / "checkpoints" / "step-00000009" / "model.safetensors"))
    assert int(wb9["adaptive.pending"][0].sum()) > 0  # step 8's counts, not yet folded in
    resumed = pretrain(s, shards, tmp_path / "b", resume=True)
    prefetched = pretrain(
        resolve(
            None,
            {"model": {"preset": "tiny"}},
            [*RUN, "masking.adaptive.weights=ht", "masking.adaptive.mix_uniform=0.5", "train.prefetch=true"],
        ),
        shards,
        tmp_path / "c",
    )
    wa = load_file(str(straight / "model.safetensors"))
    assert int(wa["adaptive.updates"]) == 4 and int(wa["adaptive.takes_effect"]) == 12
    for other in (resumed, prefetched):
        wo = load_file(str(other / "model.safetensors"))
        assert wa.keys() == wo.keys()
        for k in wa:
            assert torch.equal(wa[k], wo[k]), k
    losses = {r["step"]: r["loss"] for r in rows(tmp_path / "a")}
    assert losses == {r["step"]: r["loss"] for r in rows(tmp_path / "c")}
    assert losses == {r["step"]: r["loss"] for r in rows(tmp_path / "b") if r["step"] in losses}  # + the stops, 5 and 9
    assert rows(tmp_path / "a")[-1]["adaptive/updates"] == 4


def test_resume_refuses_a_changed_score_or_period(shards, tmp_path):
    s = resolve(None, {"model": {"preset": "tiny"}}, [*RUN, "train.steps=2"])
    pretrain(s, shards, tmp_path / "run")
    for change in ("masking.adaptive.score=soft", "masking.adaptive.every=7"):
        more = resolve(None, {"model": {"preset": "tiny"}}, [*RUN, "train.steps=3", change])
        with pytest.raises(MapnetError, match="cannot change on resume"):
            pretrain(more, shards, tmp_path / "run", resume=True)


def test_the_table_stops_masking_what_the_model_predicts_and_keeps_masking_what_it_cannot(tmp_path):
    """Tiny shards with a split vocabulary: each sequence repeats a theme token from the lower half (predictable
    from the rest of the sequence once the encoder learns to copy) with 1 in 5 positions noise from the upper
    half (predictable by nothing). The hard score pulls the themes' entries down and leaves noise at ~p."""
    shards = write_tiny_shards(tmp_path / "shards", train=128, valid=8, seq_len=64, split_vocab=True)
    s = resolve(
        None,
        {"model": {"preset": "tiny"}},
        [*RUN, "train.batch_size=16", "train.steps=40", "masking.adaptive.every=5", "logging.log_every=10"],
    )
    last = pretrain(s, shards, tmp_path / "run")
    rel = load_file(str(last / "model.safetensors"))["adaptive.table"] / 0.15
    themes, noise = float(rel[5:34].mean()), float(rel[34:].mean())
    assert themes < 0.5 and noise > 0.9  # measured: 0.28 and 0.99
    log = rows(tmp_path / "run")
    assert log[-1]["adaptive/updates"] == 8 and log[-1]["adaptive/weight_max"] == pytest.approx(1.0)
