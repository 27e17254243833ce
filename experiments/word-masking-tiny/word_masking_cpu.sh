#!/usr/bin/env bash
# The masking schemes people use, against uniform and the best learned arm (docs/results.md,
# section 5): uniform vs whole-word vs span (SpanBERT) vs pmi (PMI-Masking) vs mapnet-ht, on the
# real-text setup of section 2 (Gutenberg books + Wikipedia; held-out books and held-out Wikipedia
# evaluated separately), `tiny`, 600 steps, 3 seeds paired by seed; plus the PMI vocabulary's
# build time, peak memory and size.
#
#   bash experiments/word-masking-tiny/word_masking_cpu.sh [OUT] [tiny|smoke]   # default OUT: runs/real-text, tiny
#   bash experiments/word-masking-tiny/word_masking_cpu.sh /tmp/wm smoke         # the same commands on the embedded
#                                                               # tiny data, a handful of steps (~2 min)
#
# Needs the shards of experiments/real-text-cpu/real_text_cpu.sh (built here when missing). tiny: ~1.5 h on
# 2 cores (15 runs). The vocabulary is built from the training corpus only (OUT/prep), never from
# held-out text, and stored beside the shards (OUT/shards/pmi.tsv), where --masking pmi finds it.
set -euo pipefail
OUT=$(realpath -m "${1:-runs/real-text}")
WHICH=${2:-tiny}
mapnet=(uv run mapnet)
ARMS=uniform,whole-word,span,pmi,mapnet-ht

pmi_vocab() {  # CORPUS OUT_FILE [flags]: build the vocabulary, record wall time, peak RSS and size
    local corpus=$1 file=$2; shift 2
    local log
    log=$(mktemp)
    /usr/bin/time -v "${mapnet[@]}" pmi-vocab "$corpus" --out "$file" --overwrite --no-progress "$@" 2> "$log"
    {
        echo "corpus_bytes $(du -sb "$corpus" | cut -f1)"
        grep -E "Elapsed \(wall clock\)|Maximum resident set size" "$log"
        echo "file_bytes $(stat -c %s "$file")"
        echo "entries $(($(wc -l < "$file") - 2))"
    } | tee "$file.build.txt"
    rm -f "$log"
}

if [[ $WHICH == smoke ]]; then
    # The same chain on the embedded synthetic corpus: every command above, a few steps each.
    "${mapnet[@]}" preprocess --recipe data_recipes/tiny.toml --out "$OUT/prep" --set synthetic.documents=400 --overwrite
    "${mapnet[@]}" shard "$OUT/prep" --out "$OUT/shards" --set shard.valid_fraction=0.1 --overwrite
    pmi_vocab "$OUT/prep" "$OUT/shards/pmi.tsv" --min-count 3
    "${mapnet[@]}" compare "$OUT/shards" --out "$OUT/arms-smoke" --preset tiny --config data_recipes/tiny.toml \
        --strategies "$ARMS,span@0.3" --seeds 2 --steps 4 --set train.eval_every=2 --set train.eval_sequences=16 \
        --set optim.warmup.steps=1 --set train.batch_size=8
    exit 0
fi

bash experiments/common/real_text_shards.sh "$OUT"
HELD=(--set "train.extra_eval=[\"books=$OUT/heldout-books\", \"wiki=$OUT/heldout-wiki\"]")
CFG=(--config experiments/common/real-text-cpu.toml)

# The vocabulary: the paper's settings (n = 2..5, count > 10 i.e. --min-count 11, per-length shares),
# its size scaled to this ~20 MB corpus; and the builder's memory with a tight --max-entries, which
# prunes (the header's prune_floor F says how much: n-grams seen fewer than min-count + F times may be missed).
pmi_vocab "$OUT/prep" "$OUT/shards/pmi.tsv" --min-count 11 --size 100000
pmi_vocab "$OUT/prep" "$OUT/pmi-pruned.tsv" --min-count 11 --size 100000 --max-entries 500000

if [[ $WHICH == tiny ]]; then
    "${mapnet[@]}" compare "$OUT/shards" --out "$OUT/word-masking-tiny" --preset tiny "${CFG[@]}" "${HELD[@]}" \
        --strategies "$ARMS" --seeds 3
fi
