#!/usr/bin/env bash
# Section 3b, second table: the MAP-Net arms at `mini` (the paper's `mapnet`, `mapnet-uncompressed`,
# `mapnet-ht-loss`, `mapnet-ht-learnability`) against uniform, 3 seeds paired by seed.
# Each (arm, seed) is its own one-seed compare, JOBS of them at a time with one thread each; then the
# runs are moved into one folder and `compare --seeds 3` collects them (every run is reused, so the
# last command trains nothing). Rerunnable: finished runs are reused, moved ones left where they are.
#
#   JOBS=2 bash experiments/learned-masking-mini/mapnet_arms.sh [OUT]   # default OUT: runs/real-text
#   (~100 min on 2 cores with JOBS=2; the shards are built first when OUT lacks them)
set -euo pipefail
R=$(realpath -m "${1:-runs/real-text}")
ARMS=(uniform mapnet mapnet-uncompressed mapnet-ht-loss mapnet-ht-learnability)
SEEDS=(0 1 2)
bash experiments/common/real_text_shards.sh "$R"
recipe() {  # the section-2b mini recipe, as compare options
    RECIPE=(--preset mini --config experiments/common/real-text-cpu.toml
            --set "train.extra_eval=[\"books=$R/heldout-books\", \"wiki=$R/heldout-wiki\"]"
            --steps 400 --set optim.warmup.steps=40 --set optim.lr=5e-4)
}
one_seed() {  # ARM SEED: a one-seed compare into q/ARM-sSEED, unless that run was already collected
    local arm=$1 seed=$2
    [[ -e $R/arms-mini-mapnet/runs/$arm/seed-$seed ]] && return 0
    recipe
    OMP_NUM_THREADS=1 uv run mapnet compare "$R/shards" --out "$R/q/$arm-s$seed" "${RECIPE[@]}" \
        --strategies "$arm" --seeds 1 --set "train.seed=$seed" > "$R/q/$arm-s$seed.log" 2>&1
}
export -f recipe one_seed
export R
mkdir -p "$R/q"
for seed in "${SEEDS[@]}"; do for arm in "${ARMS[@]}"; do echo "$arm $seed"; done; done |
    xargs -P "${JOBS:-1}" -L 1 bash -c 'one_seed "$0" "$1"'

for arm in "${ARMS[@]}"; do
    mkdir -p "$R/arms-mini-mapnet/runs/$arm"
    for seed in "${SEEDS[@]}"; do
        to=$R/arms-mini-mapnet/runs/$arm/seed-$seed
        [[ -e $to ]] || mv "$R/q/$arm-s$seed/runs/$arm/seed-0" "$to"
    done
done
recipe
uv run mapnet compare "$R/shards" --out "$R/arms-mini-mapnet" "${RECIPE[@]}" \
    --strategies "$(IFS=,; echo "${ARMS[*]}")" --seeds 3
