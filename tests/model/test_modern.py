"""The modern encoder block (`model.block = "modern"`): RoPE, GeGLU and no biases against hand computations; the
interface every caller of the BERT encoder uses; training, MAP-Net and exact resume with it; and the paper's
BERT block left bit-for-bit as it was."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
import torch
import torch.nn.functional as F

from mapnet_cli import settings as settings_mod
from mapnet_cli.errors import MapnetError
from mapnet_cli.model.bert import BertConfig, BertForMLM, build_encoder, default_intermediate, flops_per_token
from mapnet_cli.model.modern import ModernBlock, ModernEncoder, rope_tables, rotate


def modern_cfg(**kw) -> BertConfig:
    base = dict(
        vocab_size=97,
        layers=2,
        hidden=32,
        heads=4,
        intermediate=48,
        max_position=64,
        pad_id=0,
        norm="pre",
        block="modern",
        dropout=0.0,
        attention_dropout=0.0,
        layer_norm_eps=1e-5,
    )
    return BertConfig(**{**base, **kw})


def jiggled(model):
    """Trained-looking weights (LayerNorm gains off 1), so a misplaced norm or a swapped half shows."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


# ---------------------------------------------------------------- the pieces, by hand
def test_rope_rotates_each_pair_by_position_times_frequency():
    # head width 4, base 100: frequencies 1 and 100^(-1/2) = 0.1; dimension i pairs with i + 2.
    cos, sin = rope_tables(2, 4, 100.0)
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
    got = rotate(x, cos, sin)
    torch.testing.assert_close(got[0], x[0])  # position 0: no rotation
    c1, s1, c2, s2 = math.cos(1.0), math.sin(1.0), math.cos(0.1), math.sin(0.1)
    want = torch.tensor([1 * c1 - 3 * s1, 2 * c2 - 4 * s2, 3 * c1 + 1 * s1, 4 * c2 + 2 * s2])
    torch.testing.assert_close(got[1], want)


def test_rope_scores_depend_on_the_distance_only():
    torch.manual_seed(0)
    cos, sin = rope_tables(12, 8, 10_000.0)
    q, k = torch.randn(8), torch.randn(8)
    score = lambda i, j: rotate(q, cos[i], sin[i]) @ rotate(k, cos[j], sin[j])  # noqa: E731
    torch.testing.assert_close(score(3, 1), score(10, 8))
    torch.testing.assert_close(score(1, 3), score(5, 7))
    assert not torch.allclose(score(3, 1), score(1, 3))  # and on its sign: word order is visible


def hand_block(block: ModernBlock, x: torch.Tensor, cos, sin) -> torch.Tensor:
    """The block written out: LayerNorms without bias, rotary attention head by head, GeGLU."""
    H, h = x.shape[-1], block.heads
    d = H // h
    ln = lambda t, norm: F.layer_norm(t, (H,), norm.weight, None, norm.eps)  # noqa: E731
    xin = x if isinstance(block.attn_norm, torch.nn.Identity) else ln(x, block.attn_norm)
    Wq, Wk, Wv = block.qkv.weight.split(H)
    heads = []
    for i in range(h):
        s = slice(i * d, (i + 1) * d)
        q = rotate(xin @ Wq[s].T, cos, sin)
        k = rotate(xin @ Wk[s].T, cos, sin)
        heads.append(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), -1) @ (xin @ Wv[s].T))
    x = x + torch.cat(heads, -1) @ block.attn_out.weight.T
    I = block.ffn_out.weight.shape[1]
    u = ln(x, block.ffn_norm)
    inputs, gate = u @ block.ffn_in.weight[:I].T, u @ block.ffn_in.weight[I:].T
    return x + (F.gelu(inputs) * gate) @ block.ffn_out.weight.T


