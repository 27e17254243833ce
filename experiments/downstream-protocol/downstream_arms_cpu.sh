#!/usr/bin/env bash
# Does an encoder that learns beat its random-init control downstream, and does the masking arm show
# there? (docs/results.md, section B.) Four arms of section A (uniform, 30% masking, PMI, the paper's
# MAP-Net), retrained with section A's exact flags (same seeds: the same runs), then every final
# checkpoint fine-tuned on SST-2, CoLA and MRPC beside one random-init control per pretraining seed,
# judged paired by pretraining seed (`compare --glue-*`).
#
#   bash experiments/downstream-protocol/downstream_arms_cpu.sh pretrain OUT    # 12 runs of 1,200 steps in two lanes: ~45 min on 2 cores
#   bash experiments/downstream-protocol/downstream_arms_cpu.sh glue OUT        # the fine-tuning: ~25 min on 2 cores
#   bash experiments/downstream-protocol/downstream_arms_cpu.sh smoke OUT       # both stages on the embedded data, a few steps
#
# The fine-tuning protocol is `small` made cheaper and fixed once, on the control and one encoder
# (RESULTS B says how): one rate, 2,000 training examples, 64 tokens, 3 epochs, mean pooling and
# dropout 0.1, two fine-tuning seeds per pretraining seed.
set -euo pipefail
WHICH=$1; OUT=$(realpath -m "$2")
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
source experiments/common/lanes.sh
LANE_A=uniform,uniform@0.3
LANE_B=mapnet,pmi
ALL=uniform,uniform@0.3,mapnet,pmi
GLUE_DATA=$(realpath -m ../shared/data/glue)
FT=(--glue-data "$GLUE_DATA" --glue-protocol small --glue-tasks SST-2,CoLA,MRPC
    --set finetune.learning_rates=[3e-4] --set finetune.seeds=2 --set finetune.max_train=2000
    --set finetune.max_seq_len=64 --set finetune.pooling=mean --set finetune.dropout=0.1)

if [[ $WHICH == smoke ]]; then
    smoke_shards "$OUT"
    SHARDS=$OUT/shards; STEPS=4
    RUN=("${SMOKE_RUN[@]}" --seeds 2)
    FT+=(--set finetune.max_train=64 --set finetune.epochs=1 --set finetune.seeds=1)
else
    RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
    bash experiments/common/real_text_shards.sh "$RT"  # the tokenizer and the held-out sets
    [[ -f $X5/shards/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
    [[ -f $X5/shards/pmi.tsv ]] || "${mapnet[@]}" pmi-vocab "$X5/prep" --out "$X5/shards/pmi.tsv" --min-count 11 \
        --size 200000 --no-progress  # as experiments/common/learning_arms_cpu.sh
    SHARDS=$X5/shards; STEPS=1200
    # Section A's flags, verbatim (experiments/common/learning_arms_cpu.sh): the same seeds give the same runs.
    RUN=(--preset tiny --recipe fast --set train.batch_size=32 --set model.max_position=128
         --set shard.max_seq_len=128 --set train.eval_every=200 --set train.eval_sequences=512
         --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false
         --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]" --seeds 3)
fi

pretrain() {
    mkdir -p "$OUT"
    lane "$OUT" a "$SHARDS" "$LANE_A" --steps "$STEPS" "${RUN[@]}" & a=$!
    lane "$OUT" b "$SHARDS" "$LANE_B" --steps "$STEPS" "${RUN[@]}" & b=$!
    wait $a; wait $b
    gather "$OUT" "$OUT/arms"
}

glue() {  # one compare over every arm: it retrains nothing (it checks each run's settings), then fine-tunes
    "${mapnet[@]}" compare "$SHARDS" --out "$OUT/arms" --strategies "$ALL" --steps "$STEPS" "${RUN[@]}" "${FT[@]}" \
        2>&1 | tee "$OUT/arms-glue.log"
}

case $WHICH in
    pretrain) pretrain ;;
    glue) glue ;;
    smoke) pretrain; glue ;;
    *) echo "usage: $0 pretrain|glue|smoke OUT" >&2; exit 2 ;;
esac
