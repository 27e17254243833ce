#!/usr/bin/env bash
# Section K (issue 67, item 4): the hour as a user gets it. `mapnet pretrain SHARDS --recipe hour --time-budget 60m`
# on the wall clock, each seed alone and one after another, then BLiMP on every pair of the 45 paradigms by PLL and
# word-l2r with each seed's random weights and the unigram model. The training and scoring are section H's script
# (experiments/hour-recipe/hour_cpu.sh with CLOCK=wall); this adds the faster step's measurement before it and the
# kept raw files after.
#
#   bash experiments/hour-wall/wall_cpu.sh OUT kernel     # alone: train.attention_kernel=math against auto, lock-step
#   bash experiments/hour-wall/wall_cpu.sh OUT pretrain   # alone: the seeds on the wall clock (SEEDS=1: seed 0 only)
#   bash experiments/hour-wall/wall_cpu.sh OUT blimp      # the finished seeds' last checkpoints, every pair, PLL, l2r
#   bash experiments/hour-wall/wall_cpu.sh OUT keep       # the small raw files into experiments/hour-wall/raw
#   bash experiments/hour-wall/wall_cpu.sh OUT smoke      # every stage on the embedded synthetic data, not a measurement
#
# SEEDS (default 3) bounds the seeds each stage takes: a sitting too short for three hours trains SEEDS=1, a later one
# SEEDS=3 (the finished seed is kept; `blimp` resumes, scoring only what is new).
set -euo pipefail
source experiments/common/bench_settings.sh
source experiments/common/real_text_kinds.sh
source experiments/common/hour_run.sh
OUT=$(realpath -m "$1"); WHICH=${2:-}
case $WHICH in kernel | pretrain | blimp | keep | smoke) ;;
    *) echo "usage: wall_cpu.sh OUT kernel|pretrain|blimp|keep|smoke" >&2; exit 2 ;; esac
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
export SEEDS=${SEEDS:-3}
real_text_kind vocab16k-seq64; SHARDS=$KIND_SHARDS; RT=$KIND_HELDOUT
BLIMP=$(realpath -m ../shared/data/blimp)
PAIRS=0; COST_ARGS=(--rounds 5)
# hour_cpu.sh's RUN for `--recipe hour` (the kernel's arms train exactly as the seeds do).
hour_run_flags "$KIND_SEQ" "$RT"; RUN=(--recipe hour "${HOUR_RUN[@]}")
HOUR=(env CLOCK=wall bash experiments/hour-recipe/hour_cpu.sh "$OUT")
if [[ $WHICH == smoke ]]; then  # the synthetic language and `tiny`, as hour_cpu.sh's smoke (which trains it here)
    SHARDS=$OUT/data/shards; PAIRS=3; COST_ARGS=(--steps 4 --skip 1 --rounds 2 --alone 1); export SEEDS=2
    smoke_run_flags 8; RUN=("${SMOKE_RUN[@]}")
    HOUR=(env CLOCK=wall SMOKE=1 bash experiments/hour-recipe/hour_cpu.sh "$OUT")
    synthetic_shards "$OUT/data/prep" "$SHARDS"
fi
mkdir -p "$OUT"

loadline() { echo -e "$1\t$2\t$(date -u +%FT%TZ)\t$(cut -d' ' -f1-3 /proc/loadavg)\t$(nproc)" >> "$OUT/load.tsv"; }

kernel() {  # the math kernel's whole and short step against the default's, in lock-step; the default's alone
    local common
    common=$(bench_settings "${RUN[@]}") || exit 2
    mapfile -t common <<<"$common"
    loadline kernel start
    OMP_NUM_THREADS=$(nproc) uv run python benchmarks/step_costs.py --out "$OUT/kernel.json" --common "${common[@]}" \
        "${COST_ARGS[@]}" --arm auto "$SHARDS" train.attention_kernel=auto \
        --arm math "$SHARDS" train.attention_kernel=math | tee "$OUT/kernel.log"
    loadline kernel end
}

pretrain() {
    [[ -f $OUT/kernel.json ]] || { echo "no $OUT/kernel.json: run the kernel stage first (alone)" >&2; exit 2; }
    # hour_cpu.sh spaces checkpoints by the recipe's cost: the math kernel's (the recipe's), from the kernel stage
    # (only the spacing: on the wall clock the budget counts what the steps take).
    [[ -f $OUT/costs.json ]] || LEVERS_COSTS=$OUT/kernel.json LEVERS_ARM=math "${HOUR[@]}" costs
    "${HOUR[@]}" pretrain
}

blimp() {  # each finished seed's last checkpoint, every pair of the 45, with its random weights and the unigram model
    local -a finals=()
    local run
    for ((s = 0; s < SEEDS; s++)); do
        run=$OUT/runs/seed-$s
        grep -qs '"finished": true' "$run/run.json" || { echo "$run has not spent its budget: run pretrain" >&2; exit 1; }
        finals+=("$(ls -d "$run"/checkpoints/step-* | tail -n 1)")
    done
    loadline blimp start
    "${mapnet[@]}" blimp "${finals[@]}" --data "$BLIMP" --out "$OUT/blimp-final-pll.json" --pairs "$PAIRS" \
        --no-progress --resume
    "${mapnet[@]}" blimp "${finals[@]}" --data "$BLIMP" --out "$OUT/blimp-final-l2r.json" --pairs "$PAIRS" \
        --method word-l2r --no-progress --resume
    loadline blimp end
}

keep() {  # what the README's tables read
    local raw=experiments/hour-wall/raw run dest f
    [[ $WHICH == smoke ]] && raw=$OUT/raw
    mkdir -p "$raw"
    for f in kernel.json kernel.log costs.json load.tsv seed-0.log seed-1.log seed-2.log; do
        [[ ! -f $OUT/$f ]] || cp "$OUT/$f" "$raw/"
    done
    for f in blimp-final-pll.json blimp-final-l2r.json; do  # a scoring stopped part-way stays out until it ends
        if grep -qs '"complete": true' "$OUT/$f"; then cp "$OUT/$f" "$raw/"; fi
    done
    for run in "$OUT"/runs/seed-*; do
        grep -qs '"finished": true' "$run/run.json" || continue
        dest=$raw/runs/$(basename "$run"); mkdir -p "$dest"
        for f in run.json metrics.jsonl settings.toml; do cp "$run/$f" "$dest/"; done
    done
    [[ $WHICH == smoke ]] || uv run python experiments/common/doc_tables.py --write
}

case $WHICH in
    kernel) kernel ;;
    pretrain) pretrain ;;
    blimp) blimp ;;
    keep) keep ;;
    smoke) kernel; pretrain; blimp; keep ;;
esac
