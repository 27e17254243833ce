"""The BERT encoder: sizes, BERT init, masked-only head, padding, losses."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mapnet_cli import settings as settings_mod
from mapnet_cli.model.bert import BertConfig, BertForMLM, Block, Encoder, flops_per_token


def tiny_cfg(**kw) -> BertConfig:
    base = dict(vocab_size=97, layers=2, hidden=32, heads=4, intermediate=64, max_position=64, pad_id=0)
    return BertConfig(**{**base, **kw})


def test_base_preset_has_bert_base_size():
    s = settings_mod.preset("base")
    cfg = BertConfig.from_settings(s.model, vocab_size=30000, pad_id=0)
    assert (cfg.layers, cfg.hidden, cfg.heads, cfg.intermediate) == (12, 768, 12, 3072)
    n = BertForMLM(cfg).num_parameters()
    # BERT-base is "110M" with 30522 words, token types and a pooler; without those ~109M.
    assert 108_000_000 < n < 111_000_000
    # Exact count from the architecture, so a stray or missing parameter shows up.
    H, L, V, P, I = 768, 12, 30000, 512, 3072
    per_block = 3 * H * H + 3 * H + H * H + H + 2 * H + H * I + I + I * H + H + 2 * H
    assert n == V * H + P * H + 2 * H + L * per_block + (H * H + H + 2 * H + V)


@pytest.mark.parametrize(
    "name,shape",
    [
        ("tiny", (2, 128, 2)),
        ("mini", (4, 256, 4)),
        ("small", (4, 512, 8)),
        ("medium", (8, 512, 8)),
        ("base", (12, 768, 12)),
    ],
)
def test_presets_map_to_config(name, shape):
    cfg = BertConfig.from_settings(settings_mod.preset(name).model, vocab_size=1000, pad_id=0)
    assert (cfg.layers, cfg.hidden, cfg.heads) == shape
    assert cfg.intermediate == 4 * cfg.hidden and cfg.dropout == 0.1 and cfg.init_std == 0.02


def test_config_round_trips_through_dict():
    cfg = tiny_cfg(dropout=0.0)
    assert BertConfig.from_dict(cfg.to_dict()) == cfg


def test_bert_init():
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg(hidden=256, heads=4, intermediate=1024))
    for name, p in model.named_parameters():
        if "norm" in name and name.endswith("weight"):
            assert torch.all(p == 1), name
        elif name.endswith("bias"):
            assert torch.all(p == 0), name
        else:
            assert abs(p.std().item() - 0.02) < 0.004, name


def test_decoder_is_tied_to_the_token_embedding():
    model = BertForMLM(tiny_cfg())
    V, H = model.cfg.vocab_size, model.cfg.hidden
    big = [n for n, p in model.named_parameters() if p.shape == (V, H)]
    assert big == ["encoder.tok_embeddings.weight"]  # no second copy to drift apart
    ids = torch.randint(5, V, (2, 8))
    model(ids, None, torch.ones(2, 8, dtype=torch.bool)).sum().backward()
    assert model.encoder.tok_embeddings.weight.grad is not None


def test_masked_only_logits_equal_full_logits_at_those_positions():
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg()).eval()
    ids = torch.randint(5, 97, (3, 16))
    mask = torch.rand(3, 16) < 0.3
    full = model(ids)
    assert full.shape == (3, 16, 97)
    torch.testing.assert_close(model(ids, None, mask), full[mask])
    flat = mask.flatten().nonzero().squeeze(1)
    torch.testing.assert_close(model(ids, None, flat), full[mask])


def test_padding_does_not_change_real_tokens():
    torch.manual_seed(0)
    enc = Encoder(tiny_cfg()).eval()
    ids = torch.randint(5, 97, (1, 10))
    padded = torch.cat([ids, torch.zeros(1, 6, dtype=torch.long)], 1)
    attn = padded != 0
    torch.testing.assert_close(enc(padded, attn)[:, :10], enc(ids), atol=1e-5, rtol=1e-5)
    # Without the mask the pads leak into attention: the check above is not vacuous.
    assert not torch.allclose(enc(padded)[:, :10], enc(ids), atol=1e-4)


def test_block_all_true_mask_equals_no_mask():
    torch.manual_seed(0)
    block = Block(32, 4, 64).eval()
    x = torch.randn(2, 7, 32)
    torch.testing.assert_close(block(x, torch.ones(2, 1, 1, 7, dtype=torch.bool)), block(x, None))


def test_block_matches_a_hand_written_post_ln_layer():
    torch.manual_seed(0)
    b = Block(32, 4, 64).eval()
    x = torch.randn(2, 5, 32)
    q, k, v = b.qkv(x).split(32, -1)
    heads = lambda t: t.view(2, 5, 4, 8).transpose(1, 2)
    att = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / 8**0.5, -1) @ heads(v)
    h = b.attn_norm(x + b.attn_out(att.transpose(1, 2).reshape(2, 5, 32)))
    want = b.ffn_norm(h + b.ffn_out(F.gelu(b.ffn_in(h))))
    torch.testing.assert_close(b(x), want, atol=1e-5, rtol=1e-5)


def test_pre_ln_block_matches_a_hand_written_pre_ln_layer():
    torch.manual_seed(0)
    b = Block(32, 4, 64, norm="pre").eval()
    with torch.no_grad():  # LayerNorms that are not the identity, so a misplaced one shows
        for norm in (b.attn_norm, b.ffn_norm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_(0, 0.1)
    x = torch.randn(2, 5, 32) * 3
    q, k, v = b.qkv(b.attn_norm(x)).split(32, -1)
    heads = lambda t: t.view(2, 5, 4, 8).transpose(1, 2)
    att = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / 8**0.5, -1) @ heads(v)
    h = x + b.attn_out(att.transpose(1, 2).reshape(2, 5, 32))
    want = h + b.ffn_out(F.gelu(b.ffn_in(b.ffn_norm(h))))
    torch.testing.assert_close(b(x), want, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="norm"):
        Block(32, 4, 64, norm="sandwich")


def test_pre_ln_encoder_ends_with_a_final_layer_norm_and_post_ln_has_none():
    torch.manual_seed(0)
    pre = Encoder(tiny_cfg(norm="pre")).eval()
    assert Encoder(tiny_cfg()).final_norm is None
    ids = torch.randint(5, 97, (2, 9))
    x = pre.emb_dropout(pre.emb_norm(pre.tok_embeddings(ids) + pre.pos_embeddings.weight[:9]))
    for block in pre.blocks:
        x = block(x)
    torch.testing.assert_close(pre(ids), pre.final_norm(x))
    names = {n for n, _ in pre.named_parameters()}
    assert {"final_norm.weight", "final_norm.bias"} <= names


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_settings_choose_the_layout(norm):
    s = settings_mod.resolve(None, {"model": {"preset": "tiny"}}, [f"model.norm={norm}"])
    cfg = BertConfig.from_settings(s.model, vocab_size=100, pad_id=0)
    assert cfg.norm == norm and BertForMLM(cfg).encoder.blocks[0].pre_norm == (norm == "pre")
    # A checkpoint written before model.norm existed reads back as the post-LN model it is.
    old = {k: v for k, v in tiny_cfg().to_dict().items() if k != "norm"}
    assert BertConfig.from_dict(old).norm == "post"


def test_mlm_losses_are_per_position_and_per_sequence_means():
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg()).eval()
    targets = torch.randint(5, 97, (3, 12))
    inputs = targets.clone()
    mask = torch.zeros(3, 12, dtype=torch.bool)
    mask[0, [1, 4]] = True
    mask[1, [2, 3, 7, 9]] = True  # row 2 has nothing masked
    inputs[mask] = 4
    out = model.mlm_losses(inputs, None, mask, targets)
    full = model(inputs)
    want = F.cross_entropy(full[mask], targets[mask], reduction="none")
    torch.testing.assert_close(out.token_losses, want)
    assert out.rows.tolist() == [0, 0, 1, 1, 1, 1]
    torch.testing.assert_close(out.sequence_losses, torch.stack([want[:2].mean(), want[2:].mean(), torch.tensor(0.0)]))
    assert torch.equal(out.labels, targets[mask])


def test_dropout_only_in_training():
    model = BertForMLM(tiny_cfg())
    ids = torch.randint(5, 97, (2, 8))
    model.eval()
    assert torch.equal(model(ids), model(ids))
    model.train()
    assert not torch.equal(model(ids), model(ids))


def test_bf16_autocast_runs_and_keeps_fp32_losses():
    model = BertForMLM(tiny_cfg())
    ids = torch.randint(5, 97, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.bool)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model.mlm_losses(ids, None, mask, ids)
    assert out.token_losses.dtype == torch.float32 and torch.isfinite(out.token_losses).all()


def test_too_long_input_is_refused():
    with pytest.raises(ValueError, match="max_position"):
        Encoder(tiny_cfg(max_position=8))(torch.zeros(1, 9, dtype=torch.long))


def test_flops_per_token_counts_only_the_work_at_masked_positions():
    cfg = tiny_cfg(vocab_size=30000)
    H, I, T, V, L = 32, 64, 128, 30000, 2
    block = 2 * (4 * H * H + 2 * H * I) + 2 * 2 * T * H
    head = 2 * (H * H + H * V)
    # Everything everywhere (what the HF arm of the benchmark does) ...
    assert flops_per_token(cfg, T, 1.0) == pytest.approx(3 * (L * block + head))
    # ... and at 15%: the head and the last block, save its K and V, scale with the mask.
    last_at_mask = block - 2 * 2 * H * H
    assert flops_per_token(cfg, T, 1.0) - flops_per_token(cfg, T, 0.15) == pytest.approx(
        3 * 0.85 * (last_at_mask + head)
    )


def _uneven_batch(B=4, T=16, padded_row=1):
    """Ids, a key-padding mask and positions with a different count in every row (one row empty)."""
    ids = torch.randint(5, 97, (B, T))
    attn = torch.ones(B, T, dtype=torch.bool)
    attn[padded_row, T - 5 :] = False
    ids[~attn] = 0
    mask = (torch.rand(B, T) < 0.3) & attn
    mask[2] = False
    mask[0, :3] = True
    return ids, attn, mask


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("attn_kind", ["none", "keys", "full"])
def test_last_layer_at_masked_positions_is_exact(attn_kind, norm):
    """`Encoder(at=...)` runs the last block only where the loss looks; logits and
    every parameter's gradient must match the full forward at those positions."""
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg(layers=3, norm=norm)).eval()
    ids, attn, mask = _uneven_batch()
    att = {
        "none": None,
        "keys": attn,
        "full": attn[:, None, None, :] & torch.rand(4, 1, 16, 16).lt(0.8) | torch.eye(16, dtype=torch.bool),
    }[attn_kind]
    if attn_kind == "none":
        mask = mask | (torch.rand(4, 16) < 0.2)  # no padding: any position may be masked
        mask[2] = False
    # The full path: every position through every layer, then pick.
    want = model.head(model.encoder(ids, att), model.encoder.tok_embeddings.weight)[mask]
    gw = torch.autograd.grad(want.square().sum(), list(model.parameters()))
    got = model(ids, att, mask)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    gg = torch.autograd.grad(got.square().sum(), list(model.parameters()))
    for (name, _), a, b in zip(model.named_parameters(), gg, gw):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4, msg=name)


