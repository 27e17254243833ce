"""`mapnet variance`: the paper's gradient-variance decomposition (Theorem 1), measured.

estimator.py — unbiased estimators from inner products, bootstrap, mini-batch view, noise scales;
gradients.py — per-example gradients of the weighted MLM loss (per-mask or per-position weights), exact or sketched;
schemes.py   — uniform masking, MAP-Net proposals with clipped / unclipped / no weights, and the
               per-position designs: ht, stratified, frequency, the gradient-norm oracle;
measure.py   — sentences + masks + gradients -> estimates; `variance_snapshot` for pretraining;
report.py    — the JSON document `mapnet variance --json` prints.
"""
