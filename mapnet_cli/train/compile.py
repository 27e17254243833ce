"""What `train.compile` compiles, and how: `train.compile_scope` and `train.compile_mode`.

    compile_model(model, strategy, settings.train)   # in place; the run's state_dict keys stay as they are

`blocks` (the default) compiles each Transformer block on its own, which is what the first H100 measurement used
(RESULTS 4a: 1.05-1.10x over eager at `base`). `model` compiles the whole encoder and head as one graph, so the
Python between the blocks (embeddings, the last block's gather, the head, the loss's reductions) is compiled and
fused too; traced whole, the last block's query grid pads to the sequence length (`model.bert.query_layout`): more
attention rows, the same matrix products. Both compile in place (`nn.Module.compile`), so checkpoints keep their
keys. The masking strategy compiles its own networks per block as before (`Strategy.compile`).

Modes are torch.compile's: `max-autotune` tries several GEMM kernels per shape and uses CUDA graphs (minutes at
`base`), `reduce-overhead` CUDA graphs alone (one launch per graph: for a step whose host cannot launch kernels as
fast as the device runs them). Which pays on a GPU is measured, not assumed: `benchmarks/bench_step_variants.py`
(experiments/gpu-h100/gpu_step.sh); the defaults stay as measured there.
"""

from __future__ import annotations

from torch import nn


def compile_options(mode: str) -> dict:
    """torch.compile's keyword arguments for `train.compile_mode`."""
    return {} if mode == "default" else {"mode": mode}


def compile_model(model: nn.Module, strategy, train) -> None:
    """Compile `model` (a `BertForMLM`) and the strategy's networks in place, as `train` (the settings'
    train section) says; the caller has already decided that this device compiles (`TrainSettings.compiles`)."""
    options = compile_options(train.compile_mode)
    if train.compile_scope == "model":
        model.compile(**options)
    else:
        for block in model.encoder.blocks:
            block.compile(**options)  # per block, in place: state_dict keys stay unchanged
    strategy.compile()


__all__ = ["compile_options", "compile_model"]
