"""MLM pretraining (moved from train.py; split into modules of one job each in the next commit)."""

from .loop import (DataOrder, EvalSet, MetricsLog, MicroBatch, NonFiniteLoss, Run, StepStats, UniformTraining,
                   build_eval_set, evaluate, make_batch, mlm_loss, pretrain, rank_micro_slots, train_step,
                   training_strategy, versions)

__all__ = ["DataOrder", "MicroBatch", "rank_micro_slots", "make_batch", "StepStats", "mlm_loss", "train_step",
           "UniformTraining", "training_strategy", "EvalSet", "build_eval_set", "evaluate", "pretrain", "Run",
           "NonFiniteLoss", "MetricsLog", "versions"]
