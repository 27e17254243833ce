"""How a step executes, not what it computes (issue 46's candidates): each option gives the losses of the
default, bitwise where the arithmetic is the same and to float32 rounding where it is not."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from tiny_shards import write_tiny_shards

from mapnet_cli import distributed
from mapnet_cli.errors import MapnetError
from mapnet_cli.model.bert import BertForMLM
from mapnet_cli.settings import OptimSettings, resolve
from mapnet_cli.train import Run, train_step
from mapnet_cli.train.optim import build_optimizer

# Dropout off: compiled code draws its dropout masks from another generator than eager code does.
BASE = [
    "train.recipe=paper",
    "model.max_position=64",
    "shard.max_seq_len=32",
    "train.batch_size=8",
    "train.steps=20",
    "train.eval_every=0",
    "train.eval_sequences=8",
    "train.checkpoint_every=0",
    "optim.warmup.steps=2",
    "optim.lr=3e-3",
    "logging.progress=false",
    "model.dropout=0.0",
    "model.attention_dropout=0.0",
    "train.micro_batch_size=4",
]


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


def losses(shards: Path, out: Path, *extra: str, steps: int = 3, info=None) -> tuple[list[float], Run]:
    """The read losses and gradient norms of the first `steps` optimizer steps of a tiny run, and the run."""
    info = info or distributed.DistInfo()
    run = Run(resolve(None, {"model": {"preset": "tiny"}}, [*BASE, *extra]), shards, out, info, False, [])
    run.initial = {k: v.detach().clone() for k, v in run.model.state_dict().items()}
    seen = []
    for step in range(steps):
        torch.manual_seed(step)
        st = train_step(
            run.ddp,
            run.optimizer,
            run.scheduler,
            run.batches(step),
            scale=1 / 8,
            grad_clip=0.0,
            autocast=run.autocast,
            info=info,
            batch_size=8,
        )
        seen += [st.loss, st.grad_norm]
        run.position += run.schedule.batch(step) // run.strategy.copies
    return seen, run


# ---------------------------------------------------------------- optim.impl
def test_foreach_adamw_gives_the_fused_losses_to_float_rounding(shards, tmp_path):
    fused, a = losses(shards, tmp_path / "fused")
    foreach, b = losses(shards, tmp_path / "foreach", "optim.impl=foreach")
    assert a.optimizer.defaults["fused"] and not a.optimizer.defaults["foreach"]
    assert b.optimizer.defaults["foreach"] and not b.optimizer.defaults["fused"]
    assert fused[:2] == foreach[:2]  # the first step's loss and gradient come before any update: bitwise
    assert foreach == pytest.approx(fused, rel=1e-5)
    for name, p in a.model.state_dict().items():  # the updates, compared as wholes (as test_train's accumulation test)
        ua, ub = p - a.initial[name], b.model.state_dict()[name] - b.initial[name]
        assert ua.norm() > 0 and (ua - ub).norm() <= 1e-4 * ua.norm(), name


def test_fused_adamw_where_torch_has_none_is_refused_in_one_line(monkeypatch):
    real = torch.optim.AdamW

    def without_fused(params, fused=None, **kwargs):  # what torch says for a device with no fused kernel
        if fused:
            raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")
        return real(params, fused=fused, **kwargs)

    monkeypatch.setattr(torch.optim, "AdamW", without_fused)
    model = torch.nn.Linear(2, 2)
    with pytest.raises(MapnetError, match=r"optim.impl = fused: .*supported devices.*--set optim.impl=foreach"):
        build_optimizer([model], OptimSettings())
    assert build_optimizer([model], OptimSettings(impl="foreach")).defaults["foreach"]


# ---------------------------------------------------------------- DDP: bucket size, static graph
@pytest.fixture
def one_process_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield distributed.init("cpu")
    finally:
        dist.destroy_process_group()


def test_ddp_bucket_size_reaches_ddp_and_leaves_accumulated_losses_bitwise(shards, tmp_path, one_process_group):
    info = one_process_group
    plain, a = losses(shards, tmp_path / "plain", info=info)
    small, b = losses(shards, tmp_path / "small", "distributed.bucket_cap_mb=0.01", info=info)
    assert isinstance(a.ddp, torch.nn.parallel.DistributedDataParallel)
    assert a.ddp.bucket_bytes_cap == 25 * 1024 * 1024 and not a.ddp.static_graph
    assert b.ddp.bucket_bytes_cap == int(0.01 * 1024 * 1024)
    assert small == plain  # two micro-batches per step: the first under no_sync, the all-reduce on the second


def test_ddp_static_graph_gives_the_same_losses_and_is_refused_with_accumulation(shards, tmp_path, one_process_group):
    info = one_process_group
    whole = "train.micro_batch_size=8"  # one micro-batch per step
    plain, _ = losses(shards, tmp_path / "plain", whole, info=info)
    static, run = losses(shards, tmp_path / "static", whole, "distributed.static_graph=true", info=info)
    assert run.ddp.static_graph and static == plain
    with pytest.raises(MapnetError, match="static_graph cannot be combined with gradient accumulation"):
        losses(shards, tmp_path / "accumulating", "distributed.static_graph=true", info=info)


# ---------------------------------------------------------------- train.compile_scope / compile_mode
def test_compile_settings_are_checked():
    with pytest.raises(MapnetError, match="train.compile_mode"):
        resolve(None, {}, ["train.compile_mode=fastest"])
    with pytest.raises(MapnetError, match="distributed.bucket_cap_mb must be > 0"):
        resolve(None, {}, ["distributed.bucket_cap_mb=0"])


@pytest.mark.slow  # Inductor compiles the tiny model's forward and backward on the CPU (~40 s on 2 cores, cold)
def test_compiled_scopes_give_the_eager_losses_to_float_rounding(shards, tmp_path):
    """Both scopes in one test, one after the other in one process: the model scope's kernels are mostly the blocks
    scope's, which Inductor then reads from its cache. With a cold cache, as on a clean CI machine, one test per
    scope on two workers compiled those kernels twice: measured 74 CPU-seconds apart against 56 together."""
    eager, _ = losses(shards, tmp_path / "eager")
    for scope in ("blocks", "model"):
        compiled, run = losses(shards, tmp_path / scope, "train.compile=true", f"train.compile_scope={scope}")
        if scope == "model":
            assert hasattr(run.model, "_compiled_call_impl") and run.model._compiled_call_impl is not None
            assert all(b._compiled_call_impl is None for b in run.model.encoder.blocks)
        else:
            assert all(b._compiled_call_impl is not None for b in run.model.encoder.blocks)
        assert list(run.model.state_dict()) == list(BertForMLM(run.cfg).state_dict())  # checkpoints keep their keys
        assert compiled == pytest.approx(eager, rel=1e-4), scope


# ---------------------------------------------------------------- attention takes SDPA's fused kernels
def test_packed_sequences_reach_sdpa_with_no_mask(shards, tmp_path, monkeypatch):
    """Shards packed without padding give no attention mask, so SDPA may pick FlashAttention (a dense
    boolean mask sends it to a slower kernel; benchmarks/bench_ceiling.py prints which one runs on a GPU)."""
    masks = []
    real = torch.nn.functional.scaled_dot_product_attention

    def recording(q, k, v, attn_mask=None, **kwargs):
        masks.append(attn_mask)
        return real(q, k, v, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    _, run = losses(shards, tmp_path / "run", steps=1)
    blocks = run.cfg.layers
    assert len(masks) == 2 * blocks  # two micro-batches, every block (the last one at its masked rows)
    assert all(m is None for m in masks)
