"""`mapnet variance`: the paper's gradient-variance decomposition (Theorem 1), measured.

estimator.py — unbiased estimators from inner products, bootstrap, mini-batch view;
gradients.py — per-example gradients of the weighted MLM loss, exact or sketched;
schemes.py   — uniform masking and MAP-Net proposals with clipped / unclipped / no weights;
measure.py   — sentences + masks + gradients -> estimates; `variance_snapshot` for pretraining;
report.py    — the JSON document `mapnet variance --json` prints.
"""
