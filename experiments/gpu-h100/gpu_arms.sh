#!/usr/bin/env bash
# The first comparison at a GPU's budget (docs/results.md section 4c): `mini` on the section-6b text
# (every 5th book and Wikipedia file, 18M tokens), 2,000 steps x 128 sequences of 128 tokens (33M tokens,
# 1.8 epochs), uniform vs uniform@0.3 vs the paper's MAP-Net vs mapnet-ht, 2 seeds paired by seed.
# Each (arm, seed) is its own one-seed compare, all eight side by side on one GPU; then `compare --seeds 2`
# collects them (every run is reused: it trains nothing) into the paired table.
#
#   MAPNET="python3 -m mapnet_cli.cli" bash experiments/gpu-h100/gpu_arms.sh OUT    # on the device, after
#   bash experiments/common/gpu_downstream.sh prepare                              # here
set -uo pipefail
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
OUT=$(realpath -m "$1")
RT=$(realpath -m runs/real-text)  # absolute: runs record their held-out sets' paths
X5=$(realpath -m runs/real-text-x5)
ARMS=(uniform uniform@0.3 mapnet mapnet-ht)
SEEDS=(0 1)
RECIPE=(--preset mini --config experiments/common/real-text-cpu.toml --steps 2000 --set train.batch_size=128
        --set optim.lr=5e-4 --set optim.warmup.steps=150 --set train.eval_every=500 --set logging.log_every=500
        --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]")
mkdir -p "$OUT/q"
for seed in "${SEEDS[@]}"; do
    for arm in "${ARMS[@]}"; do
        OMP_NUM_THREADS=2 timeout 300 "${mapnet[@]}" compare "$X5/shards" --out "$OUT/q/$arm-s$seed" "${RECIPE[@]}" \
            --strategies "$arm" --seeds 1 --set "train.seed=$seed" > "$OUT/q/$arm-s$seed.log" 2>&1 &
    done
done
wait
tail -n 2 "$OUT"/q/*.log
for arm in "${ARMS[@]}"; do
    mkdir -p "$OUT/arms/runs/$arm"
    for seed in "${SEEDS[@]}"; do
        to=$OUT/arms/runs/$arm/seed-$seed
        # A run that hit its time limit is missing: stop, rather than let the collecting compare retrain it.
        [[ -e $to ]] || mv "$OUT/q/$arm-s$seed/runs/$arm/seed-0" "$to" || exit 1
    done
done
"${mapnet[@]}" compare "$X5/shards" --out "$OUT/arms" "${RECIPE[@]}" --strategies "$(IFS=,; echo "${ARMS[*]}")" --seeds 2
