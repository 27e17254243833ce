#!/usr/bin/env bash
# Section 3b: move the per-seed mini comparisons (arms-mini-seed0..2, one `compare --seeds 1
# --set train.seed=S` each) into one folder and let compare collect them (every run is reused).
# Rerunnable: a run already moved is left where it is.
#
#   bash experiments/learned-masking-mini/merge_seeds.sh [OUT]   # default OUT: runs/real-text
set -euo pipefail
R=$(realpath -m "${1:-runs/real-text}")
ARMS=(uniform uniform@0.3 mapnet-ht stratified frequency-ht)
mkdir -p "$R/arms-mini/runs"
for arm in "${ARMS[@]}"; do
  mkdir -p "$R/arms-mini/runs/$arm"
  for s in 0 1 2; do
    from=$R/arms-mini-seed$s/runs/$arm/seed-0 to=$R/arms-mini/runs/$arm/seed-$s
    if [[ ! -e $to ]]; then mv "$from" "$to"; fi
  done
done
uv run mapnet compare "$R/shards" --out "$R/arms-mini" --preset mini --config experiments/common/real-text-cpu.toml \
  --set "train.extra_eval=[\"books=$R/heldout-books\", \"wiki=$R/heldout-wiki\"]" \
  --strategies "$(IFS=,; echo "${ARMS[*]}")" --seeds 3 --steps 400 --set optim.warmup.steps=40 --set optim.lr=5e-4
