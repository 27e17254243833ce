#!/usr/bin/env bash
# Real-text comparison on CPU (docs/results.md, section 2): Gutenberg books + Wikipedia from
# ../shared/data, held-out books and held-out Wikipedia articles evaluated separately.
#
#   bash experiments/real-text-cpu/real_text_cpu.sh [OUT]        # default OUT: runs/real-text  (~80 min on 2 cores)
#
# Training text: every 25th Gutenberg book (21 books) and every 10th Wikipedia file (11 files,
# ~1 MB of articles each). Held out, never trained on: 5 other books (every 125th, offset 14)
# and 2 other Wikipedia files. One BPE vocabulary (8,192, trained on the training text) for all; VOCAB=16384
# in the environment trains another size (experiments/common/real_text_shards.sh OUT 16384, for experiments/hour-levers).
set -euo pipefail
# Absolute: the held-out folders are recorded in each run's settings and must resolve from anywhere.
OUT=$(realpath -m "${1:-runs/real-text}")
DATA=../shared/data
G=$DATA/gutenberg
W=$DATA/wiki-articles/enwiki-2015-wikiextractor
mapfile -t BOOKS < <(ls "$G"/*.txt.gz | awk 'NR % 25 == 2')
mapfile -t BOOKS_HELD < <(ls "$G"/*.txt.gz | awk 'NR % 125 == 14')
mapfile -t WIKI < <(ls "$W"/*_wiki_*.txt.gz | awk 'NR % 10 == 1')
mapfile -t WIKI_HELD < <(ls "$W"/*_wiki_*.txt.gz | awk 'NR % 50 == 27')
mapnet=(uv run mapnet)
GUT=(--set preprocess.strip_gutenberg=true)
SHARD=(--set shard.max_seq_len=128)

"${mapnet[@]}" preprocess "${BOOKS[@]}" "${WIKI[@]}" --out "$OUT/prep" --vocab-size "${VOCAB:-8192}" "${GUT[@]}" --overwrite
"${mapnet[@]}" preprocess "${BOOKS_HELD[@]}" --out "$OUT/prep-books" --tokenizer "$OUT/prep/tokenizer.json" "${GUT[@]}" --overwrite
"${mapnet[@]}" preprocess "${WIKI_HELD[@]}" --out "$OUT/prep-wiki" --tokenizer "$OUT/prep/tokenizer.json" --overwrite
"${mapnet[@]}" shard "$OUT/prep" --out "$OUT/shards" "${SHARD[@]}" --set shard.valid_fraction=0.01 --overwrite
"${mapnet[@]}" shard "$OUT/prep-books" --out "$OUT/heldout-books" "${SHARD[@]}" --set shard.valid_fraction=1 --overwrite
"${mapnet[@]}" shard "$OUT/prep-wiki" --out "$OUT/heldout-wiki" "${SHARD[@]}" --set shard.valid_fraction=1 --overwrite

HELD=(--set "train.extra_eval=[\"books=$OUT/heldout-books\", \"wiki=$OUT/heldout-wiki\"]")
CFG=(--config experiments/common/real-text-cpu.toml --variance)
GLUE=(--glue-tasks cola,sst2,mrpc --glue-data "$DATA/glue")
# tiny, 600 steps: all five strategies; then GLUE quick at every kept checkpoint (a GLUE-vs-step
# curve) for uniform and MAP-Net only (their runs are reused, not retrained; the five-strategy
# results are kept as results-ablations.json).
"${mapnet[@]}" compare "$OUT/shards" --out "$OUT/tiny" --preset tiny "${CFG[@]}" "${HELD[@]}" \
    --strategies uniform,mapnet,mapnet-noweight,mapnet-unclipped,mapnet-noexplore
cp "$OUT/tiny/results.json" "$OUT/tiny/results-ablations.json"
"${mapnet[@]}" compare "$OUT/shards" --out "$OUT/tiny" --preset tiny "${CFG[@]}" "${HELD[@]}" "${GLUE[@]}" \
    --glue-every-checkpoint
# mini, 400 steps (a step costs ~5x tiny's): uniform and MAP-Net, GLUE quick; a wider model, a lower peak rate.
"${mapnet[@]}" compare "$OUT/shards" --out "$OUT/mini" --preset mini "${CFG[@]}" "${HELD[@]}" "${GLUE[@]}" \
    --steps 400 --set optim.warmup.steps=40 --set optim.lr=5e-4
