#!/usr/bin/env bash
cd /work/main
C=(uv run mapnet compare /work/main/runs/real-text-x5/shards --seeds 3 --steps 1200 --preset tiny --recipe fast --set train.batch_size=32 --set model.max_position=128 --set shard.max_seq_len=128 --set train.eval_every=200 --set train.eval_sequences=512 --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false --set 'train.extra_eval=["books=/work/main/runs/real-text/heldout-books", "wiki=/work/main/runs/real-text/heldout-wiki"]')
OMP_NUM_THREADS=1 "${C[@]}" --out runs/learning/lane-c --strategies uniform@0.4 > runs/learning/lane-c.log 2>&1 &
OMP_NUM_THREADS=1 "${C[@]}" --out runs/learning/lane-d --strategies frequency-ht > runs/learning/lane-d.log 2>&1 &
wait
for lane in c d; do for arm in runs/learning/lane-$lane/runs/*; do mv "$arm" runs/learning/arms-tiny/runs/; done; done
"${C[@]}" --out runs/learning/arms-tiny --strategies uniform,uniform@0.3,uniform@0.4,mapnet,mapnet-ht,stratified,frequency-ht,whole-word,span,pmi > runs/learning/arms-tiny-10.log 2>&1
