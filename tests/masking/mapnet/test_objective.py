"""The MAP-Net objective and the joint micro-batch loss: math, gradient routing, split invariance."""

from __future__ import annotations

import math

import pytest
import torch

from mapnet_cli.masking.mapnet import (
    MapnetJoint,
    MapnetStats,
    ProposalConfig,
    ProposalNetwork,
    draw_masks,
    map_training_sequences,
    mapnet_micro_batch_loss,
    mapnet_objective,
)
from mapnet_cli.masking.uniform import SequenceRNG, apply_replacement, eligible_positions, sequence_keys, uniform_mask
from mapnet_cli.model.bert import BertConfig, BertForMLM
from mapnet_cli.settings import MapnetSettings, MaskingSettings, OptimSettings, WarmupSettings
from mapnet_cli.train.optim import build_optimizer

SPECIAL = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
V = 60
STEPS = 100


def tiny(seed: int = 0):
    torch.manual_seed(seed)
    model = BertForMLM(
        BertConfig(
            vocab_size=V,
            layers=1,
            hidden=32,
            heads=2,
            intermediate=64,
            max_position=64,
            dropout=0.0,
            attention_dropout=0.0,
        )
    )
    cfg = ProposalConfig(
        layers=1, hidden=16, heads=2, intermediate=32, max_position=64, embed_dim=32, dropout=0.0, attention_dropout=0.0
    )
    proposal = ProposalNetwork(cfg, model.encoder.tok_embeddings)
    with torch.no_grad():
        proposal.score.weight.normal_(std=0.5)  # a non-uniform proposal, so MAP rows differ from uniform ones
    return model, proposal


def batch(B: int = 8, T: int = 40, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    ids[:, 0] = SPECIAL["cls"]
    ids[:, T // 2] = SPECIAL["sep"]
    ids[B - 1, 3 * T // 4 :] = SPECIAL["pad"]
    return ids, ids != SPECIAL["pad"]


def run(model, proposal, ids, attn, slots, step, masking, kinds=None):
    return mapnet_micro_batch_loss(
        model,
        proposal,
        ids,
        attn,
        special_ids=SPECIAL,
        vocab_size=V,
        step=step,
        total_steps=STEPS,
        seed=5,
        slots=slots,
        masking=masking,
        rng=SequenceRNG(sequence_keys(5, step, slots, 1)),
        token_kinds=kinds,
    )


def test_objective_matches_hand_computation():
    p = torch.tensor([[0.1, 0.2, 0.3, 0.4]])
    chosen = torch.tensor([[True, False, True, True]])
    losses = torch.tensor([[2.0, 99.0, 4.0, 6.0]])  # baseline = 4 over the chosen ones
    got = mapnet_objective(p.log(), chosen, losses)
    want = -math.log(0.1) * (2 - 4) - math.log(0.3) * 0 - math.log(0.4) * (6 - 4)
    assert math.isclose(float(got), want, rel_tol=1e-6)
    one = torch.tensor([[False, True, False, False]])
    assert float(mapnet_objective(p.log(), one, losses)) == 0.0  # K = 1: the baseline is the loss itself


def test_one_gradient_step_raises_the_probability_of_the_harder_position():
    _, proposal = tiny(seed=3)
    ids, attn = batch(B=1, T=12)
    eligible = eligible_positions(ids, SPECIAL)
    chosen = torch.zeros_like(eligible)
    hard, easy = 3, 8
    chosen[0, [hard, easy]] = True
    losses = torch.zeros(1, 12)
    losses[0, hard], losses[0, easy] = 5.0, 1.0
    before = proposal(ids, attn, eligible).exp()[0].detach()
    opt = torch.optim.SGD(proposal.parameters(), lr=0.05)
    mapnet_objective(proposal(ids, attn, eligible), chosen, losses).sum().backward()
    opt.step()
    after = proposal(ids, attn, eligible).exp()[0].detach()
    assert after[hard] > before[hard] * 1.01
    assert after[easy] < before[easy] * 0.99


def test_uniform_rows_get_exactly_the_uniform_strategys_masks():
    model, proposal = tiny()
    ids, attn = batch()
    slots = list(range(8))
    keys = sequence_keys(5, 0, slots, 1)
    masking = MaskingSettings(strategy="mapnet")  # explore_start 1.0: at step 0 every row is uniform
    draw = draw_masks(
        proposal,
        ids,
        attn,
        special_ids=SPECIAL,
        vocab_size=V,
        step=0,
        total_steps=STEPS,
        seed=5,
        slots=slots,
        masking=masking,
        rng=SequenceRNG(keys),
    )
    rng = SequenceRNG(keys)
    mask = uniform_mask(ids, eligible_positions(ids, SPECIAL), 0.15, "exact", rng)
    inputs = apply_replacement(ids, mask, V, SPECIAL, 0.8, 0.1, rng)
    assert draw.uniform_rows.all()
    assert torch.equal(draw.chosen, mask) and torch.equal(draw.corrupted, inputs)
    assert torch.equal(draw.weights, torch.ones(8))


def test_map_rows_mask_k_eligible_positions_with_clipped_weights():
    _, proposal = tiny()
    ids, attn = batch()
    masking = MaskingSettings(mapnet=MapnetSettings(explore_start=0.0, explore_end=0.0, clip_epsilon=0.1))
    draw = draw_masks(
        proposal,
        ids,
        attn,
        special_ids=SPECIAL,
        vocab_size=V,
        step=0,
        total_steps=STEPS,
        seed=5,
        slots=range(8),
        masking=masking,
    )
    assert not draw.uniform_rows.any()
    assert torch.equal(draw.chosen.sum(1), draw.counts)
    assert not (draw.chosen & ~draw.eligible).any()
    assert ((draw.weights >= 0.9) & (draw.weights <= 1.1)).all()
    assert not torch.equal(
        draw.chosen, uniform_mask(ids, draw.eligible, 0.15, "exact", SequenceRNG(sequence_keys(5, 0, range(8), 1)))
    )  # MAP rows follow the proposal, not the uniform ranks
    assert not draw.weights.requires_grad


@pytest.mark.parametrize("importance", ["clipped", "ht"])
@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), float("inf")])
def test_a_diverged_proposal_still_masks_exactly_k_per_row(bad, importance):
    """Non-finite log-probabilities (a diverged proposal) must not shrink the mask: the step then reaches the
    loop's non-finite check, not the device-side size assert (a raw error, on one rank only)."""
    ids, attn = batch()
    eligible = eligible_positions(ids, SPECIAL)
    log_p = torch.randn(ids.shape, generator=torch.Generator().manual_seed(1)).log_softmax(1)
    log_p[:, 2:] = bad  # all but one position of every row: the mask needs some of them
    log_p = log_p.masked_fill(~eligible, float("-inf"))
    masking = MaskingSettings(mapnet=MapnetSettings(explore_start=0.0, explore_end=0.0, importance=importance))
    draw = draw_masks(
        lambda *_: log_p,
        ids,
        attn,
        special_ids=SPECIAL,
        vocab_size=V,
        step=0,
        total_steps=STEPS,
        seed=5,
        slots=range(8),
        masking=masking,
    )
    assert not draw.uniform_rows.any()
    assert torch.equal(draw.chosen.sum(1), draw.counts) and not (draw.chosen & ~draw.eligible).any()


