#!/usr/bin/env bash
# The hour recipe's evidence (issue 45, part 3): `mapnet pretrain SHARDS --recipe hour --time-budget 60m`, no
# --preset (the recipe's own shape), 3 seeds on the real-text shards (8,192-token BPE), then BLiMP on every pair of
# the 45 paradigms by pseudo-log-likelihood and by word-l2r, against each seed's random weights and the shards'
# unigram model; the BLiMP-vs-minutes curve (200 pairs a paradigm at a checkpoint every ~10 minutes) beside that of
# `mini` `fast` (experiments/blimp-arms-mini, uniform-6k); GLUE on seed 0's encoder with its random-init control
# (GLUE_SEEDS="0 1 2": the small protocol on those seeds' encoders too, each its own comparison).
#
#   bash experiments/hour-recipe/hour_cpu.sh OUT costs      # the recipe's step costs beside mini fast's, alone
#   bash experiments/hour-recipe/hour_cpu.sh OUT pretrain   # the seeds (rerun = resume)
#   bash experiments/hour-recipe/hour_cpu.sh OUT shape      # BLiMP (200 pairs) at each seed's end: section G's amendment
#   bash experiments/hour-recipe/hour_cpu.sh OUT blimp      # the curve and the final scores with their controls
#   bash experiments/hour-recipe/hour_cpu.sh OUT glue       # small protocol (5,000 examples) and few-shot (500, 1,000)
#                                                           # on seed 0; the small protocol on each other GLUE_SEEDS
#   bash experiments/hour-recipe/hour_cpu.sh OUT table      # experiments/common/hour_table.py over all of it
#   bash experiments/hour-recipe/hour_cpu.sh OUT smoke      # every stage on the embedded synthetic data, seconds each
#
# CLOCK=modelled (the default) trains every seed to the modelled clock at the costs `costs` measured alone
# (train.step_seconds, train/budget.py): 60 minutes buy the steps a run alone on these 2 cores would, in every
# sitting and under any load, so the seeds may run at once (JOBS, default 3, each on one thread) and beside other
# work; run.json records the wall seconds too. CLOCK=wall trains each seed to the wall clock, one after another:
# they must then be alone on the machine (the load is recorded before and after each, OUT/load.tsv). RECIPE, PRESET
# (empty: the recipe's shape), BUDGET, SEEDS, JOBS and MAPNET may be set in the environment; SETS adds run flags
# (word-split: SETS="--set model.layers=4 --set model.hidden=192 --set model.heads=3" trains another shape, as
# section G's amendment compares two shapes at the hour; give it its own OUT). DATA picks the shards as section G's
# arms name them (experiments/common/real_text_kinds.sh): base (8,192-token BPE, 128-token sequences; the default
# but for `hour`), seq64 (the same text in 64-token sequences), vocab16k (16,384) or vocab16k-seq64 (the `hour`
# recipe's default); the held-out sets are the shards' tokenizer's, and the batch stays what the recipe and SETS say
# (the `hour` recipe's is 64). LEVERS_COSTS=FILE
# LEVERS_ARM=ARM makes `costs` take that arm's costs from section G's pinned clock (step-costs/CPU-DATE/costs.json)
# instead of measuring them: section G's amendment 2 prices the hour's shapes and section H on that clock.
set -euo pipefail
source experiments/common/bench_settings.sh
OUT=$(realpath -m "$1"); WHICH=${2:-}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
RECIPE=${RECIPE:-hour}; PRESET=${PRESET:-}; BUDGET=${BUDGET:-60m}; SEEDS=${SEEDS:-3}; CLOCK=${CLOCK:-modelled}
JOBS=${JOBS:-$SEEDS}; CHECKPOINT_MINUTES=${CHECKPOINT_MINUTES:-10}; PAIRS=200; FINAL_PAIRS=0; GLUE_SEEDS=${GLUE_SEEDS:-0}
case $CLOCK in modelled | wall) ;; *) echo "CLOCK must be modelled or wall (got $CLOCK)" >&2; exit 2 ;; esac
case $WHICH in costs | pretrain | shape | blimp | glue | table | smoke) ;;
    *) echo "usage: hour_cpu.sh OUT costs|pretrain|shape|blimp|glue|table|smoke" >&2; exit 2 ;; esac
for k in $GLUE_SEEDS; do
    [[ $k =~ ^[0-9]+$ ]] && ((k < SEEDS)) || { echo "GLUE_SEEDS must be seeds of 0..$((SEEDS - 1)) (got $k)" >&2; exit 2; }
