"""MLM pretraining, one job per module:

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

    from mapnet_cli.train import pretrain
    pretrain(settings, "shards/", "runs/tiny", on_report=print)

The names below are this package's public surface (what the CLI, compare,
benchmarks and tests import); the submodules import each other, never this file.
"""

from ..masking.strategy import MicroBatch, UniformTraining, mlm_loss
from .batches import DataOrder, make_batch, rank_micro_slots
from .held_out import EvalSet, build_eval_set, evaluate
from .loop import Report, Run, pretrain
from .record import MetricsLog, memory_bytes, versions
from .step import NonFiniteLoss, StepStats, precision_context, train_step
from .strategies import STRATEGIES, training_strategy

__all__ = ["DataOrder", "MicroBatch", "rank_micro_slots", "make_batch", "StepStats", "mlm_loss", "train_step",
           "UniformTraining", "training_strategy", "STRATEGIES", "EvalSet", "build_eval_set", "evaluate", "pretrain",
           "Run", "Report", "NonFiniteLoss", "MetricsLog", "memory_bytes", "versions", "precision_context"]
