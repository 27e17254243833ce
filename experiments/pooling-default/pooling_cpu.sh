#!/usr/bin/env bash
# Which pooling should fine-tuning default to for an encoder that no sentence task trained? (issue 45, item 4.)
# A `tiny` `fast` encoder, 4,000 steps of 32 x 128 tokens on the section-2 real-text shards (8,192-token BPE), then
# the `small` protocol at lr 3e-4 on SST-2, CoLA and MRPC (at most 5,000 training examples, its 3 fine-tuning seeds), pretrained and random
# init paired by seed, once with [CLS] pooling and once with mean pooling. Everything else is the protocol's.
#
#   bash experiments/pooling-default/pooling_cpu.sh OUT [pretrain|glue|all]     # ~8 min + ~8 min alone on 2 cores
set -euo pipefail
OUT=$(realpath -m "$1"); WHICH=${2:-all}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
RT=$(realpath -m "${RT:-runs/real-text}")
GLUE=$(realpath -m ../shared/data/glue)
RUN=$OUT/tiny-uniform-4000
mkdir -p "$OUT"
if [[ $WHICH == pretrain || $WHICH == all ]]; then
    bash experiments/common/real_text_shards.sh "$RT"
    "${mapnet[@]}" pretrain "$RT/shards" --out "$RUN" --preset tiny --recipe fast --steps 4000 --seed 0 \
        --set train.batch_size=32 --set model.max_position=128 --set shard.max_seq_len=128 --set train.eval_every=1000 \
        --set train.checkpoint_every=4000 --set logging.log_every=100 --set logging.progress=false
fi
if [[ $WHICH == glue || $WHICH == all ]]; then
    for pooling in cls mean; do
        "${mapnet[@]}" finetune-glue --protocol small --lrs 3e-4 --init both --checkpoint "$RUN" --data "$GLUE" \
            --task SST-2,CoLA,MRPC --max-train 5000 --set "finetune.pooling=$pooling" --out "$OUT/glue-$pooling"
    done
fi