done
# The costs' reference takes --common, SETS included: a SETS that reshapes the model would reshape the baseline too.
# Refused here, before `data` builds shards (minutes on a fresh clone) for a measurement that would not run.
# SMOKE=1 gives any one stage the smoke's settings (another script's smoke drives this one stage by stage).
SMOKE=${SMOKE:-0}; [[ $WHICH == smoke ]] && SMOKE=1
if [[ ($WHICH == costs || $WHICH == smoke) && -z ${LEVERS_COSTS:-} && ${SETS:-} == *model.* ]]; then
    echo "SETS changes the model ($SETS): the mini fast reference of the costs would take it too; measure them without it, or take them with LEVERS_COSTS" >&2
    exit 2
fi

source experiments/common/real_text_kinds.sh
source experiments/common/hour_run.sh
[[ $RECIPE == hour ]] && : "${DATA:=vocab16k-seq64}"  # the shards the recipe was measured on (recipes.MEASURED_ON)
real_text_kind "${DATA:=base}" || { echo "DATA must be base, seq64, vocab16k or vocab16k-seq64 (got $DATA)" >&2; exit 2; }
SHARDS=$KIND_SHARDS; RT=$KIND_HELDOUT; SEQ=$KIND_SEQ
real_text_kind base; BASE_SHARDS=$KIND_SHARDS  # `mini` `fast`'s shards (8,192 BPE, 128 tokens): the curve's clock
GLUE=$(realpath -m ../shared/data/glue); BLIMP=$(realpath -m ../shared/data/blimp)
COST_ARGS=(); GLUE_SMALL=(--max-train 5000); FEW_SHOT=(500 1000); FEW_SHOT_ARGS=(--seeds 5 --epochs 10)
# The lever search's run flags (experiments/hour-levers/levers_cpu.sh), so the recipe trains as its arms did.
hour_run_flags "$SEQ" "$RT"
RUN=(--recipe "$RECIPE" ${PRESET:+--preset "$PRESET"} "${HOUR_RUN[@]}" --set train.keep_last=100 ${SETS:-})
if ((SMOKE)); then
    # The synthetic language, a tiny model and a 20 s budget: every stage and the table, not a measurement.
    RECIPE=${SMOKE_RECIPE:-fast}; PRESET=${SMOKE_PRESET:-tiny}; BUDGET=20s; SEEDS=2; JOBS=2; CHECKPOINT_MINUTES=0.1
    PAIRS=2; FINAL_PAIRS=3; SHARDS=$OUT/data/shards; BASE_SHARDS=$SHARDS
    COST_ARGS=(--steps 4 --skip 1 --alone 1); GLUE_SMALL=(--max-train 64 --max-dev 64 --seeds 1 --epochs 1)
    FEW_SHOT=(32); FEW_SHOT_ARGS=(--max-dev 64 --seeds 1 --epochs 1)
    smoke_run_flags 8 "$RECIPE" "$PRESET"; RUN=("${SMOKE_RUN[@]}" --set train.keep_last=100 ${SETS:-})
fi
COSTS=$OUT/costs.json
mkdir -p "$OUT"

loadline() { echo -e "$1\t$2\t$(date -u +%FT%TZ)\t$(cut -d' ' -f1-3 /proc/loadavg)\t$(nproc)${3:+\t$3}" >> "$OUT/load.tsv"; }

