#!/usr/bin/env bash
# Section A of docs/results.md on a GPU, batched for a short lease: every masking arm past the plateau
# with section A's flags (the `fast` recipe, batch 32 x 128, 8,192-token BPE real text, held-out books and
# Wikipedia), at `mini` by default (1,000 steps: uniform ends ~1.55 nats below the unigram entropy,
# RESULTS 0d), 3 seeds paired by seed. Each (arm, seed) is its own one-seed `compare`, all side by side on
# the one GPU (a `mini` step at batch 32 leaves most of an H100 idle); then `compare --seeds N` collects
# them (it trains nothing: every run is reused) into the paired table.
#
#   bash experiments/common/gpu_downstream.sh prepare && uv run mapnet pmi-vocab runs/real-text-x5/prep \
#       --out runs/real-text-x5/shards/pmi.tsv --min-count 11 --size 200000     # here, with spaCy
#   MAPNET="python3 -m mapnet_cli.cli" bash experiments/gpu-h100/gpu_learning_arms.sh OUT          # on the device
#   ARMS="uniform uniform@0.3" PRESET=small STEPS=1500 MAPNET=... bash experiments/gpu-h100/gpu_learning_arms.sh OUT
#   uv run python experiments/common/learning_table.py OUT/arms/results.json BENCH.txt           # here
#
# Carry runs/real-text (held-out sets) and runs/real-text-x5/shards (37 MB) to the device. LIMIT (s) bounds
# each run; a run that hits it stops the collection rather than let the collecting compare retrain it.
set -uo pipefail
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
OUT=$(realpath -m "$1")
RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
read -r -a ARMS <<<"${ARMS:-uniform uniform@0.3 uniform@0.4 mapnet mapnet-ht mapnet-ht-lite stratified frequency-ht whole-word span pmi}"
read -r -a SEEDS <<<"${SEEDS:-0 1 2}"  # consecutive: the collecting compare pairs seed-i with train.seed SEEDS[0] + i
PRESET=${PRESET:-mini}; STEPS=${STEPS:-1000}; LIMIT=${LIMIT:-540}
RUN=(--preset "$PRESET" --recipe fast --steps "$STEPS" --set train.batch_size=32 --set model.max_position=128
     --set shard.max_seq_len=128 --set train.eval_every=200 --set train.eval_sequences=512
     --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false
     --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]")
mkdir -p "$OUT/q"
for seed in "${SEEDS[@]}"; do
    for arm in "${ARMS[@]}"; do
        OMP_NUM_THREADS=1 timeout "$LIMIT" "${mapnet[@]}" compare "$X5/shards" --out "$OUT/q/$arm-s$seed" "${RUN[@]}" \
            --strategies "$arm" --seeds 1 --set "train.seed=$seed" > "$OUT/q/$arm-s$seed.log" 2>&1 &
    done
done
wait
tail -n 2 "$OUT"/q/*.log
for arm in "${ARMS[@]}"; do
    mkdir -p "$OUT/arms/runs/$arm"
    for i in "${!SEEDS[@]}"; do
        to=$OUT/arms/runs/$arm/seed-$i
        [[ -e $to ]] || mv "$OUT/q/$arm-s${SEEDS[$i]}/runs/$arm/seed-0" "$to" || exit 1
    done
done
"${mapnet[@]}" compare "$X5/shards" --out "$OUT/arms" "${RUN[@]}" --strategies "$(IFS=,; echo "${ARMS[*]}")" \
    --seeds "${#SEEDS[@]}" --set "train.seed=${SEEDS[0]}"
