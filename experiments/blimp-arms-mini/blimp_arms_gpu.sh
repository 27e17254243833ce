#!/usr/bin/env bash
# Every masking arm judged on BLiMP at `mini` (docs/results.md, section E2), batched for one device call of at most
# 10 minutes: the 15 arms of section E (the 11 of section A and the 4 adaptive ones) x 3 paired seeds, `mini`, the
# `fast` recipe, batch 32 x 128 on the 8,192-token-BPE real-text shards, held-out books and Wikipedia. Each
# (arm, seed) is its own one-seed `compare --blimp` (it trains, then scores each kept checkpoint on the GPU), at
# most PAR side by side on the one GPU; then `compare --seeds 3 --blimp` collects them (it trains nothing and
# scores nothing already scored: each run folder keeps its BLiMP cache) and scores the random-init and unigram
# controls. A run's logged wall time is shared with PAR - 1 others: steps, not seconds, are the fair axis here.
#
#   bash experiments/common/gpu_downstream.sh prepare          # here, with spaCy (and pmi.tsv: blimp_arms_cpu.sh)
#   MAPNET="python3 -m mapnet_cli.cli" BLIMP=.gpu/blimp bash experiments/blimp-arms-mini/blimp_arms_gpu.sh OUT   # device
#   ARMS="uniform adaptive" SEEDS="0 1" PRESET=tiny STEPS=20 EVERY=10 PAIRS=2 bash experiments/blimp-arms-mini/blimp_arms_gpu.sh OUT  # smoke (CPU)
#
# Carry runs/real-text/heldout-{books,wiki}, runs/real-text-x5/shards and the BLiMP folder (copied into the
# repository's ignored .gpu/, since ../shared does not travel). DEADLINE (s) bounds the training phase: a job
# still running then is stopped, and the collection leaves out every arm that lacks a seed rather than retrain it.
set -uo pipefail
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
OUT=$(realpath -m "$1")
RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
BLIMP_DIR=$(realpath -m "${BLIMP:-../shared/data/blimp}")
read -r -a ARMS <<<"${ARMS:-uniform uniform@0.3 uniform@0.4 mapnet-ht-lite adaptive adaptive-soft adaptive-ht adaptive-soft-ht mapnet-ht whole-word span pmi mapnet stratified frequency-ht}"
read -r -a SEEDS <<<"${SEEDS:-0 1 2}"
for i in "${!SEEDS[@]}"; do  # the collecting compare pairs seed-i with train.seed SEEDS[0] + i
    ((SEEDS[i] == SEEDS[0] + i)) || { echo "SEEDS must be consecutive (got ${SEEDS[*]})"; exit 2; }
done
PRESET=${PRESET:-mini}; STEPS=${STEPS:-1000}; EVERY=${EVERY:-250}; PAIRS=${PAIRS:-200}
PAR=${PAR:-30}; DEADLINE=${DEADLINE:-330}
RUN=(--preset "$PRESET" --recipe fast --steps "$STEPS" --set train.batch_size=32 --set model.max_position=128
     --set shard.max_seq_len=128 --set train.eval_every="$EVERY" --set train.eval_sequences=512
     --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false
     --set train.checkpoint_every="$EVERY" --set train.keep_last=100
     --set train.compile=false  # 45 short runs: compiling each would cost more than it saves
     --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]")
period() {  # the adaptive arms' T for a short run (docs/masking.md), given only where an adaptive arm is compared
    [[ " $* " == *" adaptive"* ]] && echo "--set masking.adaptive.every=50"
}
SCORE=(--blimp "$BLIMP_DIR" --blimp-pairs "$PAIRS" --blimp-every-checkpoint)
mkdir -p "$OUT/q"
t_end=$((SECONDS + DEADLINE))
for arm in "${ARMS[@]}"; do  # arm by arm, in ARMS' order of priority: a late arm, not a late seed, is what a deadline drops
    for seed in "${SEEDS[@]}"; do
        while (($(jobs -rp | wc -l) >= PAR)); do wait -n; done
        left=$((t_end - SECONDS))
        ((left > 30)) || { echo "deadline: $arm seed $seed not started"; continue; }
        OMP_NUM_THREADS=1 timeout "$left" "${mapnet[@]}" compare "$X5/shards" --out "$OUT/q/$arm-s$seed" "${RUN[@]}" \
            "${SCORE[@]}" $(period "$arm") --strategies "$arm" --seeds 1 --set "train.seed=$seed" > "$OUT/q/$arm-s$seed.log" 2>&1 &
    done
done
wait
echo "training and scoring phase: $SECONDS s"
done_arms=()
for arm in "${ARMS[@]}"; do
    complete=1
    for seed in "${SEEDS[@]}"; do
        grep -q '^results: ' "$OUT/q/$arm-s$seed.log" 2>/dev/null || { complete=0; echo "incomplete: $arm seed $seed"; tail -n 3 "$OUT/q/$arm-s$seed.log"; }
    done
    ((complete)) || continue
    mkdir -p "$OUT/arms/runs/$arm"
    for i in "${!SEEDS[@]}"; do
        to=$OUT/arms/runs/$arm/seed-$i
        [[ -e $to ]] || mv "$OUT/q/$arm-s${SEEDS[$i]}/runs/$arm/seed-0" "$to" || exit 1
    done
    done_arms+=("$arm")
done
((${#done_arms[@]})) || { echo "no arm finished all its seeds"; exit 1; }
[[ " ${done_arms[*]} " == *" uniform "* ]] || { echo "uniform did not finish: nothing to pair against"; exit 1; }
"${mapnet[@]}" compare "$X5/shards" --out "$OUT/arms" "${RUN[@]}" "${SCORE[@]}" $(period "${done_arms[@]}") \
    --strategies "$(IFS=,; echo "${done_arms[*]}")" --seeds "${#SEEDS[@]}" --set "train.seed=${SEEDS[0]}" \
    2>&1 | tee "$OUT/arms.log"
echo "total: $SECONDS s"