data() {
    if ((SMOKE)); then synthetic_shards "$OUT/data/prep" "$SHARDS"; return; fi
    if [[ $DATA != base ]]; then  # section G's shards, built by its script (the held-out sets with them)
        [[ -f $SHARDS/manifest.json ]] || bash experiments/hour-levers/levers_cpu.sh "$OUT/levers" prepare base "$DATA"
        return
    fi
    bash experiments/common/real_text_shards.sh "$RT"
    [[ -f $SHARDS/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
}

costs() {  # the recipe's full and short step, the costs a modelled run counts, beside `mini` `fast`'s
    if [[ -n ${LEVERS_COSTS:-} ]]; then  # or an arm's costs on section G's pinned clock (amendment 2), as they are
        python3 - "$LEVERS_COSTS" "${LEVERS_ARM:?LEVERS_ARM names the arm of LEVERS_COSTS}" "$RECIPE" "$COSTS" <<'PY'
import json, sys
src, arm, recipe, out = sys.argv[1:]
arms = json.load(open(src))["arms"]
if arm not in arms:
    sys.exit(f"{src} has no arm {arm}")
json.dump({"arms": {recipe: {**arms[arm], "from": {"file": src, "arm": arm}}}}, open(out, "w"), indent=2)
print(f"{out}: {recipe} costs {arms[arm]['step_seconds']} s a step, {arm}'s in {src}")
PY
        return
    fi
    local common
    common=$(bench_settings "${RUN[@]}") || exit 2
    mapfile -t common <<<"$common"
    local load1
    load1=$(cut -d' ' -f1 /proc/loadavg)
    if awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
        echo "warning: load average $load1: the costs are measured for a run alone, and another process shares the cores" >&2
    fi
    # `mini` `fast` first, the reference (timed alone; the recipe in lock-step beside it): its costs put the
    # comparison curve (mini fast by minutes, hour_table.py) on this machine's clock, the one the recipe's runs count.
    [[ -f $BASE_SHARDS/manifest.json ]] || { echo "no $BASE_SHARDS: mini fast's shards, the costs' reference (bash experiments/common/gpu_downstream.sh prepare)" >&2; exit 2; }
    # (No held-out sets of the recipe's tokenizer: the baseline's shards have their own; evaluation is not timed.)
    local base=(--arm mini-fast "$BASE_SHARDS" preset=mini recipe=fast train.batch_size=32 shard.max_seq_len=128
                "train.extra_eval=[]")
    loadline costs start
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} uv run python benchmarks/step_costs.py --out "$COSTS" --common "${common[@]}" "${base[@]}" \
        --arm "$RECIPE" "$SHARDS" "${COST_ARGS[@]}" | tee "$OUT/costs.log"
    loadline costs end
}

cost_of() {  # FIELD: the recipe's measured cost (seconds) from OUT/costs.json
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["arms"][sys.argv[2]][sys.argv[3]])' \
        "$COSTS" "$RECIPE" "$1"
}

pretrain_seed() {  # SEED
    local seed=$1 run=$OUT/runs/seed-$1 resume=() clock=() threads=$(nproc) step every
    # A seed that spent this budget is kept as it is, its log too: adding seeds reruns the stage. (Another budget goes
    # on to `pretrain --resume`, which extends it or refuses.)
    if [[ -f $run/run.json ]] && python3 -c 'import json, sys
b = json.load(open(sys.argv[1])).get("budget") or {}
sys.exit(not (b.get("finished") and b.get("time_budget") == sys.argv[2]))' "$run/run.json" "$BUDGET"; then
        echo "seed $seed: its budget ($BUDGET) is spent ($run/run.json)"; return 0
    fi
    step=$(cost_of step_seconds)
    # A checkpoint (and a held-out evaluation) every CHECKPOINT_MINUTES of training time: the curve's points.
    every=$(python3 -c "import sys; print(max(1, round(60 * float(sys.argv[1]) / float(sys.argv[2]))))" "$CHECKPOINT_MINUTES" "$step")
    if [[ $CLOCK == modelled ]]; then
        clock=(--set "train.step_seconds=$step")
        # The short cost only where the run has a sequence-length warm-up (elsewhere the settings refuse it as ignored;
        # the benchmark times pieces either way).
        local fraction
        fraction=$("${mapnet[@]}" pretrain "$SHARDS" --out "$run" --time-budget "$BUDGET" --seed "$seed" "${RUN[@]}" \
            --print-settings | python3 -c "import sys, tomllib; print(tomllib.load(sys.stdin.buffer).get('train', {}).get('short_seq', {}).get('fraction', 0))") || return 1
        awk -v f="$fraction" 'BEGIN { exit !(f > 0) }' && clock+=(--set "train.short_step_seconds=$(cost_of short_step_seconds)")
        threads=$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))
    fi
    [[ -d $run/checkpoints ]] && resume=(--resume)
    loadline "seed-$seed" start
    local rc=0
    OMP_NUM_THREADS=$threads "${mapnet[@]}" pretrain "$SHARDS" --out "$run" --time-budget "$BUDGET" --seed "$seed" \
        "${resume[@]}" "${RUN[@]}" --set "train.checkpoint_every=$every" --set "train.eval_every=$every" "${clock[@]}" \
        > "$OUT/seed-$seed.log" 2>&1 || rc=$?
    loadline "seed-$seed" end "rc=$rc"
    ((rc == 0)) || { echo "seed $seed failed (exit $rc): $OUT/seed-$seed.log" >&2; return 1; }
}

need_costs() { [[ -f $COSTS ]] || { echo "no $COSTS: run the costs stage first (alone on the machine)" >&2; exit 2; }; }

pretrain() {
    need_costs
    if [[ $CLOCK == wall ]]; then
        for ((s = 0; s < SEEDS; s++)); do pretrain_seed "$s"; done
        return
    fi
    local pids=() failed=0
    for ((s = 0; s < SEEDS; s++)); do
        while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || failed=1; done
        pretrain_seed "$s" & pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    ((failed == 0)) || exit 1
}

