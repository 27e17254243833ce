#!/usr/bin/env bash
# Learned masking that can pay? (docs/results.md, section 3): every masking arm on the real-text
# setup of section 2 (Gutenberg books + Wikipedia; held-out books and held-out Wikipedia evaluated
# separately), 3 seeds paired by seed.
#
#   bash experiments/common/learned_masking_cpu.sh [OUT] [tiny|mini|synthetic|all]   # default OUT: runs/real-text
#
# Needs the shards of experiments/real-text-cpu/real_text_cpu.sh (its first part builds them; this script builds
# them too when they are missing). tiny: ~1.5 h on 2 cores (27 runs, then the variance); mini: ~5x that.
set -euo pipefail
OUT=$(realpath -m "${1:-runs/real-text}")
WHICH=${2:-all}
mapnet=(uv run mapnet)
bash experiments/common/real_text_shards.sh "$OUT"
HELD=(--set "train.extra_eval=[\"books=$OUT/heldout-books\", \"wiki=$OUT/heldout-wiki\"]")
CFG=(--config experiments/common/real-text-cpu.toml)
# The paper's arm (unchanged), the same with an uncompressed exploration schedule (10x the run), the
# HT arms with each proposal target, the no-network baselines, and the masking rate as a knob.
ARMS=uniform,mapnet,mapnet-uncompressed,mapnet-ht,mapnet-ht-loss,mapnet-ht-learnability,stratified,frequency-ht,uniform@0.3
if [[ $WHICH == tiny || $WHICH == all ]]; then
    "${mapnet[@]}" compare "$OUT/shards" --out "$OUT/arms-tiny" --preset tiny "${CFG[@]}" "${HELD[@]}" \
        --strategies "$ARMS" --seeds 3
fi
if [[ $WHICH == mini || $WHICH == all ]]; then
    "${mapnet[@]}" compare "$OUT/shards" --out "$OUT/arms-mini" --preset mini "${CFG[@]}" "${HELD[@]}" \
        --strategies "$ARMS" --seeds 3 --steps 400 --set optim.warmup.steps=40 --set optim.lr=5e-4
fi

# The ceiling and the schemes, scale-free (RESULTS section 3): the gradient noise scale of every
# scheme at shared checkpoints — the uniform run's final one (seed 0) with the oracle (proxy and
# exact gradient norm), the no-network designs and uniform; the HT run's and the paper run's own
# final ones.
if [[ $WHICH == tiny || $WHICH == all ]]; then
    mkdir -p "$OUT/variance-tiny"
    V=(--sentences 32 --masks 8 --project-dim 4096 --bootstrap 200 --json)
    R=$OUT/arms-tiny/runs
    for step in 00000600; do
        "${mapnet[@]}" variance "$R/uniform/seed-0/checkpoints/step-$step" "${V[@]}" --oracle \
            --schemes uniform,stratified,frequency > "$OUT/variance-tiny/uniform-step$step.json"
    done
    "${mapnet[@]}" variance "$R/mapnet-ht/seed-0" "${V[@]}" --oracle --schemes uniform,ht > "$OUT/variance-tiny/mapnet-ht.json"
    "${mapnet[@]}" variance "$R/mapnet/seed-0" "${V[@]}" --schemes uniform,mapnet_clipped,mapnet_unweighted \
        > "$OUT/variance-tiny/mapnet.json"
fi
if [[ $WHICH == tiny || $WHICH == all ]]; then
    # The oracle on the exact per-position gradient norm instead of the proxy (one backward per position).
    "${mapnet[@]}" variance "$R/uniform/seed-0/checkpoints/step-00000600" "${V[@]}" --oracle --schemes uniform \
        --set variance.oracle_basis=gradient --set variance.oracle_rounds=1 \
        > "$OUT/variance-tiny/uniform-step00000600-oracle-gradient.json"
fi
if [[ $WHICH == synthetic || $WHICH == all ]]; then
    # Where each proposal target puts its mass by token kind (RESULTS section 3; three seeds since 2026-12-03).
    "${mapnet[@]}" preprocess --recipe data_recipes/tiny.toml --out "$OUT/synth/prep" --overwrite
    "${mapnet[@]}" shard "$OUT/synth/prep" --out "$OUT/synth/shards" --overwrite
    # The section-1 training settings (data_recipes/tiny.toml's training part has since become the quickstart's).
    "${mapnet[@]}" compare "$OUT/synth/shards" --out "$OUT/synth/arms" --preset tiny --config experiments/synthetic-tiny/section-1.toml \
        --strategies uniform,mapnet,mapnet-ht,mapnet-ht-loss,mapnet-ht-learnability --seeds 3
fi