@pytest.mark.parametrize("first", [True, False])
def test_block_is_rotary_attention_then_geglu_without_biases(first):
    torch.manual_seed(0)
    block = ModernBlock(32, 4, 48, first=first)
    with torch.no_grad():
        for p in block.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    assert all(not n.endswith("bias") for n, _ in block.named_parameters())
    assert isinstance(block.attn_norm, torch.nn.Identity) == first
    x = torch.randn(2, 7, 32)
    cos, sin = rope_tables(7, 8, 10_000.0)
    torch.testing.assert_close(block(x, None, (cos, sin)), hand_block(block, x, cos, sin), atol=1e-5, rtol=1e-5)


def test_parameter_count_has_no_bias_but_the_vocabulary_s():
    cfg = modern_cfg(layers=3)
    model = BertForMLM(cfg)
    V, H, I, L = 97, 32, 48, 3
    per_block = 3 * H * H + H * H + H * 2 * I + I * H + H  # qkv, out, GeGLU in and out, ffn LayerNorm
    want = V * H + H + L * per_block + (L - 1) * H + H + (H * H + H + V)  # + attn LayerNorms past block 0, final, head
    assert model.num_parameters() == want
    assert [n for n, _ in model.named_parameters() if n.endswith("bias")] == ["head.bias"]
    assert not any("pos_embeddings" in n for n in model.state_dict())  # positions are rotary only


def test_default_widths_match_berts_feed_forward_parameters():
    assert [default_intermediate(h, "modern") for h in (128, 256, 768)] == [352, 704, 2048]
    assert default_intermediate(256) == 1024
    s = settings_mod.resolve(None, {"model": {"preset": "mini"}}, ["model.block=modern"])  # mini's fast recipe: pre-LN
    cfg = BertConfig.from_settings(s.model, vocab_size=100, pad_id=0)
    assert (cfg.block, cfg.norm, cfg.intermediate, cfg.rope_theta) == ("modern", "pre", 704, 10_000.0)
    bert = BertConfig.from_settings(settings_mod.preset("mini").model, vocab_size=100, pad_id=0)
    ratio = flops_per_token(cfg, 128, 0.15) / flops_per_token(bert, 128, 0.15)
    assert 1.0 < ratio < 1.02  # 3 x 704 vs 2 x 1024 per H: the same work, to the rounding


def test_settings_refuse_what_the_modern_block_cannot_be():
    problems = settings_mod.Settings(model=settings_mod.ModelSettings(block="modern")).problems()
    assert any("model.block 'modern' is pre-LN" in p and "model.norm = 'pre'" in p for p in problems)
    odd = settings_mod.ModelSettings(block="modern", norm="pre", hidden=36, heads=4)  # head width 9
    assert any("must be even" in p for p in odd.problems())
    assert any("rope_theta" in p for p in settings_mod.ModelSettings(rope_theta=0.0).problems())
    assert settings_mod.ModelSettings(block="modern", norm="pre").problems() == []


# ---------------------------------------------------------------- the encoder's interface
def test_masked_only_logits_equal_full_logits_with_padding_and_full_masks():
    torch.manual_seed(0)
    model = jiggled(BertForMLM(modern_cfg()))
    ids = torch.randint(5, 97, (3, 16))
    ids[2, 11:] = 0
    attn = ids != 0
    mask = (torch.rand(3, 16) < 0.3) & attn
    full = model(ids, attn)
    torch.testing.assert_close(model(ids, attn, mask), full[mask], atol=1e-5, rtol=1e-5)
    pairs = attn[:, None, :, None] & attn[:, None, None, :] | torch.eye(16, dtype=torch.bool)  # a full (T, T) mask
    torch.testing.assert_close(model(ids, pairs, mask), model(ids, pairs)[mask], atol=1e-5, rtol=1e-5)
    none = model(ids, attn, torch.zeros(3, 16, dtype=torch.bool))
    assert none.shape == (0, 97)


def test_padding_does_not_change_real_tokens_and_positions_matter():
    torch.manual_seed(0)
    enc = jiggled(ModernEncoder(modern_cfg()))
    ids = torch.randint(5, 97, (2, 10))
    padded = torch.cat([ids, torch.zeros(2, 6, dtype=torch.long)], 1)
    torch.testing.assert_close(enc(padded, padded != 0)[:, :10], enc(ids), atol=1e-5, rtol=1e-5)
    swapped = ids.clone()
    swapped[:, [3, 4]] = ids[:, [4, 3]]
    assert not torch.allclose(enc(swapped)[:, 0], enc(ids)[:, 0], atol=1e-4)  # RoPE sees the order


