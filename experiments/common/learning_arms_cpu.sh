#!/usr/bin/env bash
# Which masking pays on an encoder that learns? (docs/results.md, section A): every masking arm with
# the `fast` recipe on the real-text shards of RESULTS 0 (every 5th book and Wikipedia file, 8,192-token
# BPE, 140,482 sequences of 128), held-out books and held-out Wikipedia scored separately, 3 seeds paired
# by seed (same initial encoder, data order and evaluation masks).
#
#   bash experiments/common/learning_arms_cpu.sh OUT tiny     # 30 runs of 1,200 steps, two lanes: ~2 h on 2 cores
#   bash experiments/common/learning_arms_cpu.sh OUT mini     # `mini`, 1,000 steps: uniform, 30% masking, mapnet-ht-lite: ~100 min
#   bash experiments/common/learning_arms_cpu.sh OUT smoke    # the same commands on the embedded data, a few steps
#   uv run python experiments/common/arms_table.py OUT/arms-tiny/results.json
#
# Two `compare` lanes (three at `mini`; one thread each, disjoint arms; experiments/common/lanes.sh) train side by side into
# their own folders; the finished runs are then gathered into OUT/arms-WHICH and one last `compare` over
# every arm reuses them all and writes results.json. The lanes' logged s/step are NOT idle step costs:
# RESULTS takes step costs from benchmarks/bench_strategies.py run alone.
#
# 1,200 steps (the schedule decays to zero over them): on this data uniform leaves the plateau near step
# 900 and a 1,500-step run ends ~1.6 nats below the training tokens' unigram entropy (6.888, RESULTS 0b),
# a 1,000-step one only ~0.9 below; 1,200 is what 30 runs fit in on 2 cores beside a session's other work.
set -euo pipefail
OUT=$(realpath -m "$1"); WHICH=${2:-tiny}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
source experiments/common/lanes.sh
# Ten arms. The run of RESULTS A trained the first eight in these two lanes, then uniform@0.4 and
# frequency-ht in two more lanes of one arm each with the same flags; the last compare gathered all ten.
LANE_A=uniform,mapnet,span,stratified,uniform@0.4
LANE_B=uniform@0.3,pmi,mapnet-ht,whole-word,frequency-ht
LANE_C=
ALL=uniform,uniform@0.3,uniform@0.4,mapnet,mapnet-ht,stratified,frequency-ht,whole-word,span,pmi
PRESET=tiny
if [[ $WHICH == mini ]]; then
    # The rate question at `mini`, where the vocabulary head is a smaller share of the step than at `tiny`:
    # does 30% masking's per-step gain survive its step cost? And the learned HT proposal in its cheap
    # form (RESULTS D: within +0.015 +/- 0.065 nats of the full arm at `tiny`, 1.09x a `mini` step).
    # 1,000 steps: uniform ends ~1.55 nats below the unigram entropy (RESULTS 0d). Three one-thread
    # lanes on two cores, one arm each, so that all three end together. The other arms at `mini`
    # (~4 more CPU hours) are still to run.
    LANE_A=uniform; LANE_B=uniform@0.3; LANE_C=mapnet-ht-lite; ALL=uniform,uniform@0.3,mapnet-ht-lite; PRESET=mini
fi

if [[ $WHICH == smoke ]]; then
    smoke_shards "$OUT"
    SHARDS=$OUT/shards; STEPS=4
    RUN=("${SMOKE_RUN[@]}")
else
    RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
    bash experiments/common/real_text_shards.sh "$RT"  # the tokenizer and the held-out sets
    [[ -f $X5/shards/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
    # The PMI vocabulary from the training corpus only (never held-out text), the paper's settings
    # (n = 2..5, count > 10) sized to this ~70 MB corpus; stored beside the shards, where --masking pmi finds it.
    [[ ,$ALL, != *,pmi,* || -f $X5/shards/pmi.tsv ]] || "${mapnet[@]}" pmi-vocab "$X5/prep" --out "$X5/shards/pmi.tsv" --min-count 11 \
        --size 200000 --no-progress
    SHARDS=$X5/shards; STEPS=1200
    [[ $PRESET == mini ]] && STEPS=1000
    RUN=(--preset "$PRESET" --recipe fast --set train.batch_size=32 --set model.max_position=128
         --set shard.max_seq_len=128 --set train.eval_every=200 --set train.eval_sequences=512
         --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false
         --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]")
fi

mkdir -p "$OUT"
lane "$OUT" a "$SHARDS" "$LANE_A" --seeds 3 --steps "$STEPS" "${RUN[@]}" & a=$!
lane "$OUT" b "$SHARDS" "$LANE_B" --seeds 3 --steps "$STEPS" "${RUN[@]}" & b=$!
c=
[[ -n $LANE_C ]] && { lane "$OUT" c "$SHARDS" "$LANE_C" --seeds 3 --steps "$STEPS" "${RUN[@]}" & c=$!; }
wait $a; wait $b; [[ -z $c ]] || wait $c

# Gather the lanes' runs into one comparison folder; the last compare reuses every one of them.
gather "$OUT" "$OUT/arms-$WHICH"
"${mapnet[@]}" compare "$SHARDS" --out "$OUT/arms-$WHICH" --strategies "$ALL" --seeds 3 --steps "$STEPS" "${RUN[@]}" \
    2>&1 | tee "$OUT/arms-$WHICH.log"
