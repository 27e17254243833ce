"""`mapnet variance`: the paper's gradient-variance decomposition (Theorem 1), measured.

estimator.py — unbiased estimators from inner products, bootstrap, mini-batch view, noise scales;
gradients.py — per-example gradients of the weighted MLM loss (per-mask or per-position weights), exact or sketched;
schemes.py   — uniform masking, MAP-Net proposals with clipped / unclipped / no weights, and the
               per-position designs: ht, stratified, frequency, the gradient-norm oracle;
measure.py   — sentences + masks + gradients -> estimates, and their analysis (intervals, mini-batch view);
snapshot.py  — `variance_snapshot`: the cheap decomposition pretraining and `compare --variance` record;
target.py    — `load_target`: a checkpoint, its MAP-Net and validation shards, for `mapnet variance`;
report.py    — the JSON document `mapnet variance --json` prints.
"""