def test_glue_and_blimp_read_the_modern_encoder_as_they_read_berts():
    from mapnet_cli.evaluation.blimp.scoring import pll_scores
    from mapnet_cli.evaluation.glue.model import SequenceClassifier
    from mapnet_cli.evaluation.glue.pretrained import random_encoder

    torch.manual_seed(0)
    cfg = modern_cfg()
    enc = build_encoder(cfg)
    assert isinstance(enc, ModernEncoder) and isinstance(random_encoder(cfg, 0, 1), ModernEncoder)
    clf = SequenceClassifier(enc, num_outputs=2, dropout=0.0, pooling="mean")
    ids = torch.randint(5, 97, (2, 9))
    clf(ids, torch.ones(2, 9, dtype=torch.long)).sum().backward()
    assert all(p.grad is not None for p in enc.parameters())
    model = jiggled(BertForMLM(cfg))
    seq = ids[0, 1:-1].numpy()
    pll = pll_scores(model, [seq], 2, 3, 4, torch.ones(len(seq), dtype=torch.bool).numpy())
    by_hand = 0.0
    for i in range(len(seq)):
        row = torch.tensor([[2, *seq.tolist(), 3]])
        row[0, i + 1] = 4
        by_hand += torch.log_softmax(model(row)[0, i + 1], -1)[int(seq[i])].item()
    assert pll[0] == pytest.approx(by_hand, abs=1e-4)


# ---------------------------------------------------------------- the paper's BERT block is unchanged
def test_the_bert_block_is_bit_for_bit_what_it_was():
    """Digests of the default models (post- and pre-LN) made with the code before the modern block existed
    (commit fae7175): the same parameters from the same seed, bit for bit, and the same logits."""
    want = {
        "post": (
            "d8025a5e8d6ab1c7e9214331939f34df28d5fc96472f63c5fe6f60515f61a26a",
            -11.6868433749,
            [0.24795281887054443, 0.10893771052360535, -0.14712977409362793],
        ),
        "pre": (
            "8121521b15124cacae9aa9705bc1048557543a57f5002256c3e127e202681c5a",
            -11.6867951083,
            [0.24795351922512054, 0.10893779247999191, -0.14713066816329956],
        ),
    }
    for norm, (digest, total, first) in want.items():
        torch.manual_seed(0)
        cfg = BertConfig(
            vocab_size=97, layers=2, hidden=32, heads=4, intermediate=64, max_position=64, pad_id=0, norm=norm
        )
        assert cfg.block == "bert"
        model = BertForMLM(cfg).eval()
        sd = model.state_dict()
        h = hashlib.sha256()
        for k in sorted(sd):
            h.update(k.encode())
            h.update(sd[k].numpy().tobytes())
        assert h.hexdigest() == digest, norm
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(5, 97, (2, 12), generator=g)
        with torch.no_grad():
            full = model(ids)
        assert full.double().sum().item() == pytest.approx(total, abs=1e-5)
        torch.testing.assert_close(full[0, 0, :3], torch.tensor(first), atol=1e-6, rtol=0)


def test_old_checkpoint_configs_read_as_the_bert_block():
    old = {k: v for k, v in modern_cfg(block="bert", norm="post").to_dict().items() if k not in ("block", "rope_theta")}
    assert BertConfig.from_dict(old).block == "bert"


# ---------------------------------------------------------------- the trainer
@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    from tiny_shards import write_tiny_shards

    return write_tiny_shards(tmp_path_factory.mktemp("modern-shards") / "shards")


MODERN = [
    "train.recipe=fast",
    "model.block=modern",
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.steps=40",
    "train.short_seq.len=0",
    "train.short_seq.steps=0",
    "train.eval_every=20",
    "train.eval_sequences=16",
    "train.checkpoint_every=20",
    "optim.warmup.steps=3",
    "optim.lr=3e-3",
    "logging.log_every=5",
    "logging.progress=false",
]