def test_a_batch_equals_the_concatenation_of_its_halves():
    model, proposal = tiny()
    model.eval(), proposal.eval()
    ids, attn = batch()
    masking = MaskingSettings(mapnet=MapnetSettings(explore_start=0.5, explore_end=0.5, importance="unclipped"))
    kinds = {"low": torch.arange(5, 30), "high": torch.arange(30, V)}
    whole, st_whole = run(model, proposal, ids, attn, list(range(8)), 7, masking, kinds)
    parts = [
        run(model, proposal, ids[i : i + 4], attn[i : i + 4], list(range(i, i + 4)), 7, masking, kinds) for i in (0, 4)
    ]
    for name in ("enc_sum", "map_sum", "loss_sum", "map_sequences", "masked"):
        halves = sum(getattr(p, name) for p, _ in parts)
        assert torch.allclose(getattr(whole, name).double(), halves.double(), rtol=1e-5, atol=1e-5), name
    merged = MapnetStats().add(parts[0][1]).add(parts[1][1]).summary()
    full = st_whole.summary()
    assert full.keys() == merged.keys()
    for key in full:
        assert math.isclose(full[key], merged[key], rel_tol=1e-5, abs_tol=1e-7), key
    assert 0 < full["mapnet/uniform_fraction"] < 1  # both kinds of rows were exercised
    assert math.isclose(full["mapnet/mass/low"] + full["mapnet/mass/high"], 1.0, rel_tol=1e-5)
    assert math.isclose(full["mapnet/share/low"] + full["mapnet/share/high"], 1.0, rel_tol=1e-9)
    # The denominators a loop needs are known before any forward pass.
    assert map_training_sequences(7, STEPS, 5, range(8), masking) == int(whole.map_sequences)
    no_uniform = MaskingSettings(mapnet=MapnetSettings(explore_start=0.5, explore_end=0.5, train_on_uniform=False))
    w2, _ = run(model, proposal, ids, attn, list(range(8)), 7, no_uniform)
    assert map_training_sequences(7, STEPS, 5, range(8), no_uniform) == int(w2.map_sequences) < 8


def test_gradients_go_where_the_paper_says():
    model, proposal = tiny()
    ids, attn = batch()
    masking = MaskingSettings(mapnet=MapnetSettings(explore_start=0.0, explore_end=0.0))
    part, _ = run(model, proposal, ids, attn, list(range(8)), 3, masking)
    part.enc_sum.backward(retain_graph=True)
    # The weights are constants: the encoder's loss sends nothing into MAP-Net's own weights.
    assert all(p.grad is None or not p.grad.any() for p in proposal.parameters())
    model.zero_grad(set_to_none=True)
    part.map_sum.backward()
    # The encoder's losses are detached in eq. 10: MAP-Net's loss reaches the encoder only via the shared embedding.
    assert all(p.grad is None for n, p in model.named_parameters() if n != "encoder.tok_embeddings.weight")
    assert model.encoder.tok_embeddings.weight.grad.abs().sum() > 0
    assert all(p.grad is not None for p in proposal.parameters())


