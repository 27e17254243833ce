#!/usr/bin/env bash
# The levers that pay per second (issue 45, part 2): the baseline (`mini`, the `fast` recipe, batch 32 x 128 on the
# 18M-token real-text shards, 8,192-token BPE) and each lever one at a time against it, every run trained to the
# same wall-clock budget (train.time_budget, 20 minutes of training time), 2 paired seeds, then held-out loss and
# BLiMP (the 45 shared paradigms x 200 pairs, pseudo-log-likelihood) at the budget's end. Each arm is one
# `mapnet compare` folder (OUT/arms/ARM); on the wall clock the runs go one after another, never two at once: they
# must be alone on the machine for their time to buy what it buys (the load is recorded before and after each,
# OUT/load.tsv). On the modelled clock (CLOCK=modelled, below) they need not be.
#
#   bash experiments/hour-levers/levers_cpu.sh OUT plan              # the arms, their flags, the wall time it takes
#   bash experiments/hour-levers/levers_cpu.sh OUT prepare [KIND...] # the shards: 8,192 at 128 and 64 tokens, 16,384
#   bash experiments/hour-levers/levers_cpu.sh OUT search            # every arm (prepares first); rerun = resume
#   bash experiments/hour-levers/levers_cpu.sh OUT search ARM...     # only these arms, in this order (the baseline first)
#   BASELINE=kept bash experiments/hour-levers/levers_cpu.sh OUT search ARM...   # against the kept baseline (below)
#   bash experiments/hour-levers/levers_cpu.sh OUT calibrate         # this machine's speed, into OUT/load.tsv
#   bash experiments/hour-levers/levers_cpu.sh OUT table             # Δ vs the baseline (experiments/common/levers_table.py)
#   bash experiments/hour-levers/levers_cpu.sh OUT keep              # each arm's results.json -> experiments/hour-levers/results/series-N/
#   bash experiments/hour-levers/levers_cpu.sh OUT smoke             # all of it on the embedded synthetic data, 20 s a run
#   bash experiments/hour-levers/levers_cpu.sh OUT costs ARM...      # the arms' step costs beside the baseline's (alone)
#   CLOCK=modelled bash experiments/hour-levers/levers_cpu.sh OUT search ARM...   # each step counts its kept cost
#
# A lever is only settings (nothing hand-wired): `--set` flags over the baseline's, or other shards. Another arm
# (the winners combined) is COMBINED="ARM ARM ..." (below). BUDGET, SEEDS, BLIMP_PAIRS, COMBINED and MAPNET may be set in
# the environment; ACROSS_CPUS=1 lets `costs` keep a ratio measured on another CPU than the kept baseline's.
#
# The search outlasts a sitting, and a sitting may get another machine: the kept results are series
# (experiments/common/levers_series.py), one baseline and the arms run beside it each. `keep` puts a sitting's arms
# into the series of its baseline: a baseline run again starts a new one. `search` first times a fixed step (the
# calibration, experiments/common/levers_calibration.py); with BASELINE=kept it runs only the arms named and pairs
# them with the newest kept series' baseline, which it allows only when this machine's calibration is within 5% of
# every one of that series.
#
# CLOCK=modelled trains every run to a modelled clock instead (train.step_seconds, train/budget.py): each step counts
# its arm's cost, measured by `costs` (benchmarks/step_costs.py: every arm's full and short step as a ratio to the
# baseline's, each arm in lock-step with it, alone) and kept in step-costs/costs.json (experiments/common/levers_costs.py).
# The steps a budget buys are then the same in every sitting and under any load, so a modelled series' baseline is
# reused by BASELINE=kept without a calibration, and runs need not be alone (the cost benchmark must be). JOBS=2 then
# runs two arms at once, each on nproc/JOBS threads (refused on the wall clock, where a run's speed is its result).
set -euo pipefail
source experiments/common/bench_settings.sh
OUT=$(realpath -m "$1"); WHICH=${2:-plan}
shift $(($# < 2 ? $# : 2))
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
# Both cores for every run, set rather than inherited: a run's speed is the lever's effect.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
BUDGET=${BUDGET:-20m}; SEEDS=${SEEDS:-2}; BLIMP_PAIRS=${BLIMP_PAIRS:-200}; BATCH=32
# smoke: a 60 s budget and a batch of 8, so that even on a busy machine, or with bf16 emulated (18x a step on a CPU
# without bf16 instructions), the first step of the widest arm (batch x 2) fits well inside the warm-up's 14% of it
# (8.4 s; a budget whose first step spends its warm-up is refused); the batch arms scale with it.
[[ $WHICH == smoke ]] && { BUDGET=60s; BATCH=8; }

# The fast recipe's mini schedule, laid out in time: its 300 warm-up steps and 500 steps of 16-token pieces are
# 14% and 23% of the steps a 20-minute `mini` run was predicted to buy before the search (README, "Prediction"),
# so the baseline is today's recipe at this length. Every arm keeps these fractions: under a budget, time is the unit.
WARMUP_FRACTION=0.14; SHORT_FRACTION=0.23
# ARM|SHARDS|FLAGS: SHARDS is base (8,192, 128 tokens), seq64 (the same text in 64-token sequences) or vocab16k.
# Heads keep mini's 64 dimensions each.
ARMS=(
    "baseline|base|"
    "shape-tiny|base|--set model.layers=2 --set model.hidden=128 --set model.heads=2"
    "shape-L4-H192|base|--set model.layers=4 --set model.hidden=192 --set model.heads=3"
    "shape-L6-H128|base|--set model.layers=6 --set model.hidden=128 --set model.heads=2"
    "shape-L8-H128|base|--set model.layers=8 --set model.hidden=128 --set model.heads=2"
    "mask-0.20|base|--set masking.mask_prob=0.2"
    "mask-0.30|base|--set masking.mask_prob=0.3"
    "mask-0.40|base|--set masking.mask_prob=0.4"
    "split-100-0-0|base|--set masking.replace_mask=1.0 --set masking.replace_random=0.0"
    "lr-1e-3|base|--set optim.lr=1e-3"
    "lr-4e-3|base|--set optim.lr=4e-3"
    "one-cycle|base|--set optim.warmup.fraction=0.5"
    "batch-16|base|--set train.batch_size=$((BATCH / 2))"
    "batch-64|base|--set train.batch_size=$((BATCH * 2))"
    "batch-ramp|base|--set train.batch_ramp.start=$((BATCH / 4)) --set train.batch_ramp.fraction=0.5"
    "seq-64|seq64|--set train.batch_size=$((BATCH * 2)) --set shard.max_seq_len=64"
    "vocab-16k|vocab16k|"
    "modern|base|--set model.block=modern"
    "bf16|base|--set train.precision=bf16"
)
# Arms whose step is the baseline's computation (only a learning rate or the value put at a masked position
# differs): under CLOCK=modelled they count the baseline's costs by construction, never a noisy measurement of the
# same thing (`costs` may still time one: its ratio is the method's noise, which should be 1).
# batch-ramp counts them too: its steps are the baseline's on fewer sequences, each counting its share b / B of
# the baseline's cost (train/batch_ramp.py, the proportional model).
SAME_STEP=" lr-1e-3 lr-4e-3 one-cycle split-100-0-0 batch-ramp "
# Architecture arms: their random-init BLiMP controls are their own; the others share the baseline's (same weights).
OWN_CONTROLS=" shape-tiny shape-L4-H192 shape-L6-H128 shape-L8-H128 vocab-16k modern "

KEPT=$(realpath -m "${LEVERS_KEPT:-experiments/hour-levers}")  # LEVERS_KEPT: another place, for the tests
case ${BASELINE:=run} in run | kept) ;; *) echo "BASELINE must be run or kept (got $BASELINE)" >&2; exit 2 ;; esac
case ${CLOCK:=wall} in wall | modelled) ;; *) echo "CLOCK must be wall or modelled (got $CLOCK)" >&2; exit 2 ;; esac
case ${JOBS:=1} in [1-9]) ;; *) echo "JOBS must be 1-9 (got $JOBS)" >&2; exit 2 ;; esac
((JOBS == 1)) || [[ $CLOCK == modelled ]] || { echo "JOBS=$JOBS needs CLOCK=modelled: on the wall clock runs must be alone" >&2; exit 2; }
THREADS=$(( JOBS > 1 ? ($(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1) : OMP_NUM_THREADS ))
COSTS=${LEVERS_COSTS:-$KEPT/step-costs/costs.json}  # the kept step costs (a smoke run keeps its own under OUT)
[[ $WHICH == smoke ]] && COSTS=${LEVERS_COSTS:-$OUT/costs.json}
source experiments/common/real_text_kinds.sh
RT=$REAL_TEXT; X5=$REAL_TEXT_X5; RT16=$REAL_TEXT_16K; X5_16=$REAL_TEXT_X5_16K
declare -A SHARDS=()
for kind in $REAL_TEXT_KINDS; do real_text_kind "$kind"; SHARDS[$kind]=$KIND_SHARDS; done
BLIMP=(--blimp ../shared/data/blimp --blimp-pairs "$BLIMP_PAIRS")
EVERY=500  # held-out evaluation and checkpoints every 500 steps: ~4 in a mini run, not counted in the budget
RUN=(--preset mini --recipe fast --set train.batch_size=$BATCH --set model.max_position=128 --set shard.max_seq_len=128
     --set train.eval_every=$EVERY --set train.eval_sequences=512 --set train.eval_pick=spread
     --set logging.log_every=50 --set logging.progress=false)

if [[ $WHICH == smoke ]]; then
    # The embedded synthetic language: a 1,024-token BPE stands for 8,192 and a 2,048-token one for 16,384; every
    # arm and every command as in the search, 1 BLiMP pair a paradigm.
    BLIMP=(--blimp ../shared/data/blimp --blimp-pairs 1); EVERY=5
    RUN=(--preset mini --recipe fast --set train.batch_size=$BATCH --set model.max_position=128 --set shard.max_seq_len=128
         --set train.eval_every=$EVERY --set train.eval_sequences=16 --set logging.log_every=5 --set logging.progress=false)
    S=$OUT/data
    declare -A SHARDS=([base]=$S/shards [seq64]=$S/shards-64 [vocab16k]=$S/shards-2048 [vocab16k-seq64]=$S/shards-2048-64)
fi
BUDGET_RUN=(--set "train.time_budget=$BUDGET" --set optim.warmup.steps=0 --set "optim.warmup.fraction=$WARMUP_FRACTION"
            --set train.short_seq.steps=0 --set "train.short_seq.fraction=$SHORT_FRACTION")

field() { local IFS='|'; read -r -a parts <<<"$1|"; echo "${parts[$2]}"; }  # field LINE INDEX of an ARMS line

# COMBINED="ARM ARM ...": one more arm, those levers together (the winners: README, "Choosing the hour recipe"),
# named combined-ARM+ARM...: their flags joined, on the one kind of shards among them other than `base`, if any. Two
# arms that set the same key (two shapes, two rates), an unknown arm, the baseline or a single arm are refused.
# Two levers compose where each is a factor of the baseline's (section G's amendment 4): 64-token sequences and the
# 16,384 vocabulary train on the 16,384 text in 64-token sequences, and the batch of `seq-64` (twice the sequences:
# the same tokens a step) times a batch arm's factor is the combination's (batch-64 with seq-64: 128 x 64). Its step
# cost is its own (`costs combined-...`); its BLiMP controls are its own when it changes the architecture; it counts
# the baseline's cost only when every part of it does.
combine() {  # ARM...: the ARMS line of their combination
    local want l line data kind=base flags=() keys=" " key value words i j seen=" " scaled=""
    (($# >= 2)) || { echo "COMBINED needs two arms or more (got: $*)" >&2; return 2; }
    for want in "$@"; do
        [[ $seen != *" $want "* ]] || { echo "COMBINED names $want twice" >&2; return 2; }
        seen+="$want "
        line=""
        for l in "${ARMS[@]:1}"; do [[ $(field "$l" 0) != "$want" ]] || line=$l; done
        [[ -n $line ]] || { echo "COMBINED: $want is not a lever arm" >&2; return 2; }
        data=$(field "$line" 1)
        if [[ $data != base && $kind != *"$data"* ]]; then
            case "$kind $data" in
                "base $data") kind=$data ;;
                "seq64 vocab16k" | "vocab16k seq64") kind=vocab16k-seq64 ;;
                *) echo "COMBINED: $want trains on $data shards, another arm on $kind" >&2; return 2 ;;
            esac
        fi
        read -r -a words <<<"$(field "$line" 2)"
        for ((i = 0; i < ${#words[@]}; i += 2)); do  # every arm flag is --set KEY=VALUE
            key=${words[i + 1]%%=*}; value=${words[i + 1]#*=}
            if [[ $keys == *" $key "* ]]; then
                # The one product allowed: seq-64's batch (tokens a step kept) and one batch arm's factor.
                [[ $key == train.batch_size && -z $scaled && ($want == seq-64 || $seen == *" seq-64 "*) ]] ||
                    { echo "COMBINED: two of $* set $key (one lever of each kind)" >&2; return 2; }
                for ((j = 1; j < ${#flags[@]}; j += 2)); do
                    [[ ${flags[j]%%=*} != "$key" ]] || flags[j]="$key=$((${flags[j]#*=} * value / BATCH))"
                done
                scaled=yes; continue
            fi
            keys+="$key "; flags+=("${words[i]}" "${words[i + 1]}")
        done
    done
    echo "combined-$(IFS=+; echo "$*")|$kind|${flags[*]}"
}
if [[ -n ${COMBINED:-} ]]; then
    line=$(combine $COMBINED) || exit 2
    ARMS+=("$line")
    same=yes
    for want in $COMBINED; do
        [[ $OWN_CONTROLS != *" $want "* || $OWN_CONTROLS == *" $(field "$line" 0) "* ]] || OWN_CONTROLS+="$(field "$line" 0) "
        [[ $SAME_STEP == *" $want "* ]] || same=no
    done
    [[ $same == no ]] || SAME_STEP+="$(field "$line" 0) "
fi

prepare() {  # KIND... (base, seq64, vocab16k, vocab16k-seq64; none: the first three): those arms' shards, built once
    local kinds=" ${*:-base seq64 vocab16k} "
    bash experiments/common/real_text_shards.sh "$RT"
    [[ -f $X5/shards/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare
    # The same training text in 64-token sequences (the same tokens, cut shorter; no new tokenizer).
    [[ $kinds != *" seq64 "* || -f $X5/shards-64/manifest.json ]] || "${mapnet[@]}" shard "$X5/prep" --out "$X5/shards-64" \
        --set shard.max_seq_len=64 --set shard.valid_fraction=0.01 --overwrite
    [[ $kinds == *" vocab16k"* ]] || return 0
    # 16,384: a BPE trained on the same text as the 8,192 one (section 2's), then the x5 inputs through it.
    bash experiments/common/real_text_shards.sh "$RT16" 16384
    if [[ ! -f $X5_16/shards/manifest.json ]]; then
        mapfile -t inputs < <(python3 -c 'import json, sys; print("\n".join(i["path"] for i in json.load(open(sys.argv[1]))["inputs"]))' \
            "$X5/prep/manifest.json")
        for f in "${inputs[@]}"; do  # the paths as the 8,192 preparation recorded them, from the repository root
            [[ -f $f ]] || { echo "$X5/prep names $f, which is not here: run from the repository root" >&2; exit 2; }
        done
        "${mapnet[@]}" preprocess "${inputs[@]}" --out "$X5_16/prep" --tokenizer "$RT16/prep/tokenizer.json" \
            --set preprocess.strip_gutenberg=true --overwrite
        "${mapnet[@]}" shard "$X5_16/prep" --out "$X5_16/shards" --set shard.max_seq_len=128 --set shard.valid_fraction=0.01 --overwrite
    fi
    [[ $kinds != *" vocab16k-seq64 "* || -f $X5_16/shards-64/manifest.json ]] || "${mapnet[@]}" shard "$X5_16/prep" \
        --out "$X5_16/shards-64" --set shard.max_seq_len=64 --set shard.valid_fraction=0.01 --overwrite
}

smoke_data() {
    [[ -f $S/shards-2048-64/manifest.json ]] && return
    "${mapnet[@]}" preprocess --recipe data_recipes/tiny.toml --out "$S/prep" --set synthetic.documents=300 --vocab-size 1024 --overwrite
    "${mapnet[@]}" shard "$S/prep" --out "$S/shards" --set shard.valid_fraction=0.1 --overwrite
    "${mapnet[@]}" shard "$S/prep" --out "$S/shards-64" --set shard.max_seq_len=64 --set shard.valid_fraction=0.1 --overwrite
    "${mapnet[@]}" preprocess --recipe data_recipes/tiny.toml --out "$S/prep-2048" --set synthetic.documents=300 --vocab-size 2048 --overwrite
    "${mapnet[@]}" shard "$S/prep-2048" --out "$S/shards-2048" --set shard.valid_fraction=0.1 --overwrite
    "${mapnet[@]}" shard "$S/prep-2048" --out "$S/shards-2048-64" --set shard.max_seq_len=64 --set shard.valid_fraction=0.1 --overwrite
}

run_arm() {  # LINE: one arm, its seeds in one `compare` folder (finished runs are reused; BLiMP is cached per run)
    local name data flags dest
    name=$(field "$1" 0); data=$(field "$1" 1); flags=$(field "$1" 2); dest=$OUT/arms/$name
    read -r -a flags <<<"$flags"
    if [[ $CLOCK == modelled ]]; then  # the arm's kept costs (refused when it has none: never a guess)
        local cost
        cost=$(uv run python experiments/common/levers_costs.py flags "$COSTS" "$(priced "$name")") || return 0
        read -r -a cost <<<"$cost"
        flags+=("${cost[@]}")
    fi
    mkdir -p "$dest"
    # The baseline's random-init controls are every same-architecture arm's (same seed, shape and init: same weights,
    # found by their hash in the cache), so they are scored once: from the baseline's folder, or (BASELINE=kept, no
    # baseline here) from any arm of the baseline's architecture that has them.
    if [[ $name != baseline && $OWN_CONTROLS != *" $name "* ]]; then
        local src from
        for src in "$OUT/arms/baseline/blimp-controls.json" "$OUT"/arms/*/blimp-controls.json; do
            from=$(basename "$(dirname "$src")")
            if [[ -f $src && $from != "$name" && $OWN_CONTROLS != *" $from "* ]]; then cp -n "$src" "$dest/"; break; fi
        done
    fi
    echo -e "$name\tstart\t$(date -u +%FT%TZ)\t$(cut -d' ' -f1-3 /proc/loadavg)\t$(nproc)" >> "$OUT/load.tsv"
    # Appended: a search stopped and rerun resumes its runs, and the log keeps what each start did.
    echo "== $(date -u +%FT%TZ): start" >> "$OUT/$name.log"
    local rc=0
    OMP_NUM_THREADS=$THREADS "${mapnet[@]}" compare "${SHARDS[$data]}" --out "$dest" --strategies uniform --seeds "$SEEDS" "${RUN[@]}" \
        "${BUDGET_RUN[@]}" "${flags[@]}" "${BLIMP[@]}" >> "$OUT/$name.log" 2>&1 || rc=$?
    echo -e "$name\tend\t$(date -u +%FT%TZ)\t$(cut -d' ' -f1-3 /proc/loadavg)\t$(nproc)\trc=$rc" >> "$OUT/load.tsv"
    # One arm that fails (a lever a later change refuses) costs its own runs, not the night's: say so and go on.
    ((rc == 0)) || echo "arm $name failed (exit $rc): $OUT/$name.log" >&2
    return 0
}

chosen() {  # the ARMS lines of the names given, in the order given, each once (all when none; the baseline first,
    # unless BASELINE=kept)
    local line want seen=" "
    [[ $BASELINE == kept ]] || echo "${ARMS[0]}"
    (($# > 0)) || set -- $(for line in "${ARMS[@]:1}"; do field "$line" 0; done)
    for want in "$@"; do
        [[ $seen == *" $want "* ]] && continue
        seen+="$want "
        for line in "${ARMS[@]:1}"; do [[ $(field "$line" 0) == "$want" ]] && echo "$line"; done
    done
}

kill_tree() {  # PID: it and every process under it
    local child
    for child in $(pgrep -P "$1"); do kill_tree "$child"; done
    kill "$1" 2>/dev/null || true
}

known_arms() {  # NAME...: exit 2 naming the first that is not an arm
    local line known=" "
    for line in "${ARMS[@]}"; do known+="$(field "$line" 0) "; done
    for line in "$@"; do [[ $known == *" $line "* ]] || { echo "unknown arm $line (arms:$known)" >&2; exit 2; }; done
}

priced() {  # NAME: the arm whose kept costs NAME counts (the baseline's for a SAME_STEP arm)
    if [[ $SAME_STEP == *" $1 "* ]]; then echo baseline; else echo "$1"; fi
}

search() {  # ARM names (none: all)
    local line lines
    known_arms "$@"
    if [[ $CLOCK == modelled ]]; then  # every chosen arm's costs before the first run: none is skipped halfway
        mapfile -t lines < <(chosen "$@")
        for line in "${lines[@]}"; do
            uv run python experiments/common/levers_costs.py flags "$COSTS" "$(priced "$(field "$line" 0)")" > /dev/null || exit 2
        done
    fi
    mkdir -p "$OUT"
    load1=$(cut -d' ' -f1 /proc/loadavg)
    if [[ $CLOCK == wall ]] && awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
        echo "warning: load average $load1 before the search: another process shares the cores, so each run's" \
             "budget buys fewer steps than alone (the load is recorded in $OUT/load.tsv)" >&2
    fi
    calibrate
    if [[ $BASELINE == kept ]]; then
        local series
        series=$(latest_series)
        [[ -f $series/baseline.json ]] || { echo "BASELINE=kept, but no kept series has a baseline ($KEPT/results)" >&2; exit 2; }
        if [[ $CLOCK == modelled ]]; then  # the same modelled clock, not the same machine speed, makes them comparable
            uv run python experiments/common/levers_costs.py check "$COSTS" "$series/baseline.json" || exit 1
        elif grep -q '"clock": "modelled"' "$series/baseline.json"; then
            echo "the newest kept series ($series) ran on the modelled clock: run these arms with CLOCK=modelled" >&2; exit 1
        else
            uv run python experiments/common/levers_calibration.py check "$OUT/load.tsv" \
                "$KEPT/logs/$(basename "$series")/load.tsv" || exit 1
        fi
    fi
    mapfile -t lines < <(chosen "$@")
    # Background jobs of a script ignore Ctrl-C: stop them, and the runs under them, with it (a rerun resumes them).
    ((JOBS == 1)) || trap 'for p in $(jobs -p); do kill_tree "$p"; done; exit 130' INT TERM
    for line in "${lines[@]}"; do
        if ((JOBS == 1)); then run_arm "$line"; continue; fi
        while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
        run_arm "$line" &
    done
    wait
}

calibrate() {  # this machine's speed: the median `mini` `fast` uniform step on the base shards, into OUT/load.tsv
    local ms
    mkdir -p "$OUT"
    ms=$(uv run python benchmarks/bench_strategies.py --data "${SHARDS[base]}" --recipe fast --presets mini --arms uniform \
        --batch "$BATCH" --steps 20 --warmup 3 | awk '$1 == "uniform" { print $2 }')
    [[ -n $ms ]] || { echo "calibration: benchmarks/bench_strategies.py gave no step time" >&2; exit 1; }
    uv run python experiments/common/levers_calibration.py record "$OUT/load.tsv" "$ms" "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"
}

costs() {  # ARM names (none: all): their step costs beside the baseline's, alone, merged into the kept costs
    local line lines name data flags reference bench=() common i
    mapfile -t lines < <(BASELINE=run chosen "$@")
    # The run's settings without the budget's (the benchmark makes each run a budget of its own, costs 1 s a step)
    common=$(bench_settings "${RUN[@]}") || exit 2
    mapfile -t common <<<"$common"
    common+=(masking.strategy=uniform)
    for line in "${lines[@]}"; do
        name=$(field "$line" 0); data=$(field "$line" 1); flags=$(field "$line" 2)
        bench+=(--arm "$name" "${SHARDS[$data]}")
        read -r -a flags <<<"$flags"
        for ((i = 0; i < ${#flags[@]}; i += 2)); do bench+=("${flags[i + 1]}"); done  # every arm flag is --set K=V
    done
    local rc=0
    reference=$(uv run python experiments/common/levers_costs.py reference "$COSTS") || rc=$?
    ((rc == 0 || rc == 3)) || exit 1  # 3: nothing kept yet (the first measurement pins the baseline's costs)
    mkdir -p "$OUT"
    echo -e "costs\tstart\t$(date -u +%FT%TZ)\t$(cut -d' ' -f1-3 /proc/loadavg)\t$(nproc)" >> "$OUT/load.tsv"
    uv run python benchmarks/step_costs.py --out "$OUT/step-costs.json" --common "${common[@]}" "${bench[@]}" \
        ${reference:+--reference $reference} ${COST_STEPS:+--steps $COST_STEPS --skip 1} ${COST_ROUNDS:+--rounds $COST_ROUNDS} \
        | tee "$OUT/step-costs.log"
    echo -e "costs\tend\t$(date -u +%FT%TZ)\t$(cut -d' ' -f1-3 /proc/loadavg)\t$(nproc)" >> "$OUT/load.tsv"
    uv run python experiments/common/levers_costs.py merge "$COSTS" "$OUT/step-costs.json" ${ACROSS_CPUS:+--across-cpus}
    cp "$OUT/step-costs.json" "$(dirname "$COSTS")/bench-$(date -u +%Y%m%dT%H%M%SZ).json"  # the raw measurement, kept
}

latest_series() {  # the newest kept series folder (exits when none is kept)
    uv run python experiments/common/levers_series.py latest "$KEPT/results" || exit 2
}

plan() {
    local n=${#ARMS[@]} own
    own=$(wc -w <<<"$OWN_CONTROLS")
    echo "budget $BUDGET of training time per run, $SEEDS seeds, BLiMP ${BLIMP[*]:1}"
    echo "baseline: compare SHARDS --strategies uniform --seeds $SEEDS ${RUN[*]} ${BUDGET_RUN[*]}"
    printf '%-15s %-9s %s\n' ARM SHARDS FLAGS
    for line in "${ARMS[@]}"; do printf '%-15s %-9s %s\n' "$(field "$line" 0)" "$(field "$line" 1)" "$(field "$line" 2)"; done
    if [[ $CLOCK == modelled ]]; then  # the steps each arm's budget buys are known before it runs
        echo "CLOCK=modelled, JOBS=$JOBS ($THREADS thread(s) a run): the kept costs ($COSTS) and what 20 minutes buy:"
        uv run python experiments/common/levers_costs.py table "$COSTS" || exit 1
        echo "(the wall time below is for runs alone, one at a time; beside other work a modelled run takes longer, and buys the same)"
    fi
    # Per run: the budget, plus ~1 min of what it does not count (start, ~4 evaluations of 512 sequences, checkpoints)
    # and ~2 min of BLiMP at 9,000 pairs (a mini forward pass per masked token; blimp-arms measured 12 s for 4,500
    # pairs at tiny, a mini step costs ~4.7x tiny's); plus 2 random-init controls per architecture (baseline included).
    python3 - "$n" "$SEEDS" "$BUDGET" "$own" <<'EOF'
import re, sys
arms, seeds, own = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[4])
h, m, s = (float(x or 0) for x in re.fullmatch(r"(?:([\d.]+)h)?(?:([\d.]+)m)?(?:([\d.]+)s)?", sys.argv[3]).groups())
budget = 60 * h + m + s / 60
runs = arms * seeds
minutes = runs * (budget + 1 + 2) + (own + 1) * seeds * 2
print(f"{arms} arms x {seeds} seeds = {runs} runs, one after another: ~{minutes:.0f} min (~{minutes / 60:.1f} h) "
      f"alone on 2 cores, after `prepare` (the 16,384 tokenizer and shards: ~30-60 min once, the 8,192 ones if absent)")
if budget == 20 and seeds == 2:  # compare keeps every evaluated checkpoint of a budget run (weights and Adam state)
    print("disk: ~11 GB under OUT (a checkpoint every 500 steps: ~64 MB each at mini, 20 of them per tiny run)")
EOF
}

case $WHICH in
    plan) plan ;;
    prepare)  # KIND... (none: base, seq64, vocab16k)
        for kind in "$@"; do
            [[ -n ${SHARDS[$kind]:-} ]] || { echo "unknown shards $kind (base, seq64, vocab16k, vocab16k-seq64)" >&2; exit 2; }
        done
        prepare "$@" ;;
    search)  # only the shards the chosen arms train on (the 16,384 ones take ~30-60 min to build)
        mapfile -t lines < <(chosen "$@")
        kinds=(); for line in "${lines[@]}"; do kinds+=("$(field "$line" 1)"); done
        prepare base "${kinds[@]}"; search "$@" ;;  # base: the calibration's shards
    calibrate) prepare base; calibrate ;;
    costs)
        known_arms "$@"
        mapfile -t lines < <(BASELINE=run chosen "$@")
        kinds=(); for line in "${lines[@]}"; do kinds+=("$(field "$line" 1)"); done
        prepare base "${kinds[@]}"; costs "$@" ;;
    table)  # with BASELINE=kept: the kept arms, and this sitting's over them
        folders=("$OUT/arms")
        if [[ $BASELINE == kept ]]; then series=$(latest_series); folders=("$series" "$OUT/arms"); fi
        uv run python experiments/common/levers_table.py "${folders[@]}" | tee "$OUT/table.md" ;;
    keep)
        # The series: the kept one whose baseline is this sitting's (the same runs), else a new one; with no baseline
        # here (BASELINE=kept) the newest, whose baseline the arms were paired with.
        if [[ -f $OUT/arms/baseline/results.json ]]; then
            series=$(uv run python experiments/common/levers_series.py where "$OUT/arms/baseline/results.json" "$KEPT/results")
        else
            series=$(latest_series)
        fi
        logs=$KEPT/logs/$(basename "$series")
        mkdir -p "$series" "$logs"
        for f in "$OUT"/arms/*/results.json; do  # finished arms only, each with its log (a running arm's is partial)
            arm=$(basename "$(dirname "$f")")
            cp "$f" "$series/$arm.json"
            [[ ! -f $OUT/$arm.log ]] || cp "$OUT/$arm.log" "$logs/"
        done
        [[ ! -f $OUT/step-costs.log ]] || cp "$OUT/step-costs.log" "$logs/"
        # load.tsv: every sitting's lines of the series, calibrations included, each once and in order
        touch "$logs/load.tsv"
        cat "$logs/load.tsv" "$OUT/load.tsv" | awk '!seen[$0]++' > "$logs/load.tsv.new"
        mv "$logs/load.tsv.new" "$logs/load.tsv"
        echo "kept in $series and $logs" ;;
    smoke)
        smoke_data
        [[ $CLOCK == modelled ]] && COST_STEPS=${COST_STEPS:-4} COST_ROUNDS=${COST_ROUNDS:-1} costs "$@"
        search "$@"
        uv run python experiments/common/levers_table.py "$OUT/arms" | tee "$OUT/table.md" ;;
    *) echo "unknown mode $WHICH (plan, prepare, calibrate, costs, search, table, keep, smoke)" >&2; exit 2 ;;
esac