runs() { for ((s = 0; s < SEEDS; s++)); do echo "$OUT/runs/seed-$s"; done; }

finals() {  # each seed's last checkpoint: the budget's end (a budget run checkpoints when its budget is spent)
    local run
    for run in $(runs); do
        [[ -f $run/run.json ]] && grep -q '"finished": true' "$run/run.json" \
            || { echo "$run has not spent its budget: run the pretrain stage" >&2; exit 1; }
        ls -d "$run"/checkpoints/step-* | tail -n 1
    done
}

shape() {  # section G's amendment: each seed's budget-end checkpoint, 200 pairs a paradigm (the search's), with
    # its random weights; experiments/common/shape_choice.py then applies the rule to two shapes' folders
    local -a finals_
    local list
    list=$(finals) || exit 1
    mapfile -t finals_ <<<"$list"
    "${mapnet[@]}" blimp "${finals_[@]}" --data "$BLIMP" --out "$OUT/blimp-shape.json" --pairs "$PAIRS" --no-progress \
        --overwrite
}

blimp() {  # --resume: a stage stopped part-way (a sitting's end) keeps every model already scored
    local -a all finals_
    local list
    list=$(finals) || exit 1  # a seed short of its budget stops the stage here, not with a partial score
    mapfile -t all < <(runs); mapfile -t finals_ <<<"$list"
    # The headline first (every pair, PLL), then the curve, then word-l2r: a stage cut short keeps the most needed.
    "${mapnet[@]}" blimp "${finals_[@]}" --data "$BLIMP" --out "$OUT/blimp-final-pll.json" --pairs "$FINAL_PAIRS" \
        --no-progress --resume
    # The shape stage scored the last checkpoints the curve's way (same pairs, method and controls): start from it.
    # (Copied as not complete: until the curve's own scoring ends, the file is not the curve.)
    [[ -f $OUT/blimp-curve.json || ! -f $OUT/blimp-shape.json ]] || python3 -c 'import json, sys
import os
doc = json.load(open(sys.argv[1])); doc["complete"] = False
json.dump(doc, open(sys.argv[2] + ".tmp", "w")); os.replace(sys.argv[2] + ".tmp", sys.argv[2])' \
        "$OUT/blimp-shape.json" "$OUT/blimp-curve.json"
    "${mapnet[@]}" blimp "${all[@]}" --data "$BLIMP" --out "$OUT/blimp-curve.json" --pairs "$PAIRS" --no-progress --resume
    "${mapnet[@]}" blimp "${finals_[@]}" --data "$BLIMP" --out "$OUT/blimp-final-l2r.json" --pairs "$FINAL_PAIRS" \
        --method word-l2r --no-progress --resume
}

glue() {  # seed 0's encoder at the budget's end, paired by fine-tuning seed with its random-init control; the small
    # protocol also on each other seed of GLUE_SEEDS (OUT/glue-small-seed-K): one pretrained encoder is one comparison
    local list n k
    local -a finals_
    list=$(finals) || exit 1
    mapfile -t finals_ <<<"$list"
    "${mapnet[@]}" finetune-glue --protocol small --lrs 3e-4 --init both --checkpoint "${finals_[0]}" --data "$GLUE" \
        --task SST-2,CoLA,MRPC "${GLUE_SMALL[@]}" --out "$OUT/glue-small"
    for n in "${FEW_SHOT[@]}"; do
        "${mapnet[@]}" finetune-glue --protocol small --lrs 3e-4 --init both --checkpoint "${finals_[0]}" --data "$GLUE" \
            --task SST-2,CoLA,MRPC --max-train "$n" "${FEW_SHOT_ARGS[@]}" --out "$OUT/glue-fewshot-$n"
    done
    for k in $GLUE_SEEDS; do
        [[ $k == 0 ]] && continue
        "${mapnet[@]}" finetune-glue --protocol small --lrs 3e-4 --init both --checkpoint "${finals_[$k]}" \
            --data "$GLUE" --task SST-2,CoLA,MRPC "${GLUE_SMALL[@]}" --out "$OUT/glue-small-seed-$k"
    done
}

table() {
    local glue=()
    for f in "$OUT"/glue-*/results.json; do [[ -f $f ]] && glue+=(--glue "$f"); done
    uv run python experiments/common/hour_table.py "$OUT" ${glue[@]+"${glue[@]}"} | tee "$OUT/table.md"
}

case $WHICH in
    costs) data; costs ;;
    pretrain) need_costs; data; pretrain ;;
    shape) shape ;;
    blimp) blimp ;;
    glue) glue ;;
    table) table ;;
    smoke) data; costs; pretrain; shape; blimp; glue; table ;;
esac
