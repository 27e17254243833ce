#!/usr/bin/env bash
# Does the masking verdict change on a stronger encoder? (issue 45, part 4): the `hour` recipe at a 20-minute budget,
# 3 paired seeds, uniform against the best masking rate, MAP-Net's cheap HT arm (`mapnet-ht-lite`), loss-adaptive
# masking (soft + HT) and PMI, compared at equal training time through `mapnet compare --time-budget 20m
# --step-costs`: each arm counts its own step cost, measured first in lock-step with uniform's, alone
# (benchmarks/step_costs.py), so an arm whose step costs more trains fewer steps, and the steps each buys do not
# depend on the machine's load while the runs train.
#
#   bash experiments/hour-masking/masking_cpu.sh OUT costs   # every arm's costs beside uniform's, alone (~15 min)
#   bash experiments/hour-masking/masking_cpu.sh OUT run     # LANES lanes over one queue of runs, then one compare over all
#   bash experiments/hour-masking/masking_cpu.sh OUT table   # experiments/common/arms_table.py (loss and BLiMP deltas)
#   bash experiments/hour-masking/masking_cpu.sh OUT score   # BLiMP of the seeds every arm has finished, while the lanes run
#   bash experiments/hour-masking/masking_cpu.sh OUT smoke   # all of it on the embedded synthetic data (fast, tiny)
#
# STRATEGIES (compare's names; uniform first: the reference), RECIPE, PRESET (empty: the recipe's shape), BUDGET,
# SEEDS, LANES (the run stage's one-thread lanes, default 2: experiments/common/lanes.sh), DATA and MAPNET may be set
# in the environment; SETS adds run flags to every arm and to the costs (word-split:
# SETS="--set train.precision=fp32"). REFERENCE="FULL SHORT" pins uniform's costs (seconds) to another machine's clock
# (benchmarks/step_costs.py --reference): the arms' ratios to uniform are measured here, in lock-step, and the budget
# buys the steps it bought there (section H's Xeon clock: REFERENCE="0.4385 0.5007"). The `hour` recipe masks 30%
# (section G's rate), so its `uniform` is 30% and the rate arm is uniform@0.15, the rate it replaced. DATA names the
# shards (experiments/common/real_text_kinds.sh; another recipe's default is base): the `hour` recipe's are section G's
# 64-token shards of the 16,384-token text (runs/real-text-x5-16k/shards-64, built by levers_cpu.sh when absent; PMI's vocabulary beside them).
set -euo pipefail
source experiments/common/bench_settings.sh
OUT=$(realpath -m "$1"); WHICH=${2:-}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
source experiments/common/lanes.sh
RECIPE=${RECIPE:-hour}; PRESET=${PRESET:-}; BUDGET=${BUDGET:-20m}; SEEDS=${SEEDS:-3}
# The hour recipe masks 30% (section G's rate): its `uniform` is 30%, and the rate arm is the 15% it replaced.
STRATEGIES=${STRATEGIES:-uniform,uniform@0.15,mapnet-ht-lite,adaptive-soft-ht,pmi}
case $WHICH in costs | run | table | score | smoke) ;;
    *) echo "usage: masking_cpu.sh OUT costs|run|table|score|smoke" >&2; exit 2 ;; esac
[[ ${LANES:=2} =~ ^[1-9]$ ]] || { echo "LANES must be 1 to 9 (got $LANES)" >&2; exit 2; }
[[ $STRATEGIES == uniform,?* ]] || { echo "STRATEGIES must be uniform (the reference of costs and deltas) and at least one arm" >&2; exit 2; }
IFS=, read -r -a ARMS <<<"$STRATEGIES"
COST_ARGS=(); BLIMP=(--blimp "$(realpath -m ../shared/data/blimp)" --blimp-pairs 200)
source experiments/common/real_text_kinds.sh
source experiments/common/hour_run.sh
[[ $RECIPE == hour ]] && : "${DATA:=vocab16k-seq64}"  # the shards the recipe was measured on (recipes.MEASURED_ON)
real_text_kind "${DATA:=base}" || { echo "DATA must be base, seq64, vocab16k or vocab16k-seq64 (got $DATA)" >&2; exit 2; }
SHARDS=$KIND_SHARDS; RT=$KIND_HELDOUT; SEQ=$KIND_SEQ; PREP=$KIND_PREP
# The lever search's run flags (experiments/hour-levers/levers_cpu.sh), held-out books and wiki besides.
hour_run_flags "$SEQ" "$RT"
RUN=(--recipe "$RECIPE" ${PRESET:+--preset "$PRESET"} "${HOUR_RUN[@]}" --set train.eval_every=500 ${SETS:-})
if [[ $WHICH == smoke ]]; then
    RECIPE=${SMOKE_RECIPE:-fast}; PRESET=tiny; BUDGET=20s; SEEDS=2; SHARDS=$OUT/shards
    COST_ARGS=(--steps 4 --skip 1 --rounds 1 --alone 1); BLIMP=(--blimp "$(realpath -m ../shared/data/blimp)" --blimp-pairs 1)
    smoke_run_flags 8 "$RECIPE" "$PRESET"; RUN=("${SMOKE_RUN[@]}" --set train.eval_every=5)
fi
[[ -z ${REFERENCE:-} || $WHICH == smoke ]] || COST_ARGS+=(--reference $REFERENCE)  # word-split: FULL SHORT
COSTS=$OUT/costs.json
mkdir -p "$OUT"

