#!/usr/bin/env bash
# The batches made one step ahead (`train.prefetch`) on the CPU: where a step's time goes with the batches made
# on the loop's thread and in the background thread, `tiny` and `mini`, the two settings alternated twice
# (off, on, off, on) so drift in the machine's load hits both alike; batch 32 x 128. Run it alone on the machine.
#
#   bash experiments/profile-cpu/prefetch_cpu.sh OUT        # ~2 min on 2 cores; OUT/profile-PRESET-prefetch-{false,true}-{1,2}.txt
#
# Needs the real-text shards of RESULTS 0 (bash experiments/common/gpu_downstream.sh prepare). Whole sequences, as
# after the `fast` recipe's warm-up.
set -euo pipefail
OUT=$(realpath -m "$1")
mkdir -p "$OUT"
read -r -a py <<<"${PY:-uv run python}"
SHARDS=${SHARDS:-runs/real-text-x5/shards}
for preset in tiny mini; do
    steps=20; [[ $preset == mini ]] && steps=10
    for round in 1 2; do
        for prefetch in false true; do
            "${py[@]}" benchmarks/profile_step.py --data "$SHARDS" --preset "$preset" --batch 32 --steps "$steps" --warmup 3 \
                --set train.short_seq.len=0 --set train.short_seq.steps=0 --set "train.prefetch=$prefetch" \
                > "$OUT/profile-$preset-prefetch-$prefetch-$round.txt" 2>/dev/null
            grep -E '^(step \(median\)|data|masks|to_device|prefetch_wait) ' "$OUT/profile-$preset-prefetch-$prefetch-$round.txt" \
                | tr -s ' ' | paste -sd ';' | sed "s/^/$preset prefetch=$prefetch round $round: /"
        done
    done
done