def test_last_layer_accepts_a_three_dimensional_mask_like_the_full_path():
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg()).eval()
    ids, _, mask = _uneven_batch()
    att = (torch.rand(1, 16, 16) < 0.7) | torch.eye(16, dtype=torch.bool)  # (1, T, T): broadcast from the right
    want = model.head(model.encoder(ids, att), model.encoder.tok_embeddings.weight)[mask]
    torch.testing.assert_close(model(ids, att, mask), want, atol=1e-5, rtol=1e-5)


def test_positions_interleaved_across_sequences_are_refused():
    """Flat indices must come grouped by sequence (as a bool mask's nonzero gives them):
    interleaved ones would put two queries in one slot and return wrong logits."""
    model = BertForMLM(tiny_cfg()).eval()
    ids = torch.randint(5, 97, (2, 16))
    with pytest.raises(ValueError, match="grouped by sequence"):
        model(ids, None, torch.tensor([16, 0, 17]))
    # Order within one sequence is free.
    torch.testing.assert_close(
        model(ids, None, torch.tensor([3, 1, 20, 17])), model(ids).flatten(0, 1)[[3, 1, 20, 17]], atol=1e-5, rtol=1e-5
    )


def test_compiling_a_block_covers_its_masked_positions_path():
    """`train.compile` compiles each block in place: the last block's masked-only
    path must be inside what it compiles, not a side door around it."""
    from torch._dynamo.testing import CompileCounter

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg()).eval()
    ids, attn, mask = _uneven_batch()
    want = model(ids, attn, mask)
    counter = CompileCounter()
    model.encoder.blocks[-1].compile(backend=counter)
    torch.testing.assert_close(model(ids, attn, mask), want, atol=1e-5, rtol=1e-5)
    assert counter.frame_count >= 1 and counter.op_count > 0
    torch._dynamo.reset()


