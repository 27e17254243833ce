"""The hybrid masked/causal objective (masking/hybrid.py): which rows are causal, what a causal row holds, that its
position j sees tokens 0..j-1 only (the encoder's own outputs, both blocks), that masked rows are uniform's, and a
run that trains with it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from mapnet_cli.errors import MapnetError
from mapnet_cli.masking.hybrid import HybridTraining, causal_batch, causal_rows
from mapnet_cli.masking.strategy import MicroBatch, UniformTraining, mlm_output
from mapnet_cli.masking.uniform import TRAIN_MASKS, sequence_keys
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import HybridSettings, MaskingSettings, resolve
from mapnet_cli.train import pretrain

SPECIAL_IDS = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
CLS, SEP, PAD = 2, 3, 0
VOCAB = 40


def strategy(cls, every: int = 4, mask_prob: float = 0.3):
    masking = MaskingSettings(strategy="hybrid", mask_prob=mask_prob, hybrid=HybridSettings(causal_every=every))
    settings = SimpleNamespace(masking=masking, train=SimpleNamespace(seed=0))
    return cls(settings, None, SimpleNamespace(special_ids=SPECIAL_IDS, vocab_size=VOCAB))


def batch_ids(rows: int, T: int, seed: int) -> torch.Tensor:
    """[CLS] tokens [SEP] tokens [SEP], some rows ending in padding."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (rows, T), generator=g)
    ids[:, 0], ids[:, T // 2] = CLS, SEP
    for r in range(rows):
        end = T - 1 - (r % 3) * 2  # rows 1, 2, 4, 5, ... padded after their last [SEP]
        ids[r, end] = SEP
        ids[r, end + 1 :] = PAD
    return ids


def draw(s, ids: torch.Tensor, slots: range, step: int = 3) -> MicroBatch:
    return s.micro_batch(ids.numpy(), step, slots, sequence_keys(7, step, slots, TRAIN_MASKS), "cpu")


def test_one_global_slot_in_every_k_is_causal():
    assert causal_rows(range(0, 8), 4) == [True, False, False, False, True, False, False, False]
    assert causal_rows(range(5, 9), 4) == [False, False, False, True]  # slot 8 of a second micro-batch
    assert causal_rows(range(3), 1) == [True, True, True]


def test_a_causal_row_holds_its_left_context_shifted_and_predicts_every_token():
    targets = torch.tensor([[CLS, 5, 6, 7, SEP, PAD], [CLS, 8, 9, 10, 11, SEP]])
    masked = MicroBatch(
        torch.tensor([[CLS, 4, 6, 7, SEP, PAD], [CLS, 8, 4, 10, 11, SEP]]),
        targets,
        torch.tensor([[0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0]], dtype=torch.bool),
        torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool),
        tokens=11,
    )
    out = causal_batch(masked, torch.tensor([True, False]), SPECIAL_IDS)
    assert out.inputs.tolist() == [[CLS, CLS, 5, 6, 7, SEP], [CLS, 8, 4, 10, 11, SEP]]
    assert out.mask.tolist() == [[False, True, True, True, False, False], masked.mask[1].tolist()]
    seen = out.attention_mask
    assert seen.shape == (2, 1, 6, 6)
    # The causal row: query j sees keys 0..j (key i holds token i - 1; the last key holds [SEP], real).
    assert seen[0, 0].tolist() == torch.ones(6, 6, dtype=torch.bool).tril().tolist()
    # The masked row: every query sees every real key.
    assert seen[1, 0].tolist() == [[True] * 6] * 6
    assert out.tokens == 11 and torch.equal(out.targets, targets)


def test_a_padded_causal_row_never_sees_a_pad_key():
    targets = torch.tensor([[CLS, 5, SEP, PAD, PAD, 6]])  # padding in the middle: key i is real iff token i-1 is
    real = targets != PAD
    batch = MicroBatch(targets.clone(), targets, torch.zeros_like(real), real, tokens=4)
    seen = causal_batch(batch, torch.tensor([True]), SPECIAL_IDS).attention_mask[0, 0]
    key_real = [True, True, True, True, False, False]  # tokens -1 (CLS kept), 0, 1, 2, 3 (pad), 4 (pad)
    for j in range(6):
        assert seen[j].tolist() == [key_real[i] and i <= j for i in range(6)]


