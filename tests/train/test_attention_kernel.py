"""`train.attention_kernel` (train/step.py StepContext): SDPA's math kernel in the training steps, the same function."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from mapnet_cli.errors import MapnetError
from mapnet_cli.settings import resolve
from mapnet_cli.train import pretrain
from mapnet_cli.train.step import StepContext


def attention_ops(context) -> set[str]:
    q, k, v = (torch.randn(2, 2, 16, 8, requires_grad=True) for _ in range(3))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        with context:
            out = F.scaled_dot_product_attention(q, k, v)
        out.sum().backward()
    return {e.key for e in prof.key_averages() if "attention" in e.key}


def test_the_math_kernel_replaces_flash_attention_forward_and_backward():
    device = torch.device("cpu")
    auto, math = attention_ops(StepContext(False, device)), attention_ops(StepContext(False, device, "math"))
    assert any("flash" in op for op in auto), auto  # PyTorch's pick on the CPU at these shapes
    assert not any("flash" in op for op in math) and "aten::_scaled_dot_product_attention_math" in math, math


def test_the_context_is_reusable_and_refuses_an_unknown_kernel():
    context = StepContext(False, torch.device("cpu"), "math")
    for _ in range(2):  # sdpa_kernel's own context could be entered once only
        assert not any("flash" in op for op in attention_ops(context))
    assert any("flash" in op for op in attention_ops(StepContext(False, torch.device("cpu"))))  # nothing left behind
    with pytest.raises(ValueError, match="auto or math"):
        StepContext(False, torch.device("cpu"), "flash")


def losses(run) -> list[float]:
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if r["kind"] == "train"]


def test_a_run_on_the_math_kernel_trains_as_the_default_one(synthetic_shards, tmp_path, monkeypatch):
    """Every training step's forward runs under the math kernel (counted), and the losses are the default's."""
    from mapnet_cli.train import step

    entered = []
    real = step.sdpa_kernel
    monkeypatch.setattr(step, "sdpa_kernel", lambda backend: entered.append(backend) or real(backend))
    base = [
        "train.recipe=fast",
        "model.max_position=64",
        "shard.max_seq_len=64",
        "train.batch_size=8",
        "train.steps=8",
        "train.eval_every=8",
        "train.eval_sequences=16",
        "logging.log_every=1",
        "logging.progress=false",
    ]
    runs = {}
    for kernel in ("auto", "math"):
        runs[kernel] = tmp_path / kernel
        settings = resolve(None, {"model": {"preset": "tiny"}}, [*base, f"train.attention_kernel={kernel}"])
        pretrain(settings, synthetic_shards, runs[kernel])
        if kernel == "auto":
            assert entered == []
    assert len(entered) == 8 and set(entered) == {step.SDPBackend.MATH}  # one forward a step: no accumulation here
    auto, math = losses(runs["auto"]), losses(runs["math"])
    assert len(auto) == 8 and math == pytest.approx(auto, rel=1e-4)
    with pytest.raises(MapnetError, match="attention_kernel"):
        resolve(None, None, ["train.attention_kernel=flash"])


def test_math_cpu_is_math_on_a_cpu_and_pytorchs_pick_elsewhere():
    """The `hour` recipe's value: the reference kernel paid on the CPU it was measured on; a GPU keeps flash."""
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    t = resolve(None, None, ["train.attention_kernel=math-cpu"]).train
    assert (t.attention_kernel_on(cpu), t.attention_kernel_on(cuda)) == ("math", "auto")
    for kernel in ("auto", "math"):  # the others mean the same on every device
        t = resolve(None, None, [f"train.attention_kernel={kernel}"]).train
        assert t.attention_kernel_on(cpu) == t.attention_kernel_on(cuda) == kernel
    assert resolve(None, None, ["train.recipe=hour"]).train.attention_kernel_on(cpu) == "math"
    assert resolve(None, None, ["train.recipe=fast"]).train.attention_kernel == "auto"  # the other recipes as they were
