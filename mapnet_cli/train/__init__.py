"""MLM pretraining. The names below are this package's public surface (what the CLI, compare, benchmarks and tests
import); the submodules import each other, never this file. One job per module:

    batches.py      data order through the epochs, a rank's micro-batch slots
    strategies.py   masking.strategy -> the strategy object (masking/strategy.py, units.py, mapnet/...)
    optim.py        AdamW and the learning-rate schedule
    step.py         one optimizer step (`train_step`) and its loss normalisation
    held_out.py     fixed held-out sets under fixed masks, and evaluating on them
    record.py       metrics.jsonl, run.json, versions
    tracking.py     the TensorBoard / W&B sinks that metrics.jsonl lines also go to
    init_from.py    --init-from: a run's starting encoder from another run or a Hugging Face BERT
    run_loader.py   the one way to open a run's checkpoint again (resume, export, evaluation)
    loop.py         `Run` and `pretrain`: the order the pieces above happen in

    pretrain(settings, "shards/", "runs/tiny", on_report=print)   # from mapnet_cli.train import pretrain
"""

from importlib import import_module

# Loaded on first use (PEP 562), not here: `from mapnet_cli.train import init_from` (shard --init-from,
# --print-settings) must not pay for torch, which the loop and the step import.
_HOME = {
    "MicroBatch": "..masking.strategy",
    "UniformTraining": "..masking.strategy",
    "mlm_loss": "..masking.strategy",
    "DataOrder": ".batches",
    "make_batch": ".batches",
    "rank_micro_slots": ".batches",
    "EvalSet": ".held_out",
    "build_eval_set": ".held_out",
    "evaluate": ".held_out",
    "Report": ".loop",
    "Run": ".loop",
    "pretrain": ".loop",
    "MetricsLog": ".record",
    "memory_bytes": ".record",
    "versions": ".record",
    "NonFiniteLoss": ".step",
    "StepStats": ".step",
    "precision_context": ".step",
    "train_step": ".step",
    "STRATEGIES": ".strategies",
    "training_strategy": ".strategies",
}
__all__ = list(_HOME)


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_HOME[name], __name__), name)
