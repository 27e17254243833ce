#!/usr/bin/env bash
# Does loss-adaptive masking (AMLM, docs/masking.md "Loss-adaptive masking") pay at mapnet's sizes? The four adaptive arms
# (hard and soft scores, unweighted as published and with mapnet's HT weights) against uniform, 30% masking and
# `mapnet-ht-lite`, with section A's flags (experiments/common/learning_arms_cpu.sh: the `fast` recipe on the real-text
# shards, held-out books and Wikipedia), 3 seeds paired by seed (same initial encoder, data order, evaluation masks).
#
#   bash experiments/adaptive/adaptive_cpu.sh OUT tiny       # 1,200 steps; 12 adaptive runs in two lanes (+ the baselines)
#   bash experiments/adaptive/adaptive_cpu.sh OUT mini       # 1,000 steps, the same arms at `mini`
#   bash experiments/adaptive/adaptive_cpu.sh OUT smoke      # the same commands on the embedded data, a few steps
#   REUSE="runs/learning/arms-tiny runs/lite/lane-lite" bash experiments/adaptive/adaptive_cpu.sh OUT tiny
#
# REUSE: compare folders whose finished baseline runs (runs/uniform, runs/uniform@0.3, runs/mapnet-ht-lite) are
# copied in (never moved) instead of trained again; the last `compare` retrains nothing whose recorded settings
# match its plan, and refuses nothing silently: a copied run trained with other settings is trained again.
# The adaptive arms get T = 50 (masking.adaptive_every; docs/masking.md, "T for short runs"); `compare` gives it to them
# only, so the baselines' settings are section A's exactly. Then BLiMP on every run's final checkpoint
# (`mapnet blimp`, where this checkout has it; BLIMP: the suite's folder, BLIMP_PAIRS: the first N pairs of each
# paradigm, 0 = all), paired by seed against uniform by experiments/adaptive/adaptive_blimp.py.
set -euo pipefail
OUT=$(realpath -m "$1"); WHICH=${2:-tiny}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
source experiments/common/lanes.sh
ADAPTIVE=(adaptive adaptive-ht adaptive-soft adaptive-soft-ht)
BASELINES=(uniform uniform@0.3 mapnet-ht-lite)
ALL=$(IFS=,; echo "${BASELINES[*]},${ADAPTIVE[*]}")
PERIOD=(--set masking.adaptive_every=50)
PRESET=tiny; [[ $WHICH == mini ]] && PRESET=mini

if [[ $WHICH == smoke ]]; then
    smoke_shards "$OUT"
    SHARDS=$OUT/shards; STEPS=4
    RUN=("${SMOKE_RUN[@]}"); PERIOD=(--set masking.adaptive_every=2)
else
    RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
    bash experiments/common/real_text_shards.sh "$RT"  # the tokenizer and the held-out sets
    [[ -f $X5/shards/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
    SHARDS=$X5/shards; STEPS=1200
    [[ $PRESET == mini ]] && STEPS=1000
    RUN=(--preset "$PRESET" --recipe fast --set train.batch_size=32 --set model.max_position=128
         --set shard.max_seq_len=128 --set train.eval_every=200 --set train.eval_sequences=512
         --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false
         --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]")
fi

DEST=$OUT/arms-$WHICH
mkdir -p "$DEST/runs"
missing=()
for arm in "${BASELINES[@]}"; do
    for src in ${REUSE:-}; do
        if [[ ! -e $DEST/runs/$arm && -d $src/runs/$arm ]]; then cp -a "$src/runs/$arm" "$DEST/runs/"; fi
    done
    [[ -e $DEST/runs/$arm ]] || missing+=("$arm")
done

# Two lanes of adaptive arms (one thread each), a third for the baselines not reused.
lane "$OUT" a "$SHARDS" adaptive,adaptive-ht --seeds 3 --steps "$STEPS" "${RUN[@]}" "${PERIOD[@]}" & a=$!
lane "$OUT" b "$SHARDS" adaptive-soft,adaptive-soft-ht --seeds 3 --steps "$STEPS" "${RUN[@]}" "${PERIOD[@]}" & b=$!
c=
if (( ${#missing[@]} )); then
    lane "$OUT" c "$SHARDS" "$(IFS=,; echo "${missing[*]}")" --seeds 3 --steps "$STEPS" "${RUN[@]}" & c=$!
fi
wait $a; wait $b; [[ -z $c ]] || wait $c

gather "$OUT" "$DEST"
"${mapnet[@]}" compare "$SHARDS" --out "$DEST" --strategies "$ALL" --seeds 3 --steps "$STEPS" "${RUN[@]}" "${PERIOD[@]}" \
    2>&1 | tee "$OUT/arms-$WHICH.log"
# BLiMP at the end: the final checkpoint of every arm and seed in one `mapnet blimp` (its controls once).
BLIMP=${BLIMP:-$(realpath -m ../shared/data/blimp)}
if "${mapnet[@]}" blimp --help >/dev/null 2>&1; then
    finals=()
    for arm in ${ALL//,/ }; do
        for k in 0 1 2; do finals+=("$DEST/runs/$arm/seed-$k/checkpoints/step-$(printf %08d "$STEPS")"); done
    done
    "${mapnet[@]}" blimp "${finals[@]}" --data "$BLIMP" --out "$DEST/blimp.json" --pairs "${BLIMP_PAIRS:-0}" \
        --no-progress 2>&1 | tee "$OUT/blimp-$WHICH.log"
    uv run python experiments/adaptive/adaptive_blimp.py "$DEST/blimp.json" "$DEST" --json "$DEST/blimp_table.json" | tee "$DEST/blimp_table.md"
else
    echo "this checkout has no \`mapnet blimp\`: BLiMP not scored"
fi
# The step costs, alone on the machine (RESULTS takes step costs from here, never from the lanes' logs):
echo "step costs: uv run python benchmarks/bench_strategies.py --data $SHARDS --presets $PRESET --arms uniform uniform@0.3 \
mapnet-ht-lite ${ADAPTIVE[*]} adaptive-T1"
