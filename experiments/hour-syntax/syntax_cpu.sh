#!/usr/bin/env bash
# Section J (issue 67, item 3): one lever aimed at syntax, GPT-BERT's hybrid masked/causal objective
# (`--masking hybrid`, one row in 16 causal), against today's `hour` recipe at equal time: 20 minutes on the
# modelled clock, 3 paired seeds, `mapnet compare` (held-out loss; BLiMP on every pair of the choosing half of
# the 45 paradigms, PLL, with each seed's random weights and the unigram model), then the reporting half's BLiMP on
# the same final checkpoints, scored after the decision.
#
#   bash experiments/hour-syntax/syntax_cpu.sh OUT costs     # the hybrid step's cost: lock-step ratio to the recipe's,
#                                                            # alone on the machine (~3 min)
#   bash experiments/hour-syntax/syntax_cpu.sh OUT compare   # 2 arms x 3 seeds, 20 modelled minutes each, then BLiMP
#                                                            # (rerun = resume: finished runs and scores are kept)
#   bash experiments/hour-syntax/syntax_cpu.sh OUT report    # BLiMP on the reporting half, after the decision
#   bash experiments/hour-syntax/syntax_cpu.sh OUT keep      # the small raw files into experiments/hour-syntax/raw
#   bash experiments/hour-syntax/syntax_cpu.sh OUT smoke     # every stage on the embedded synthetic data
#
# The clock: the recipe's step is pinned at section G's Xeon cost (0.4385 s, short 0.5007 s: the clock section H's
# hour runs counted, experiments/hour-levers/step-costs/xeon-2026-11-27/costs.json) and the hybrid's is that times
# the ratio measured here in lock-step, so 20 minutes buy both arms what they would buy alone on that machine,
# whatever runs beside them. One after another, each on both cores (`compare`'s local engine): on this 2-vCPU VM two
# runs side by side on one thread each take 1.7x as long in all (experiments/engine-cpu: 813 s against 486 s for the
# same comparison; here 1.0 s a step each against 0.36 s alone). DATA: the recipe's shards
# (vocab16k-seq64: 16,384-token BPE, 64-token sequences; built by section G's `levers_cpu.sh OUT prepare base
# vocab16k-seq64`).
set -euo pipefail
source experiments/common/bench_settings.sh
source experiments/common/real_text_kinds.sh
source experiments/common/hour_run.sh
OUT=$(realpath -m "$1"); WHICH=${2:-}
case $WHICH in costs | compare | report | keep | smoke) ;;
    *) echo "usage: syntax_cpu.sh OUT costs|compare|report|keep|smoke" >&2; exit 2 ;; esac
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
BUDGET=20m; SEEDS=3; REFERENCE=(0.4385 0.5007); COST_ARGS=(); PAIRS=0  # 0: every pair
real_text_kind vocab16k-seq64; SHARDS=$KIND_SHARDS; RT=$KIND_HELDOUT
BLIMP=$(realpath -m ../shared/data/blimp)
hour_run_flags "$KIND_SEQ" "$RT"; RUN=(--recipe hour "${HOUR_RUN[@]}")
if [[ $WHICH == smoke ]]; then  # the synthetic language and `tiny`: every stage in seconds, not a measurement
    SHARDS=$OUT/data/shards; BUDGET=20s; SEEDS=2; COST_ARGS=(--steps 4 --skip 1); PAIRS=3
    smoke_run_flags 16; RUN=("${SMOKE_RUN[@]}")
    synthetic_shards "$OUT/data/prep" "$SHARDS"
fi
[[ -f $SHARDS/manifest.json ]] || { echo "no $SHARDS: bash experiments/hour-levers/levers_cpu.sh OUT prepare base vocab16k-seq64" >&2; exit 2; }
mkdir -p "$OUT"

loadline() { echo -e "$1\t$2\t$(date -u +%FT%TZ)\t$(cut -d' ' -f1-3 /proc/loadavg)\t$(nproc)" >> "$OUT/load.tsv"; }

half() {  # FOLDER HALF: a BLiMP folder of one half's paradigm files (links) and the published scores, for compare
    local dir=$1 uid
    [[ -d $dir ]] && return
    mkdir -p "$dir.tmp"
    for uid in $(uv run python experiments/common/blimp_halves.py "$2" | tr , ' '); do
        ln -s "$BLIMP/$uid.jsonl" "$dir.tmp/$uid.jsonl"
    done
    ln -s "$BLIMP/models_summary.jsonl" "$dir.tmp/models_summary.jsonl"
    mv "$dir.tmp" "$dir"
}

costs() {
    local common
    common=$(bench_settings "${RUN[@]}") || exit 2
    mapfile -t common <<<"$common"
    loadline costs start
    OMP_NUM_THREADS=$(nproc) uv run python benchmarks/step_costs.py --out "$OUT/costs.json" --common "${common[@]}" \
        --reference "${REFERENCE[@]}" "${COST_ARGS[@]}" \
        --arm uniform "$SHARDS" strategy=uniform --arm hybrid "$SHARDS" strategy=hybrid | tee "$OUT/costs.log"
    loadline costs end
}

compare() {
    [[ -f $OUT/costs.json ]] || { echo "no $OUT/costs.json: run the costs stage first (alone)" >&2; exit 2; }
    half "$OUT/blimp-choose" choose
    loadline compare start
    "${mapnet[@]}" compare "$SHARDS" --out "$OUT/compare" --strategies uniform,hybrid --seeds "$SEEDS" \
        --time-budget "$BUDGET" --step-costs "$OUT/costs.json" --blimp "$OUT/blimp-choose" --blimp-pairs "$PAIRS" \
        "${RUN[@]}" 2>&1 | tee -a "$OUT/compare.log"
    loadline compare end
}

report() {  # the reporting half on each run's final checkpoint, each seed's random weights and the unigram model
    local -a finals=()
    local run
    for run in "$OUT"/compare/runs/*/seed-*/; do finals+=("$(ls -d "$run"checkpoints/step-* | tail -n 1)"); done
    "${mapnet[@]}" blimp "${finals[@]}" --data "$BLIMP" --out "$OUT/blimp-report.json" --pairs "$PAIRS" \
        --no-progress --resume --paradigms "$(uv run python experiments/common/blimp_halves.py report)"
}

keep() {  # what the README's tables read: costs, load, each finished run's small files, compare's and the report's JSON
    local raw=experiments/hour-syntax/raw run dest f
    mkdir -p "$raw"
    cp "$OUT/costs.json" "$OUT/costs.log" "$OUT/load.tsv" "$raw/"
    for run in "$OUT"/compare/runs/*/seed-*; do
        grep -qs '"finished": true' "$run/run.json" || continue
        dest=$raw/runs/$(basename "$(dirname "$run")")/$(basename "$run"); mkdir -p "$dest"
        for f in run.json metrics.jsonl settings.toml compare-blimp.json; do [[ ! -f $run/$f ]] || cp "$run/$f" "$dest/"; done
    done
    for f in compare/results.json compare/command.txt compare/blimp-controls.json; do
        [[ ! -f $OUT/$f ]] || cp "$OUT/$f" "$raw/"
    done
    # the reporting half stays out until its scoring ends: a part-scored file would read as the half's result
    if grep -qs '"complete": true' "$OUT/blimp-report.json"; then cp "$OUT/blimp-report.json" "$raw/"; fi
    uv run python experiments/common/doc_tables.py --write
}

case $WHICH in
    keep) keep ;;
    costs) costs ;;
    compare) compare ;;
    report) report ;;
    smoke) costs; compare; report ;;
esac
