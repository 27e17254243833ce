"""experiments/warm-start-tiny/README.md's table (RESULTS section 3c: every arm continuing for 600 steps from the same
2,000-step uniform `tiny`), from its kept `mapnet compare` results.json: the final held-out loss per set, the paired
difference to uniform, the seeds below uniform and the steps to uniform's final mean loss, 3 decimals; bold, the row
whose mixed Δ interval lies below zero (tables_word_masking_tiny.final_table, which reads them).
"""

from __future__ import annotations

from functools import partial

from tables_word_masking_tiny import final_table

RESULTS = "experiments/warm-start-tiny/results.json"
ROWS = [
    (name, name)
    for name in (
        "uniform",
        "mapnet",
        "mapnet-uncompressed",
        "mapnet-ht",
        "mapnet-ht-loss",
        "mapnet-ht-learnability",
        "stratified",
        "frequency-ht",
        "uniform@0.3",
    )
]

TABLES = {"warm-start-tiny-final": partial(final_table, RESULTS, ROWS, steps=True)}
