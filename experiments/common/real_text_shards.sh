#!/usr/bin/env bash
# Build the real-text shards of experiments/real-text-cpu/real_text_cpu.sh (its preparation part: preprocess and
# shard of the training text, held-out books and held-out Wikipedia) when OUT lacks any of them.
# Every script of experiments/ on the section-2 data calls this first.
#
#   bash experiments/common/real_text_shards.sh OUT
set -euo pipefail
OUT=$(realpath -m "$1")
mkdir -p "$(dirname "$OUT")"  # the preparation script is written beside OUT
if [[ ! -f "$OUT/shards/manifest.json" || ! -f "$OUT/heldout-books/manifest.json" || ! -f "$OUT/heldout-wiki/manifest.json" ]]; then
    head -n "$(grep -n '^HELD=' experiments/real-text-cpu/real_text_cpu.sh | cut -d: -f1)" experiments/real-text-cpu/real_text_cpu.sh \
        | grep -v '^HELD=' > "$OUT.prep.sh"
    bash "$OUT.prep.sh" "$OUT"
fi