@pytest.mark.parametrize("block", ["modern", "bert"])
def test_a_causal_position_sees_the_tokens_before_it_and_no_other(block):
    """The encoder's own logits: at a causal row's position j they do not move when tokens j.. change, and they do
    when a token before j changes; a masked row's position moves with a later token (the check can fail)."""
    torch.manual_seed(0)
    cfg = dict(vocab_size=VOCAB, layers=2, hidden=32, heads=4, intermediate=48, max_position=64, pad_id=PAD)
    cfg.update(norm="pre", block=block, dropout=0.0, attention_dropout=0.0, layer_norm_eps=1e-5)
    model = BertForMLM(BertConfig(**cfg)).eval()
    s = strategy(HybridTraining, every=2)
    ids = batch_ids(4, 16, 1)
    j = 6

    def logits_at(ids: torch.Tensor, row: int, pos: int) -> torch.Tensor:
        batch = draw(s, ids, range(4))
        with torch.no_grad():
            out = mlm_output(model, batch)
        flat = batch.mask.flatten().nonzero().squeeze(1).tolist()
        return out.logits[flat.index(row * 16 + pos)]

    base = logits_at(ids, 0, j)  # row 0: slot 0, causal
    later = ids.clone()
    later[0, j:14] = torch.randint(5, VOCAB, (14 - j,), generator=torch.Generator().manual_seed(9))
    assert not torch.equal(later[0, j], ids[0, j])
    torch.testing.assert_close(logits_at(later, 0, j), base, rtol=1e-5, atol=1e-5)
    earlier = ids.clone()
    earlier[0, j - 1] = 5 if ids[0, j - 1] != 5 else 6
    assert not torch.allclose(logits_at(earlier, 0, j), base, atol=1e-4)
    # Row 1 (slot 1) is masked: a later token moves its masked positions' logits.
    batch = draw(s, ids, range(4))
    pos = int(batch.mask[1].nonzero()[0])
    moved = ids.clone()
    moved[1, pos + 1] = 5 if ids[1, pos + 1] != 5 else 6
    assert not torch.allclose(logits_at(moved, 1, pos), logits_at(ids, 1, pos), atol=1e-4)


def test_masked_rows_are_uniforms_and_the_split_changes_nothing():
    hybrid, uniform = strategy(HybridTraining), strategy(UniformTraining)
    ids = batch_ids(8, 24, 2)
    h, u = draw(hybrid, ids, range(8)), draw(uniform, ids, range(8))
    masked = [s % 4 != 0 for s in range(8)]
    assert torch.equal(h.inputs[masked], u.inputs[masked]) and torch.equal(h.mask[masked], u.mask[masked])
    assert torch.equal(h.attention_mask[masked][:, 0, 0], u.attention_mask[masked])  # every real key, every query
    parts = [draw(hybrid, ids[a:b], range(a, b)) for a, b in ((0, 3), (3, 8))]
    for name in ("inputs", "mask", "attention_mask"):
        assert torch.equal(getattr(h, name), torch.cat([getattr(p, name) for p in parts]))


def test_a_hybrid_run_trains_and_is_scored_on_uniform_held_out_masks(synthetic_shards, tmp_path):
    overrides = [
        "train.recipe=fast",
        "model.max_position=64",
        "shard.max_seq_len=64",
        "train.batch_size=8",
        "train.steps=12",
        "train.eval_every=12",
        "train.eval_sequences=16",
        "logging.log_every=4",
        "logging.progress=false",
        "masking.strategy=hybrid",
        "masking.hybrid.causal_every=4",
    ]
    run = tmp_path / "run"
    pretrain(resolve(None, {"model": {"preset": "tiny"}}, overrides), synthetic_shards, run)
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    trains = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    assert trains and all(torch.isfinite(torch.tensor(r["loss"])) for r in trains)
    # 8 rows of 64 tokens, 2 causal (slots 0 and 4), each predicting its ~60 eligible tokens: well over the ~55
    # positions that 8 uniformly masked rows give at the recipe's rate.
    assert all(r["masked_tokens"] > 2 * 50 for r in trains)
    assert evals and evals[-1]["step"] == 12 and evals[-1]["eval_loss"] > 0
    assert 'strategy = "hybrid"' in (run / "settings.toml").read_text()
    # Another run's settings refuse the table of a strategy they do not run.
    with pytest.raises(MapnetError, match=r"masking.hybrid.causal_every = 8 only applies with masking.strategy"):
        resolve(None, {"model": {"preset": "tiny"}}, ["masking.hybrid.causal_every=8"])
    assert any("causal_every must be >= 1" in p for p in HybridSettings(causal_every=0).problems())