def test_total_follows_map_loss_on_and_lambda():
    model, proposal = tiny()
    ids, attn = batch()
    with torch.no_grad():
        part, _ = run(model, proposal, ids, attn, list(range(8)), 50, MaskingSettings())
    enc, mp = float(part.enc_sum) / 8, float(part.map_sum) / float(part.map_sequences)
    on_map = MaskingSettings(mapnet=MapnetSettings(loss_weight=0.01, loss_on="map"))
    on_enc = MaskingSettings(mapnet=MapnetSettings(loss_weight=0.01, loss_on="encoder"))
    assert math.isclose(float(part.total(on_map)), enc + 0.01 * mp, rel_tol=1e-5)
    assert math.isclose(float(part.total(on_enc)), mp + 0.01 * enc, rel_tol=1e-5)
    assert math.isclose(
        float(part.total(on_map, enc_scale=0.5, map_scale=0.25)),
        float(part.enc_sum) * 0.5 + 0.01 * float(part.map_sum) * 0.25,
        rel_tol=1e-5,
    )


def test_importance_none_is_the_plain_loss_and_no_map_rows_still_reach_every_parameter():
    model, proposal = tiny()
    ids, attn = batch()
    part, _ = run(
        model,
        proposal,
        ids,
        attn,
        list(range(8)),
        10,
        MaskingSettings(mapnet=MapnetSettings(importance="none", explore_start=0.0, explore_end=0.0)),
    )
    assert torch.allclose(part.enc_sum, part.loss_sum)
    # p_t = 1 and uniform rows not training MAP-Net: no row trains it, yet every MAP-Net
    # parameter gets a (zero) gradient, so DistributedDataParallel never waits for one.
    joint = MapnetJoint(model, proposal)
    part, _ = joint(
        ids,
        attn,
        special_ids=SPECIAL,
        vocab_size=V,
        step=0,
        total_steps=STEPS,
        seed=5,
        slots=list(range(8)),
        masking=MaskingSettings(mapnet=MapnetSettings(train_on_uniform=False)),
    )
    assert int(part.map_sequences) == 0
    part.total(MaskingSettings(mapnet=MapnetSettings(train_on_uniform=False))).backward()
    assert all(p.grad is not None and not p.grad.any() for p in proposal.parameters())
    assert len(list(joint.parameters())) == len({id(p) for p in joint.parameters()})


@pytest.mark.slow
def test_joint_training_moves_proposal_mass_off_determined_tokens():
    """A toy language: noise tokens (uniform, unpredictable) alternate with a constant token
    (determined by position). Once the encoder predicts the constant, its loss there is ~0, and
    eq. 10 must move MAP-Net's mass onto the noise tokens (the paper's 'harder masks')."""
    torch.manual_seed(0)
    model = BertForMLM(
        BertConfig(
            vocab_size=V,
            layers=1,
            hidden=32,
            heads=2,
            intermediate=64,
            max_position=32,
            dropout=0.0,
            attention_dropout=0.0,
        )
    )
    proposal = ProposalNetwork(
        ProposalConfig(
            layers=1,
            hidden=16,
            heads=2,
            intermediate=32,
            max_position=32,
            embed_dim=32,
            dropout=0.0,
            attention_dropout=0.0,
        ),
        model.encoder.tok_embeddings,
    )
    joint = MapnetJoint(model, proposal)
    optimizer = build_optimizer([joint], OptimSettings(lr=3e-3, warmup=WarmupSettings(steps=0)))
    masking = MaskingSettings(
        strategy="mapnet", mapnet=MapnetSettings(explore_start=1.0, explore_end=0.0, explore_steps=20)
    )
    kinds = {"determined": torch.tensor([30]), "noise": torch.arange(5, 20)}
    g = torch.Generator().manual_seed(1)
    B, steps = 16, 40
    masses = []
    for step in range(steps):
        noise = torch.randint(5, 20, (B, 8), generator=g)
        ids = torch.cat(
            [torch.full((B, 1), SPECIAL["cls"]), torch.stack([noise, torch.full_like(noise, 30)], 2).flatten(1)], 1
        )
        part, st = joint(
            ids,
            None,
            special_ids=SPECIAL,
            vocab_size=V,
            step=step,
            total_steps=steps,
            seed=0,
            slots=range(step * B, step * B + B),
            masking=masking,
            token_kinds=kinds,
        )
        part.total(masking).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        masses.append(st.summary()["mapnet/mass/determined"])
    assert abs(masses[0] - 0.5) < 1e-4  # the zero-initialised head starts uniform: half the tokens are determined
    assert masses[-1] < 0.2, masses  # observed ~0.03 at step 40, ~0.005 at step 100
