#!/usr/bin/env bash
# Every masking arm judged on BLiMP (docs/results.md, section E): the runs of section A (`tiny`, the `fast`
# recipe, 1,200 steps of 32 x 128 tokens on the 8,192-token-BPE real-text shards, 3 paired seeds) trained
# again, because section A kept no checkpoints, then `compare --blimp` scores every kept checkpoint (every
# 200 steps) of every run, and the random-init and unigram controls of each seed.
#
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT train     # three one-thread phases by priority: 33 runs (~6 h beside other work)
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT adaptive  # a second lane: the four adaptive arms (12 runs, T = 50)
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT score     # the compare over every arm with BLiMP (reuses the runs)
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT smoke     # the same commands on the embedded data, a few steps
set -euo pipefail
OUT=$(realpath -m "$1"); WHICH=${2:-train}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
source experiments/common/lanes.sh
SECTION_A=uniform,uniform@0.3,mapnet-ht-lite,uniform@0.4,mapnet-ht,whole-word,span,pmi,mapnet,stratified,frequency-ht
ADAPTIVE=adaptive,adaptive-soft,adaptive-ht,adaptive-soft-ht
ARMS=$SECTION_A,$ADAPTIVE
# The adaptive arms' table period for a 1,200-step run (docs/masking.md, "T for short runs"); compare gives it to them only.
PERIOD=(--set masking.adaptive_every=50)
BLIMP=(--blimp ../shared/data/blimp --blimp-pairs "${BLIMP_PAIRS:-100}" --blimp-every-checkpoint)
if [[ $WHICH == smoke ]]; then
    smoke_shards "$OUT"
    SHARDS=$OUT/shards; STEPS=4; SEEDS=2
    RUN=("${SMOKE_RUN[@]}")
    BLIMP=(--blimp ../shared/data/blimp --blimp-pairs 2 --blimp-every-checkpoint)
    PERIOD=(--set masking.adaptive_every=2)
else
    RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
    bash experiments/common/real_text_shards.sh "$RT"
    [[ -f $X5/shards/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
    [[ -f $X5/shards/pmi.tsv ]] || "${mapnet[@]}" pmi-vocab "$X5/prep" --out "$X5/shards/pmi.tsv" --min-count 11 \
        --size 200000 --no-progress
    SHARDS=$X5/shards; STEPS=1200; SEEDS=3
    RUN=(--preset tiny --recipe fast --set train.batch_size=32 --set model.max_position=128
         --set shard.max_seq_len=128 --set train.eval_every=200 --set train.eval_sequences=512
         --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false
         --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]")
fi
mkdir -p "$OUT"
if [[ $WHICH == train || $WHICH == smoke ]]; then
    # In order of what the comparison needs most, each phase all seeds (compare trains seed-major): the rates
    # and the lite learned arm first (also the adaptive arms' baselines), then the full HT arm and the units,
    # then the arms that did not leave the plateau in section A.
    lane "$OUT" a1 "$SHARDS" uniform,uniform@0.3,uniform@0.4,mapnet-ht-lite --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}"
    lane "$OUT" a2 "$SHARDS" mapnet-ht,whole-word,span,pmi --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}"
    lane "$OUT" a3 "$SHARDS" mapnet,stratified,frequency-ht --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}"
fi
if [[ $WHICH == adaptive || $WHICH == smoke ]]; then
    lane "$OUT" b "$SHARDS" "$ADAPTIVE" --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}" "${PERIOD[@]}"
fi
if [[ $WHICH == score || $WHICH == smoke ]]; then
    gather "$OUT" "$OUT/arms"
    "${mapnet[@]}" compare "$SHARDS" --out "$OUT/arms" --strategies "$ARMS" --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}" \
        "${PERIOD[@]}" "${BLIMP[@]}" 2>&1 | tee "$OUT/arms.log"
fi
