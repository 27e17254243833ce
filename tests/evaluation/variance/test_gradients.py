"""Per-example gradients: the training loss's gradient, vmap == loop, subsets, the sketch, no side effects."""

from __future__ import annotations

import math

import pytest
import torch

from mapnet_cli.errors import MapnetError
from mapnet_cli.evaluation.variance.gradients import (
    CountSketch,
    ExampleGradients,
    MaskedExample,
    eval_mode,
    select_parameters,
)
from mapnet_cli.model.bert import BertConfig, BertForMLM


def tiny_model(seed: int = 0, dropout: float = 0.0) -> BertForMLM:
    torch.manual_seed(seed)
    return BertForMLM(
        BertConfig(
            vocab_size=20,
            layers=1,
            hidden=8,
            heads=2,
            intermediate=16,
            max_position=8,
            dropout=dropout,
            attention_dropout=dropout,
        )
    )


def example(seed: int, weight: float = 1.0, k: int = 2) -> MaskedExample:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 20, (6,), generator=g)
    pos = torch.randperm(6, generator=g)[:k].sort().values
    inputs = ids.clone()
    inputs[pos] = 4
    return MaskedExample(inputs, pos, ids[pos], weight, None)


def test_gradient_is_that_of_the_training_loss_times_the_weight():
    model = tiny_model()
    ex = example(0, weight=1.7)
    grads = ExampleGradients(model)
    got = grads.blocks(ex)
    mask = torch.zeros(1, 6, dtype=torch.bool)
    mask[0, ex.positions] = True
    targets = ex.inputs.clone()
    targets[ex.positions] = ex.labels
    out = model.mlm_losses(ex.inputs[None], None, mask, targets[None])  # what pretraining differentiates
    want = torch.autograd.grad(1.7 * out.sequence_losses[0], list(model.parameters()))
    for a, b in zip(got, want):
        assert torch.allclose(a, b, atol=1e-6)
    assert grads.evaluations == 1


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:There is a performance drop")  # no CPU batching rule for attention
def test_vmap_and_loop_agree():
    model = tiny_model(1)
    examples = [example(s, weight=0.5 + s) for s in range(3)]
    grads = ExampleGradients(model, method="vmap")
    batched = grads.blocks_vmap(examples)
    for ex, b in zip(examples, batched):
        for x, y in zip(grads.blocks(ex), b):
            assert torch.allclose(x, y, atol=1e-6)


def test_parameter_patterns():
    model = tiny_model()
    names = [n for n, _ in select_parameters(model, ("encoder.blocks.*",))]
    assert names and all(n.startswith("encoder.blocks.") for n in names)
    assert [n for n, _ in select_parameters(model)] == [n for n, _ in model.named_parameters()]
    assert "encoder.tok_embeddings.weight" in dict(select_parameters(model))  # tied: counted once
    with pytest.raises(MapnetError, match="match no parameter"):
        select_parameters(model, ("encoder.nothing*",))
    sub = ExampleGradients(model, ("head.*",))
    full = ExampleGradients(model)
    ex = example(3)
    got = dict(zip(sub.names, sub.blocks(ex)))
    want = dict(zip(full.names, full.blocks(ex)))
    assert set(got) == {n for n in want if n.startswith("head.")}
    for n in got:
        assert torch.allclose(got[n], want[n])


def test_sketch_preserves_inner_products_in_expectation():
    g = torch.Generator().manual_seed(0)
    x = [torch.randn(30, 7, generator=g), torch.randn(50, generator=g)]
    y = [a + 0.5 * torch.randn(a.shape, generator=g) for a in x]
    exact_xy = sum(float((a * b).sum()) for a, b in zip(x, y))
    exact_xx = sum(float((a * a).sum()) for a in x)
    D, trials = 64, 1500
    xy, xx = [], []
    for seed in range(trials):
        sk = CountSketch([("a", 210), ("b", 50)], D, seed)
        px, py = sk.project(x), sk.project(y)
        xy.append(float(px @ py))
        xx.append(float(px @ px))
    xy, xx = torch.tensor(xy, dtype=torch.float64), torch.tensor(xx, dtype=torch.float64)
    assert abs(float(xy.mean()) - exact_xy) < 4.5 * float(xy.std()) / math.sqrt(trials)
    assert abs(float(xx.mean()) - exact_xx) < 4.5 * float(xx.std()) / math.sqrt(trials)
    # JL scale: relative std of a squared norm about sqrt(2/D), never more
    assert float(xx.std()) / exact_xx < 1.1 * math.sqrt(2 / D)
    # a parameter keeps its hash whatever else is selected
    assert torch.equal(CountSketch([("b", 50)], D, 7).index[0], CountSketch([("a", 210), ("b", 50)], D, 7).index[1])


def test_measurement_leaves_model_flags_grads_and_rng_alone():
    model = tiny_model(dropout=0.3)
    model.train()
    model.encoder.blocks[0].eval()  # a mixed state must come back as it was
    flags = [m.training for m in model.modules()]
    for p in model.parameters():
        p.grad = torch.full_like(p, 0.25)
    rng = torch.get_rng_state()
    grads = ExampleGradients(model, project_dim=16)
    ex = [example(5), example(6)]
    with eval_mode(model):
        a = grads.vectors(ex)
        b = grads.vectors(ex)
    assert torch.equal(a, b)  # dropout off: recomputation gives the same gradient
    assert [m.training for m in model.modules()] == flags
    assert all(torch.all(p.grad == 0.25) for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), rng)