def test_last_layer_query_slots_padded_to_full_length_under_compile(monkeypatch):
    """Traced whole by torch.compile, the widest row is not read (a host sync would split the graph): slots pad to T."""
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg()).eval()
    ids, attn, mask = _uneven_batch()
    want = model(ids, attn, mask)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    torch.testing.assert_close(model(ids, attn, mask), want, atol=1e-5, rtol=1e-5)


def test_last_layer_at_positions_for_one_sequence_and_for_none():
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg()).eval()
    ids = torch.randint(5, 97, (1, 12))
    pos = torch.tensor([0, 3, 11])
    torch.testing.assert_close(model(ids, None, pos), model(ids)[0, pos], atol=1e-5, rtol=1e-5)
    # Nothing masked anywhere: empty logits, yet every parameter is still in the graph (DDP needs that).
    out = model(ids, None, torch.zeros(1, 12, dtype=torch.bool))
    assert out.shape == (0, 97)
    grads = torch.autograd.grad(out.sum(), list(model.parameters()), allow_unused=True)
    assert all(g is not None for g in grads)


def test_vmap_over_single_sequences_runs_the_last_layer_shortcut():
    """The variance tool takes per-example gradients with vmap(grad) over batches of one."""
    torch.manual_seed(0)
    model = BertForMLM(tiny_cfg()).eval()
    params = {n: p.detach() for n, p in model.named_parameters()}
    ids = torch.randint(5, 97, (3, 12))
    pos = torch.tensor([[1, 5], [0, 7], [3, 4]])

    def loss(p, i, q):
        return torch.func.functional_call(model, p, (i[None], None, q)).square().sum()

    per_example = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(params, ids, pos)
    for k in range(3):
        one = torch.func.grad(loss)(params, ids[k], pos[k])
        for name in ("encoder.blocks.1.qkv.weight", "encoder.tok_embeddings.weight"):
            torch.testing.assert_close(per_example[name][k], one[name], atol=1e-5, rtol=1e-5)
    full = torch.func.functional_call(model, params, (ids[:1],))[0, pos[0]]
    torch.testing.assert_close(
        torch.func.functional_call(model, params, (ids[:1], None, pos[0])), full, atol=1e-5, rtol=1e-5
    )
