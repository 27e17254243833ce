"""The proposal network: shapes, eligibility, padding, sizing, and the ONE shared embedding."""

from __future__ import annotations

import pytest
import torch

from mapnet_cli.errors import MapnetError
from mapnet_cli.masking.mapnet import ProposalConfig, ProposalNetwork, load_proposal_state_dict, proposal_state_dict
from mapnet_cli.masking.uniform import eligible_positions
from mapnet_cli.model import checkpoint
from mapnet_cli.model.bert import BertConfig, BertForMLM, Block
from mapnet_cli.settings import MapnetSettings, MaskingSettings, ModelSettings, OptimSettings, WarmupSettings, preset
from mapnet_cli.train.optim import build_optimizer

SPECIAL = {"pad": 0, "unk": 1, "cls": 2, "sep": 3, "mask": 4}
V = 60


def tiny(seed: int = 0, dropout: float = 0.0):
    torch.manual_seed(seed)
    model = BertForMLM(
        BertConfig(
            vocab_size=V,
            layers=2,
            hidden=32,
            heads=2,
            intermediate=64,
            max_position=32,
            dropout=dropout,
            attention_dropout=dropout,
        )
    )
    cfg = ProposalConfig(
        layers=2,
        hidden=16,
        heads=2,
        intermediate=32,
        max_position=32,
        embed_dim=32,
        dropout=dropout,
        attention_dropout=dropout,
    )
    return model, ProposalNetwork(cfg, model.encoder.tok_embeddings)


def batch(seed: int = 0, B: int = 4, T: int = 16):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, T), generator=g)
    ids[:, 0] = SPECIAL["cls"]
    ids[1, 7] = SPECIAL["sep"]
    ids[2, 10:] = SPECIAL["pad"]
    return ids, ids != SPECIAL["pad"]


def test_sizes_follow_the_paper_and_the_presets():
    s = preset("base")
    cfg = ProposalConfig.from_settings(s.model, s.masking)
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.embed_dim) == (12, 384, 6, 768)  # paper: L12, H384, A6
    t = preset("tiny")
    cfg = ProposalConfig.from_settings(t.model, t.masking)
    assert (cfg.layers, cfg.hidden, cfg.heads) == (2, 64, 1)  # heads // 2 floored at 1
    own = ProposalConfig.from_settings(t.model, MaskingSettings(mapnet=MapnetSettings(layers=1, hidden=48, heads=3)))
    assert (own.layers, own.hidden, own.heads, own.intermediate) == (1, 48, 3, 192)
    # MAP-Net's dropout is its own setting (default 0), not the encoder's 0.1.
    assert (cfg.dropout, cfg.attention_dropout) == (0.0, 0.0) and t.model.dropout == 0.1
    noisy = ProposalConfig.from_settings(t.model, MaskingSettings(mapnet=MapnetSettings(dropout=0.1)))
    assert (noisy.dropout, noisy.attention_dropout) == (0.1, 0.1)
    assert any("mapnet.dropout" in p for p in MaskingSettings(mapnet=MapnetSettings(dropout=1.0)).problems())
    with pytest.raises(MapnetError, match="divisible"):
        ProposalConfig.from_settings(
            ModelSettings(hidden=100, heads=4), MaskingSettings(mapnet=MapnetSettings(heads=3))
        )
    problems = MaskingSettings(
        strategy="mapnet", mask_count="bernoulli", mapnet=MapnetSettings(hidden=50, heads=4)
    ).problems()
    assert any("mapnet.hidden" in p for p in problems) and any("mask_count" in p for p in problems)


def test_uses_the_encoders_block_class():
    _, proposal = tiny()
    assert all(type(b) is Block for b in proposal.blocks)


def test_log_probs_live_on_eligible_positions_and_start_uniform():
    _, proposal = tiny()
    ids, attn = batch()
    eligible = eligible_positions(ids, SPECIAL)
    log_p = proposal(ids, attn, eligible)
    assert torch.isneginf(log_p[~eligible]).all()
    assert torch.allclose(torch.logsumexp(log_p, 1), torch.zeros(4), atol=1e-5)
    # The zero-initialised score head makes the first proposal exactly uniform over eligible positions.
    n = eligible.sum(1, keepdim=True).float()
    assert torch.allclose(log_p.exp(), eligible / n, atol=1e-6)


