#!/usr/bin/env bash
# Does a `tiny` encoder trained 25x longer than section A's know something a random one does not?
# (docs/results.md, section E3.) One `tiny` uniform run of 30,000 steps x 32 x 128 tokens (123M tokens,
# 6.8 epochs of the 18M-token real-text shards of RESULTS 0, 8,192-token BPE) with the `fast` recipe (its
# linear decay over all 30,000 steps), a checkpoint every 3,000 steps, all kept; resumable (`pretrain
# --resume` continues a stopped run). Then BLiMP at every checkpoint with its random-init and unigram
# controls, and GLUE: the `small` protocol and a few-shot protocol, each with the random-init control,
# paired by fine-tuning seed.
#
#   bash experiments/long-tiny/long_tiny_cpu.sh OUT pretrain    # ~1.5 h alone on 2 cores (one thread: ~2-3 h beside other work)
#   bash experiments/long-tiny/long_tiny_cpu.sh OUT blimp       # BLiMP curve (200 pairs per paradigm) + every pair at the end
#   bash experiments/long-tiny/long_tiny_cpu.sh OUT glue        # small protocol (5,000 examples, 3 seeds) + few-shot (500/1,000, 5 seeds)
#   uv run python experiments/common/downstream_table.py OUT/glue-*/results.json
set -euo pipefail
OUT=$(realpath -m "$1"); WHICH=${2:-all}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
GLUE=$(realpath -m ../shared/data/glue); BLIMP=$(realpath -m ../shared/data/blimp)
RUN=$OUT/tiny-uniform-30k
mkdir -p "$OUT"
if [[ $WHICH == pretrain || $WHICH == all ]]; then
    bash experiments/common/real_text_shards.sh "$RT"
    [[ -f $X5/shards/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
    RESUME=(); [[ -d $RUN/checkpoints ]] && RESUME=(--resume)
    OMP_NUM_THREADS=${THREADS:-1} "${mapnet[@]}" pretrain "$X5/shards" --out "$RUN" --preset tiny --recipe fast \
        --steps 30000 --seed 0 "${RESUME[@]}" \
        --set train.batch_size=32 --set model.max_position=128 --set shard.max_seq_len=128 --set train.eval_every=1000 \
        --set train.eval_sequences=512 --set train.eval_pick=spread --set logging.log_every=100 --set logging.progress=false \
        --set train.checkpoint_every=3000 --set train.keep_last=100 \
        --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]"
fi
if [[ $WHICH == blimp || $WHICH == all ]]; then
    "${mapnet[@]}" blimp "$RUN" --data "$BLIMP" --out "$OUT/blimp-curve-200.json" --pairs 200 --no-progress --overwrite
    "${mapnet[@]}" blimp "$RUN/checkpoints/step-00030000" --data "$BLIMP" --out "$OUT/blimp-final.json" --no-progress --overwrite
    "${mapnet[@]}" blimp "$RUN/checkpoints/step-00030000" --data "$BLIMP" --out "$OUT/blimp-final-l2r.json" \
        --method word-l2r --no-random --no-unigram --no-progress --overwrite
fi
if [[ $WHICH == glue || $WHICH == all ]]; then
    CK=$RUN/checkpoints/step-00030000
    # The small protocol at its upper rate (section B1's, where CoLA came closest), 5,000 examples per task.
    "${mapnet[@]}" finetune-glue --protocol small --lrs 3e-4 --init both --checkpoint "$CK" --data "$GLUE" \
        --task SST-2,CoLA,MRPC --max-train 5000 --out "$OUT/glue-small-5000"
    # Few-shot: where prior knowledge should matter most. 500 and 1,000 training examples, 5 fine-tuning seeds,
    # 10 epochs (3 would be 16-32 updates), the same rate and batch.
    for n in 500 1000; do
        "${mapnet[@]}" finetune-glue --protocol small --lrs 3e-4 --init both --checkpoint "$CK" --data "$GLUE" \
            --task SST-2,CoLA,MRPC --max-train "$n" --seeds 5 --epochs 10 --out "$OUT/glue-fewshot-$n"
    done
fi
