#!/usr/bin/env bash
# The warm start of appendix section 3c, repeated from an encoder that has left the unigram plateau
# (docs/results.md, section C): does learned masking pay once the encoder already uses context?
#
#   bash experiments/warm-start-learned/warm_start_learned_cpu.sh WARM OUT     # 12 runs of 600 steps, two lanes: ~35 min on 2 cores
#
# WARM: the encoder every arm continues from: section A's uniform seed-0 run (tiny, `fast`, 1,200
# steps, held-out loss 5.48, 1.41 nats below the training tokens' unigram entropy), e.g. the run
# experiments/downstream-protocol/downstream_arms_cpu.sh retrains at OUT/lane-a/runs/uniform/seed-0. Every arm starts
# from its final checkpoint (`compare --init-from`: the same weights for every arm and seed, a fresh
# optimizer and `fast` schedule with 60 warm-up steps, a schedule SHORTENED to 600 steps), seeds 0-2
# paired (data order and evaluation masks), on section A's shards and held-out sets. Two lanes of one
# thread each: their logged s/step are not idle step costs.
set -euo pipefail
WARM=$(realpath -m "$1"); OUT=$(realpath -m "$2")
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
bash experiments/common/real_text_shards.sh "$RT"
[[ -f $X5/shards/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
RUN=(--preset tiny --recipe fast --init-from "$WARM" --set train.batch_size=32 --set model.max_position=128
     --set shard.max_seq_len=128 --set optim.warmup.steps=60 --set train.eval_every=100 --set train.eval_sequences=512
     --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false
     --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]" --seeds 3 --steps 600)
source experiments/common/lanes.sh
mkdir -p "$OUT"
lane "$OUT" a "$X5/shards" uniform,mapnet-ht "${RUN[@]}" & a=$!
lane "$OUT" b "$X5/shards" uniform@0.3,mapnet "${RUN[@]}" & b=$!
wait $a; wait $b
gather "$OUT" "$OUT/arms"
"${mapnet[@]}" compare "$X5/shards" --out "$OUT/arms" --strategies uniform,uniform@0.3,mapnet,mapnet-ht "${RUN[@]}" \
    2>&1 | tee "$OUT/arms.log"