def test_a_row_without_eligible_positions_is_all_neg_inf_not_nan():
    _, proposal = tiny()
    ids, attn = batch()
    eligible = eligible_positions(ids, SPECIAL)
    eligible[3] = False
    with torch.no_grad():
        proposal.score.weight.normal_()
    log_p = proposal(ids, attn, eligible)
    assert torch.isneginf(log_p[3]).all() and not torch.isnan(log_p).any()


def test_padding_does_not_change_the_scores_of_real_tokens():
    _, proposal = tiny()
    proposal.eval()
    with torch.no_grad():
        proposal.score.weight.normal_()
    ids, _ = batch()
    short = ids[:1, :10]
    padded = torch.cat([short, torch.zeros(1, 6, dtype=torch.long)], 1)
    s_short = proposal.scores(short, None)
    s_padded = proposal.scores(padded, padded != 0)
    assert torch.allclose(s_short, s_padded[:, :10], atol=1e-5)


def test_embedding_is_one_shared_parameter():
    model, proposal = tiny()
    emb = model.encoder.tok_embeddings
    assert proposal.tok_embeddings is emb  # the same module object, not a copy
    own = {id(p) for p in proposal.parameters()}
    assert id(emb.weight) not in own  # MAP-Net's parameters() hold only its own weights
    assert not any("tok_embeddings" in k for k in proposal.state_dict())
    optimizer = build_optimizer([model, proposal], OptimSettings())
    seen = [id(p) for g in optimizer.param_groups for p in g["params"]]
    assert len(seen) == len(set(seen)) and seen.count(id(emb.weight)) == 1
    assert len(seen) == len({id(p) for p in model.parameters()} | own)


def test_gradient_from_both_networks_accumulates_in_the_shared_embedding():
    model, proposal = tiny()
    with torch.no_grad():
        proposal.score.weight.normal_()  # so MAP-Net's gradient reaches its input embeddings
    ids, attn = batch()
    eligible = eligible_positions(ids, SPECIAL)
    mask = torch.zeros_like(eligible)
    mask[:, 3] = True

    def enc_loss():
        return model(ids, attn, mask, targets=ids).token_losses.sum()

    def map_loss():
        return -proposal(ids, attn, eligible)[:, 3].sum()

    grads = []
    for fn in (enc_loss, map_loss, lambda: enc_loss() + map_loss()):
        model.zero_grad(set_to_none=True)
        proposal.zero_grad(set_to_none=True)
        fn().backward()
        grads.append(model.encoder.tok_embeddings.weight.grad.clone())
    g_enc, g_map, g_both = grads
    assert g_enc.abs().sum() > 0 and g_map.abs().sum() > 0
    assert torch.allclose(g_both, g_enc + g_map, atol=1e-6)
    # An optimizer step through the encoder's parameter is seen by MAP-Net: same storage.
    before = proposal.tok_embeddings.weight.detach().clone()
    opt = build_optimizer([model, proposal], OptimSettings(lr=1e-2, warmup=WarmupSettings(steps=0)))
    opt.step()
    assert not torch.equal(proposal.tok_embeddings.weight, before)
    assert proposal.tok_embeddings.weight.data_ptr() == model.encoder.tok_embeddings.weight.data_ptr()


def test_weights_round_trip_under_the_mapnet_prefix(tmp_path):
    model, proposal = tiny(seed=1)
    with torch.no_grad():
        proposal.score.weight.normal_()
    path = tmp_path / "model.safetensors"
    checkpoint.save_weights(path, {"": model, "mapnet": proposal})
    model2, proposal2 = tiny(seed=2)
    checkpoint.load_weights(path, {"": model2, "mapnet": proposal2})
    for a, b in zip(proposal.state_dict().values(), proposal2.state_dict().values()):
        assert torch.equal(a, b)
    assert torch.equal(model.encoder.tok_embeddings.weight, proposal2.tok_embeddings.weight)
    sd = proposal_state_dict(proposal)
    assert sd and all(k.startswith("mapnet.") for k in sd)
    _, proposal3 = tiny(seed=3)
    load_proposal_state_dict(proposal3, {**sd, "head.bias": torch.zeros(1)})
    assert torch.equal(proposal3.score.weight, proposal.score.weight)
    with pytest.raises(MapnetError):
        load_proposal_state_dict(proposal3, {k: v for k, v in sd.items() if "score" not in k})


def test_rejects_an_embedding_of_the_wrong_width():
    model, _ = tiny()
    cfg = ProposalConfig(layers=1, hidden=16, heads=2, intermediate=32, max_position=32, embed_dim=64)
    with pytest.raises(ValueError):
        ProposalNetwork(cfg, model.encoder.tok_embeddings)
