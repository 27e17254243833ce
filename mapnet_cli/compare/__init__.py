"""Does MAP-Net make pretraining cheaper? Strategies x seeds, same start, same data, one table.

    mapnet compare shards/ --out runs/compare --preset tiny --steps 300 --seeds 3
    mapnet compare shards/ --out runs/warm --init-from runs/uniform-long --strategies uniform,mapnet   # warm start
    mapnet compare shards/ --out runs/cmp --strategies uniform,mapnet,mapnet-noweight --variance \\
        --glue-tasks cola,sst2,mrpc --glue-data glue_data

Library entry points: `plan_runs` (settings of every strategy x seed), `run_all` (train what is missing),
`collect` (every raw number + `aggregate`), `table_rows`. One job per module: plan.py, costs.py, run.py,
records.py, glue_scores.py, blimp_scores.py, statistics.py, report.py, plots.py.

Fair by construction: for seed index k every strategy trains with train.seed = base + k, so only the masks
differ, and the results record the hashes that show it. How it is reported and read:
docs/evaluation.md#does-map-net-make-pretraining-cheaper-mapnet-compare; what each module holds, and which
checkpoints a run keeps and why (a finished run is reused, a stopped one resumed): docs/internals.md#compare__init__py.
"""

from ..intervals import mean_ci, t_quantile_975
from ..metrics_file import read_metrics
from .blimp_scores import blimp_controls, blimp_results
from .glue_scores import control_label, glue_controls, glue_results
from .parallel import RunState, train_in_parallel
from .plan import SCHEME, STRATEGIES, PlannedRun, eval_steps, parse_strategies, plan_runs, split_name, strategy_masking
from .plots import write_plots
from .records import collect, data_order_sha256, initial_weights_sha256, run_record, tensors_sha256, variance_curve
from .report import (
    CONTROL_ROW,
    RESULTS,
    SCHEMA,
    TABLE_HEADER,
    pm,
    results_document,
    table_rows,
    unigram_line,
    vs_unigram,
)
from .run import pretraining_part, recorded_settings, reused_of, run_all, runs_to_train
from .statistics import aggregate, extra_metrics, fairness_checks, steps_to_target

__all__ = [
    "STRATEGIES",
    "SCHEME",
    "PlannedRun",
    "split_name",
    "strategy_masking",
    "eval_steps",
    "parse_strategies",
    "plan_runs",
    "run_all",
    "runs_to_train",
    "reused_of",
    "train_in_parallel",
    "RunState",
    "pretraining_part",
    "recorded_settings",
    "tensors_sha256",
    "initial_weights_sha256",
    "data_order_sha256",
    "read_metrics",
    "run_record",
    "variance_curve",
    "glue_results",
    "glue_controls",
    "blimp_results",
    "blimp_controls",
    "control_label",
    "t_quantile_975",
    "mean_ci",
    "steps_to_target",
    "aggregate",
    "fairness_checks",
    "collect",
    "SCHEMA",
    "RESULTS",
    "results_document",
    "TABLE_HEADER",
    "CONTROL_ROW",
    "pm",
    "table_rows",
    "unigram_line",
    "vs_unigram",
    "write_plots",
    "extra_metrics",
]
