#!/usr/bin/env bash
# Build the real-text shards of experiments/real-text-cpu/real_text_cpu.sh (its preparation part: preprocess and
# shard of the training text, held-out books and held-out Wikipedia) when OUT lacks any of them.
# Every script of experiments/ on the section-2 data calls this first. VOCAB (default 8,192, the section's)
# is the size of the BPE vocabulary trained on the training text; an OUT already built with another is refused.
#
#   bash experiments/common/real_text_shards.sh OUT
#   bash experiments/common/real_text_shards.sh runs/real-text-16k 16384    # the same text, a 16,384-token BPE
set -euo pipefail
OUT=$(realpath -m "$1"); VOCAB=${2:-8192}
mkdir -p "$(dirname "$OUT")"  # the preparation script is written beside OUT
if [[ ! -f "$OUT/shards/manifest.json" || ! -f "$OUT/heldout-books/manifest.json" || ! -f "$OUT/heldout-wiki/manifest.json" ]]; then
    head -n "$(grep -n '^HELD=' experiments/real-text-cpu/real_text_cpu.sh | cut -d: -f1)" experiments/real-text-cpu/real_text_cpu.sh \
        | grep -v '^HELD=' > "$OUT.prep.sh"
    VOCAB=$VOCAB bash "$OUT.prep.sh" "$OUT"
fi
built=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' "$OUT/shards/manifest.json")
# BPE may stop short of the size asked on too little text; more than asked, or far less, is another vocabulary.
if ((built > VOCAB || built < VOCAB * 9 / 10)); then
    echo "real_text_shards.sh: $OUT holds a $built-token vocabulary, not $VOCAB: give another OUT" >&2; exit 2
fi
