#!/usr/bin/env bash
# Learned masking that can pay? (docs/RESULTS.md, section 3): every masking arm on the real-text
# setup of section 2 (Gutenberg books + Wikipedia; held-out books and held-out Wikipedia evaluated
# separately), 3 seeds paired by seed.
#
#   bash docs/results/learned_masking_cpu.sh [OUT] [tiny|mini|all]   # default OUT: runs/real-text
#
# Needs the shards of docs/results/real_text_cpu.sh (its first part builds them; this script builds
# them too when they are missing). tiny: ~75 min on 2 idle cores; mini: ~5x that.
set -euo pipefail
OUT=$(realpath -m "${1:-runs/real-text}")
WHICH=${2:-all}
mapnet=(uv run mapnet)
if [[ ! -f "$OUT/shards/manifest.json" || ! -f "$OUT/heldout-books/manifest.json" || ! -f "$OUT/heldout-wiki/manifest.json" ]]; then
    head -n "$(grep -n '^HELD=' docs/results/real_text_cpu.sh | cut -d: -f1)" docs/results/real_text_cpu.sh \
        | grep -v '^HELD=' > "$OUT.prep.sh"
    bash "$OUT.prep.sh" "$OUT"
fi
HELD=(--set "train.extra_eval=[\"books=$OUT/heldout-books\", \"wiki=$OUT/heldout-wiki\"]")
CFG=(--config docs/results/real-text-cpu.toml)
# The paper's arm (unchanged), the same with an uncompressed exploration schedule (10x the run), the
# HT arms with each proposal target, the no-network baselines, and the masking rate as a knob.
ARMS=uniform,mapnet,mapnet-uncompressed,mapnet-ht,mapnet-ht-loss,mapnet-ht-learnability,stratified,frequency-ht,uniform@0.3
if [[ $WHICH == tiny || $WHICH == all ]]; then
    "${mapnet[@]}" compare "$OUT/shards" --out "$OUT/arms-tiny" --preset tiny "${CFG[@]}" "${HELD[@]}" \
        --strategies "$ARMS" --seeds 3
fi
if [[ $WHICH == mini || $WHICH == all ]]; then
    "${mapnet[@]}" compare "$OUT/shards" --out "$OUT/arms-mini" --preset mini "${CFG[@]}" "${HELD[@]}" \
        --strategies "$ARMS" --seeds 3 --steps 400 --set optim.warmup_steps=40 --set optim.lr=5e-4
fi
