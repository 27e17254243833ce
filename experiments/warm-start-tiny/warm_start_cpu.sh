#!/usr/bin/env bash
# Does learned masking pay once the frequent words are learned? (docs/results.md, "Still to measure":
# the warm start). A uniform `tiny` run long enough that the frequent words are learned (section 2c:
# 2,000 steps), then every masking arm continues from its final checkpoint (`compare --init-from`):
# the same encoder for every arm and seed, a fresh optimizer and schedule, 3 seeds paired by seed.
#
#   bash experiments/warm-start-tiny/warm_start_cpu.sh [OUT] [real|tiny]      # default OUT: runs/warm-start, data: real
#   WARM_STEPS=4 ARM_STEPS=2 SEEDS=1 bash experiments/warm-start-tiny/warm_start_cpu.sh /tmp/ws tiny   # smoke test, ~2 min
#
# real: the Gutenberg + Wikipedia shards of experiments/real-text-cpu/real_text_cpu.sh (built here when missing),
#       held-out books and Wikipedia evaluated separately, as section 3. ~2 h on 2 cores: the warm-up
#       run (2,000 steps, ~25 min), then 9 arms x 3 seeds x 600 steps from it.
# tiny: the embedded synthetic corpus (data_recipes/tiny.toml), no download.
# A cold-start reference is section 3 itself (the same arms, 600 steps from random weights).
set -euo pipefail
OUT=$(realpath -m "${1:-runs/warm-start}")
DATA=${2:-real}
WARM_STEPS=${WARM_STEPS:-2000}
ARM_STEPS=${ARM_STEPS:-600}
SEEDS=${SEEDS:-3}
mapnet=(uv run mapnet)
mkdir -p "$OUT"

if [[ $DATA == real ]]; then
    SHARDS=$OUT/shards
    bash experiments/common/real_text_shards.sh "$OUT"
    CFG=(--config experiments/common/real-text-cpu.toml
         --set "train.extra_eval=[\"books=$OUT/heldout-books\", \"wiki=$OUT/heldout-wiki\"]")
    ARMS=uniform,mapnet,mapnet-uncompressed,mapnet-ht,mapnet-ht-loss,mapnet-ht-learnability,stratified,frequency-ht,uniform@0.3
elif [[ $DATA == tiny ]]; then
    SHARDS=$OUT/tiny-shards
    if [[ ! -f "$SHARDS/manifest.json" ]]; then
        "${mapnet[@]}" preprocess --recipe data_recipes/tiny.toml --out "$OUT/tiny-prep" --overwrite
        "${mapnet[@]}" shard "$OUT/tiny-prep" --out "$SHARDS" --overwrite
    fi
    CFG=(--config data_recipes/tiny.toml)
    ARMS=uniform,mapnet,mapnet-ht,mapnet-ht-learnability,stratified,frequency-ht,uniform@0.3
else
    echo "usage: $0 [OUT] [real|tiny]" >&2
    exit 2
fi

# 1. The warm start: uniform masking, tiny, long enough that the frequent words are learned; only its
#    final checkpoint is kept. Rerunning continues an interrupted run (--resume) or finds it done.
WARM=$OUT/warm-uniform
RESUME=()
[[ -d "$WARM/checkpoints" ]] && RESUME=(--resume)
"${mapnet[@]}" pretrain "$SHARDS" --out "$WARM" --preset tiny "${CFG[@]}" "${RESUME[@]}" --masking uniform \
    --steps "$WARM_STEPS" --set optim.warmup.steps=$((WARM_STEPS / 10)) \
    --set train.eval_every=$((WARM_STEPS / 8 > 0 ? WARM_STEPS / 8 : 1)) --set train.checkpoint_every=0 --set "train.keep_steps=[]"

# 2. Every arm from that checkpoint (model size and weights from it; a fresh optimizer with its own
#    10% warm-up), 3 seeds; compare reuses finished runs when rerun.
"${mapnet[@]}" compare "$SHARDS" --out "$OUT/arms-warm" --init-from "$WARM" "${CFG[@]}" \
    --strategies "$ARMS" --seeds "$SEEDS" --steps "$ARM_STEPS" --set optim.warmup.steps=$((ARM_STEPS / 10)) \
    --set train.eval_every=$((ARM_STEPS / 6 > 0 ? ARM_STEPS / 6 : 1))
