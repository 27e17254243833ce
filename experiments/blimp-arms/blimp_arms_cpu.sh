#!/usr/bin/env bash
# Every masking arm judged on BLiMP (docs/results.md, section E): the runs of section A (`tiny`, the `fast`
# recipe, 1,200 steps of 32 x 128 tokens on the 8,192-token-BPE real-text shards, 3 paired seeds) trained
# again, because section A kept no checkpoints, then `compare --blimp` scores every kept checkpoint (every
# 200 steps: curves, and BLiMP at equal wall time) of every finished arm, and the random-init and unigram
# controls of each seed.
#
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT train     # three one-thread phases by priority: 33 runs (~6 h beside other work)
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT a2        # one phase (a1, a2 or a3) of `train`
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT adaptive  # a second lane: the four adaptive arms (12 runs, T = 50)
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT score     # compares with BLiMP over the finished arms (reuses the runs)
#   bash experiments/blimp-arms/blimp_arms_cpu.sh OUT smoke     # the same commands on the embedded data, a few steps
set -euo pipefail
OUT=$(realpath -m "$1"); WHICH=${2:-train}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
source experiments/common/lanes.sh
SECTION_A=uniform,uniform@0.3,mapnet-ht-lite,uniform@0.4,mapnet-ht,whole-word,span,pmi,mapnet,stratified,frequency-ht
ADAPTIVE=adaptive,adaptive-soft,adaptive-ht,adaptive-soft-ht
ARMS=$SECTION_A,$ADAPTIVE
# The adaptive arms' table period for a 1,200-step run (docs/masking.md, "T for short runs"); compare gives it to them only.
PERIOD=(--set masking.adaptive.every=50)
BLIMP=(--blimp ../shared/data/blimp --blimp-pairs "${BLIMP_PAIRS:-100}")
if [[ $WHICH == smoke ]]; then
    smoke_shards "$OUT"
    SHARDS=$OUT/shards; STEPS=4; SEEDS=2
    RUN=("${SMOKE_RUN[@]}")
    BLIMP=(--blimp ../shared/data/blimp --blimp-pairs 2)
    PERIOD=(--set masking.adaptive.every=2)
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
if [[ $WHICH == train || $WHICH == a1 || $WHICH == smoke ]]; then
    # In order of what the comparison needs most, each phase all seeds (compare trains seed-major): the rates
    # and the lite learned arm first (also the adaptive arms' baselines), then the full HT arm and the units,
    # then the arms that did not leave the plateau in section A. `a1`, `a2`, `a3` run one phase.
    lane "$OUT" a1 "$SHARDS" uniform,uniform@0.3,uniform@0.4,mapnet-ht-lite --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}"
fi
if [[ $WHICH == train || $WHICH == a2 || $WHICH == smoke ]]; then
    lane "$OUT" a2 "$SHARDS" mapnet-ht,whole-word,span,pmi --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}"
fi
if [[ $WHICH == train || $WHICH == a3 || $WHICH == smoke ]]; then
    lane "$OUT" a3 "$SHARDS" mapnet,stratified,frequency-ht --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}"
fi
if [[ $WHICH == adaptive || $WHICH == smoke ]]; then
    lane "$OUT" b "$SHARDS" "$ADAPTIVE" --seeds "$SEEDS" --steps "$STEPS" "${RUN[@]}" "${PERIOD[@]}"
fi
if [[ $WHICH == score || $WHICH == smoke ]]; then
    gather "$OUT" "$OUT/arms"
    # The arms whose every seed finished (a phase not run, or stopped, is left out rather than trained here).
    last=$(printf 'step-%08d' "$STEPS")
    done_arms=()
    for arm in ${ARMS//,/ }; do
        for ((k = 0; k < SEEDS; k++)); do
            [[ -f $OUT/arms/runs/$arm/seed-$k/checkpoints/$last/COMPLETE ]] || continue 2
        done
        done_arms+=("$arm")
    done
    ((${#done_arms[@]})) || { echo "no arm finished all its seeds under $OUT"; exit 1; }
    # Curves (BLiMP at every kept checkpoint, so at equal wall time too) for every finished arm; the same runs,
    # linked, not copied.
    mkdir -p "$OUT/curves/runs"
    for arm in "${done_arms[@]}"; do ln -sfn "../../arms/runs/$arm" "$OUT/curves/runs/$arm"; done
    "${mapnet[@]}" compare "$SHARDS" --out "$OUT/curves" --strategies "$(IFS=,; echo "${done_arms[*]}")" --seeds "$SEEDS" \
        --steps "$STEPS" "${RUN[@]}" "${PERIOD[@]}" "${BLIMP[@]}" --blimp-every-checkpoint 2>&1 | tee "$OUT/curves.log"
    # Every finished arm at its final checkpoint (BLiMP at equal steps), the checkpoints scored above reused.
    "${mapnet[@]}" compare "$SHARDS" --out "$OUT/arms" --strategies "$(IFS=,; echo "${done_arms[*]}")" --seeds "$SEEDS" \
        --steps "$STEPS" "${RUN[@]}" "${PERIOD[@]}" "${BLIMP[@]}" 2>&1 | tee "$OUT/arms.log"
fi