loadline() { echo -e "$1\t$2\t$(date -u +%FT%TZ)\t$(cut -d' ' -f1-3 /proc/loadavg)\t$(nproc)" >> "$OUT/load.tsv"; }

data() {
    if [[ $WHICH == smoke ]]; then
        [[ -f $SHARDS/pmi.tsv ]] || smoke_shards "$OUT"
        return
    fi
    if [[ $DATA != base ]]; then  # section G's shards, built by its script (the held-out sets with them)
        [[ -f $SHARDS/manifest.json ]] || bash experiments/hour-levers/levers_cpu.sh "$OUT/levers" prepare base "$DATA"
    else
        bash experiments/common/real_text_shards.sh "$RT"
        [[ -f $SHARDS/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
    fi
    # PMI's vocabulary from the training corpus only, as sections A and E built it (beside the shards).
    [[ ,$STRATEGIES, != *,pmi,* || -f $SHARDS/pmi.tsv ]] || "${mapnet[@]}" pmi-vocab "$PREP" \
        --out "$SHARDS/pmi.tsv" --min-count 11 --size 200000 --no-progress
}

costs() {
    local common bench=() arm load1
    common=$(bench_settings "${RUN[@]}") || exit 2
    mapfile -t common <<<"$common"
    for arm in "${ARMS[@]}"; do bench+=(--arm "$arm" "$SHARDS" "strategy=$arm"); done
    load1=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
        echo "warning: load average $load1: the costs are for runs alone, and another process shares the cores" >&2
    fi
    loadline costs start
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} uv run python benchmarks/step_costs.py --out "$COSTS" \
        --common "${common[@]}" "${bench[@]}" "${COST_ARGS[@]}" | tee "$OUT/costs.log"
    loadline costs end
}

need_costs() { [[ -f $COSTS ]] || { echo "no $COSTS: run the costs stage first (alone on the machine)" >&2; exit 2; }; }

run() {
    need_costs
    # LANES one-thread lanes over one queue of runs (queue_lanes: whichever lane is free takes the next run, in
    # compare's seed-major order); BLiMP waits for the last compare (and the score stage), so a lane only trains.
    local train=(--time-budget "$BUDGET" --step-costs "$COSTS" "${RUN[@]}")
    loadline run start
    # In the background and waited for: called in an `||` list, the lanes would run without `set -e`.
    queue_lanes "$OUT" "$SHARDS" "$SEEDS" "$STRATEGIES" "${train[@]}" & local lanes=$!
    wait $lanes || { loadline run end; exit 1; }
    loadline run end
    gather "$OUT" "$OUT/arms"
    # The runs' BLiMP is cached in their folders (the score stage's); the controls' cache is the score folder's,
    # keyed by weights and scorer: the last compare starts from it instead of scoring the same random weights again.
    [[ -f $OUT/arms/blimp-controls.json || ! -f $OUT/score/blimp-controls.json ]] \
        || cp "$OUT/score/blimp-controls.json" "$OUT/arms/blimp-controls.json"
    "${mapnet[@]}" compare "$SHARDS" --out "$OUT/arms" --strategies "$STRATEGIES" --seeds "$SEEDS" "${train[@]}" \
        "${BLIMP[@]}" 2>&1 | tee "$OUT/arms.log"
}

# BLiMP of the runs that are done, now, beside the lanes: a `compare` in OUT/score over links to the finished runs of
# the first seeds every arm has finished (BLiMP at each final checkpoint, cached in the run folder, where the last
# compare reuses it; each seed's random-weight control and the unigram model in OUT/score). Its results.json holds
# every number of those seeds, so a VM lost before the end loses no finished run's scores (copy it to raw/). A run
# not finished is never linked: compare would train it, beside its lane.
score() {
    local n=0 arm k ok
    while :; do  # the first n seeds all finished for every arm
        ok=1
        for arm in "${ARMS[@]}"; do run_finished "$(run_home "$OUT" "$arm" "$n")" || { ok=0; break; }; done
        ((ok)) || break
        n=$((n + 1))
    done
    ((n > 0)) || { echo "no seed is finished for every arm yet (${ARMS[*]})" >&2; exit 2; }
    rm -rf "$OUT/score/runs"
    for arm in "${ARMS[@]}"; do
        mkdir -p "$OUT/score/runs/$arm"
        for ((k = 0; k < n; k++)); do
            ln -s "$(run_home "$OUT" "$arm" "$k")" "$OUT/score/runs/$arm/seed-$k"
        done
    done
    local args=(--seeds "$n" --time-budget "$BUDGET" --step-costs "$COSTS" "${RUN[@]}" "${BLIMP[@]}")
    OMP_NUM_THREADS=1 "${mapnet[@]}" compare "$SHARDS" --out "$OUT/score" --strategies "$STRATEGIES" "${args[@]}" 2>&1 \
        | tee "$OUT/score.log"
}

case $WHICH in
    costs) data; costs ;;
    run) need_costs; data; run ;;
    score) need_costs; score ;;
    table) uv run python experiments/common/arms_table.py "$OUT/arms/results.json" | tee "$OUT/table.md" ;;
    smoke) data; costs; run; uv run python experiments/common/arms_table.py "$OUT/arms/results.json" | tee "$OUT/table.md" ;;
esac