def test_pretrain_with_the_modern_block_learns_and_checkpoints_it(shards, tmp_path):
    from mapnet_cli.model import checkpoint
    from mapnet_cli.train import pretrain

    s = settings_mod.resolve(None, {"model": {"preset": "tiny"}}, MODERN)
    last = pretrain(s, shards, tmp_path / "run")
    evals = [
        r for r in map(json.loads, (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) if r["kind"] == "eval"
    ]
    assert evals[-1]["eval_loss"] < evals[0]["eval_loss"] - 0.3  # it learns
    meta = checkpoint.read_config(last)
    assert (meta["model"]["block"], meta["model"]["norm"], meta["model"]["intermediate"]) == ("modern", "pre", 352)
    model = checkpoint.load_model(last)[0]
    assert isinstance(model.encoder, ModernEncoder)
    # --init-from the run: the block and size are the run's; `--preset tiny` names that size (352 is tiny's modern
    # width).
    from mapnet_cli.train import init_from

    s2 = init_from.resolve(
        None, {"model": {"preset": "tiny"}}, [f"model.init_from={tmp_path / 'run'}", "shard.max_seq_len=32"]
    )
    assert (s2.model.block, s2.model.norm, s2.model.intermediate, s2.model.preset) == ("modern", "pre", 0, "tiny")
    start, _ = init_from.start_model(
        BertConfig.from_settings(s2.model, model.cfg.vocab_size, model.cfg.pad_id),
        1,
        init_from.open_source(tmp_path / "run"),
    )
    assert all(torch.equal(start.state_dict()[k], v) for k, v in model.state_dict().items())
    with pytest.raises(MapnetError, match="model.block = 'bert'"):
        init_from.resolve(None, {}, [f"model.init_from={tmp_path / 'run'}", "shard.max_seq_len=32", "model.block=bert"])


@pytest.mark.slow
def test_mapnet_masking_and_exact_resume_with_the_modern_block(shards, tmp_path):
    from safetensors.torch import load_file

    from mapnet_cli.train import pretrain

    s = settings_mod.resolve(
        None,
        {"model": {"preset": "tiny"}},
        [*MODERN, "masking.strategy=mapnet", "train.steps=20", "train.checkpoint_every=10"],
    )
    straight = pretrain(s, shards, tmp_path / "a")
    pretrain(s, shards, tmp_path / "b", stop_at=10)
    resumed = pretrain(s, shards, tmp_path / "b", resume=True)
    wa, wb = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert wa.keys() == wb.keys() and any(k.startswith("mapnet.") for k in wa)
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k  # bitwise


def test_vmap_over_single_sequences_runs_the_last_layer_shortcut():
    """The variance tool takes per-example gradients with vmap(grad) over batches of one (as for BERT's block)."""
    torch.manual_seed(0)
    model = jiggled(BertForMLM(modern_cfg()))
    params = {n: p.detach() for n, p in model.named_parameters()}
    ids = torch.randint(5, 97, (3, 12))
    pos = torch.tensor([[1, 5], [0, 7], [3, 4]])

    def loss(p, i, q):
        return torch.func.functional_call(model, p, (i[None], None, q)).square().sum()

    per_example = torch.func.vmap(torch.func.grad(loss), in_dims=(None, 0, 0))(params, ids, pos)
    for k in range(3):
        one = torch.func.grad(loss)(params, ids[k], pos[k])
        for name in ("encoder.blocks.1.qkv.weight", "encoder.tok_embeddings.weight"):
            # fp32 gradients summed in another order: one element of 3,104 differed by 1.2e-5 on an AMX Xeon (as
            # test_bert's gradient checks, 1e-4); a wrong shortcut is off by orders of magnitude more.
            torch.testing.assert_close(per_example[name][k], one[name], atol=1e-4, rtol=1e-4)
        full = model(ids[k : k + 1])[0, pos[k]]
        torch.testing.assert_close(
            torch.func.functional_call(model, params, (ids[k : k + 1], None, pos[k])), full, atol=1e-5, rtol=1e-5
        )
