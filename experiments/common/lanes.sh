# Lanes of `compare` training (`lane`: a fixed deal of arms; `queue_lanes`: one queue of runs) and the smoke data,
# sourced by the experiments/ scripts that use it: each lane runs `compare` in one thread, in its own folder;
# `gather` then moves the finished runs into one comparison folder, where a last `compare` over every arm reuses
# them all (it retrains nothing: it checks each run's recorded settings). A lane's logged s/step are not idle step
# costs (the lanes share the machine). Needs the caller's `mapnet` array (the command to run).

lane() {  # OUT NAME SHARDS ARMS COMPARE-ARGS...
    local out=$1 name=$2 shards=$3 arms=$4
    shift 4
    OMP_NUM_THREADS=1 "${mapnet[@]}" compare "$shards" --out "$out/lane-$name" --strategies "$arms" "$@" \
        > "$out/lane-$name.log" 2>&1
}

gather() {  # OUT DEST: every run lane-*/runs/ARM/seed-K of OUT into DEST/runs (a run already there is kept)
    local out=$1 dest=$2 run rel
    for run in "$out"/lane-*/runs/*/seed-*; do
        # No lane, or every lane already gathered: the pattern matched nothing. A link is a queue lane's view of
        # another lane's run (queue_lanes), not a run.
        [[ -d $run && ! -L $run ]] || continue
        rel=${run#"$out"/lane-*/runs/}
        [[ -e $dest/runs/$rel ]] && continue
        mkdir -p "$(dirname "$dest/runs/$rel")"
        mv "$run" "$dest/runs/$rel"
    done
}

# The lanes' queue: the runs (ARM, seed K) taken in compare's order (seed-major) by whichever lane is free,
# instead of dealt to a lane in advance, so an unequal number of arms per lane (5 arms: 3 against 2) no longer
# leaves one lane idle for a third of the work. LANES (default 2) one-thread lanes, named a, b, c, ...: on 2 cores a
# third lane trades a little speed per run for no core left idle at the end, when fewer runs are left than lanes. A
# unit is one `compare --strategies ARM --seeds K+1` in the lane's folder, where seeds 0..K-1 of ARM are links to
# their finished runs (compare reuses them: it trains only seed K).
# A run belongs to the lane whose folder holds it: a lane resumes its own stopped run before it takes a new one, and
# never takes another lane's (so a stopped run waits for its own lane: restart with the same LANES); a new run is
# claimed with an atomic mkdir in OUT/claims. A lane ends when no run is left that it may take (the rest finished,
# or held by another lane, or waiting for an earlier seed of its arm that another lane trains); queue_lanes then
# checks that every run finished.

run_finished() { grep -q '"finished": true' "$1/run.json" 2>/dev/null; }  # RUN: a budget run's run.json says so

run_home() {  # OUT ARM K: the folder that holds run ARM/seed-K under OUT (any OUT/*/runs, links skipped), or nothing
    local d
    for d in "$1"/*/runs/"$2"/seed-"$3"; do [[ -d $d && ! -L $d ]] && { echo "$d"; return; }; done
    return 0  # none: not an error (set -e)
}

earlier_seeds_finished() {  # OUT ARM K: seeds 0..K-1 of ARM all finished (compare would train one that is not)
    local j home
    for ((j = 0; j < $3; j++)); do home=$(run_home "$1" "$2" "$j"); run_finished "${home:-/nonexistent}" || return 1; done
}

queue_next() {  # OUT NAME SEEDS ARM...: the next run the lane takes, as "ARM K", claimed; nothing when none is left
    local out=$1 name=$2 seeds=$3 arm k home
    shift 3
    for ((k = 0; k < seeds; k++)); do  # its own stopped run first
        for arm in "$@"; do
            home=$(run_home "$out" "$arm" "$k")
            # Claimed too: compare deletes a run folder with no checkpoint before it starts it again, and the
            # other lane must not take the run then.
            [[ $home == "$out/lane-$name/runs/$arm/seed-$k" ]] && ! run_finished "$home" \
                && earlier_seeds_finished "$out" "$arm" "$k" && mkdir -p "$out/claims/$arm.seed-$k" \
                && { echo "$arm $k"; return; }
        done
    done
    for ((k = 0; k < seeds; k++)); do
        for arm in "$@"; do
            [[ -z $(run_home "$out" "$arm" "$k") ]] || continue  # finished, or another lane's
            earlier_seeds_finished "$out" "$arm" "$k" || continue
            mkdir "$out/claims/$arm.seed-$k" 2>/dev/null || continue  # the other lane took it first
            echo "$arm $k"; return
        done
    done
    return 0  # none left: not an error (set -e)
}

queue_lane() {  # OUT NAME SHARDS SEEDS ARMS COMPARE-ARGS... (ARMS a comma list; COMPARE-ARGS without --seeds)
    local out=$1 name=$2 shards=$3 seeds=$4 arms unit arm k j home link
    IFS=, read -r -a arms <<<"$5"
    shift 5
    while unit=$(queue_next "$out" "$name" "$seeds" "${arms[@]}") && [[ -n $unit ]]; do
        read -r arm k <<<"$unit"
        for ((j = 0; j < k; j++)); do  # the earlier seeds, for compare to reuse
            link=$out/lane-$name/runs/$arm/seed-$j home=$(run_home "$out" "$arm" "$j")
            [[ $home == "$link" || ( -L $link && $(readlink "$link") == "$home" ) ]] && continue  # its own, or linked
            rm -f "$link" && mkdir -p "$(dirname "$link")" && ln -s "$home" "$link" || return
        done
        echo "== $(date -u +%FT%TZ) lane $name: $arm seed $k" >> "$out/lane-$name.log"
        OMP_NUM_THREADS=1 "${mapnet[@]}" compare "$shards" --out "$out/lane-$name" --strategies "$arm" \
            --seeds $((k + 1)) "$@" >> "$out/lane-$name.log" 2>&1 || return
    done
}

queue_lanes() {  # OUT SHARDS SEEDS ARMS COMPARE-ARGS...: LANES lanes over one queue; fails unless every run finished
    local out=$1 shards=$2 seeds=$3 arms=$4 rc=0 arm k i name left=() pids=() names=() letters=abcdefghi
    shift 4
    [[ ${LANES:-2} =~ ^[1-9]$ ]] || { echo "LANES must be 1 to 9 (got ${LANES})" >&2; return 2; }
    rm -rf "$out/claims"; mkdir -p "$out/claims"  # a claim lives as long as the lanes that made it
    for ((i = 0; i < ${LANES:-2}; i++)); do
        name=${letters:i:1}
        queue_lane "$out" "$name" "$shards" "$seeds" "$arms" "$@" & pids+=($!); names+=("$out/lane-$name.log")
    done
    for i in "${!pids[@]}"; do wait "${pids[$i]}" || rc=$?; done
    ((rc == 0)) || { echo "a lane failed (exit $rc): ${names[*]}" >&2; return 1; }
    local all; IFS=, read -r -a all <<<"$arms"
    for ((k = 0; k < seeds; k++)); do
        for arm in "${all[@]}"; do run_finished "$(run_home "$out" "$arm" "$k")" || left+=("$arm/seed-$k"); done
    done
    ((${#left[@]} == 0)) || { echo "the lanes ended with runs unfinished (${left[*]}): run the stage again" >&2; return 1; }
}

# The smoke modes' data: the embedded synthetic corpus, small, with a PMI vocabulary; SMOKE_RUN is a few
# steps of a small batch (the caller adds --steps and --seeds).
SMOKE_RUN=(--config data_recipes/tiny.toml --set train.eval_every=2 --set train.eval_sequences=16 --set train.batch_size=8
           --set optim.warmup.steps=1 --set train.short_seq.steps=2)

smoke_shards() {  # OUT: OUT/prep and OUT/shards (with OUT/shards/pmi.tsv)
    "${mapnet[@]}" preprocess --recipe data_recipes/tiny.toml --out "$1/prep" --set synthetic.documents=300 --overwrite
    "${mapnet[@]}" shard "$1/prep" --out "$1/shards" --set shard.valid_fraction=0.1 --overwrite
    "${mapnet[@]}" pmi-vocab "$1/prep" --out "$1/shards/pmi.tsv" --min-count 3 --no-progress
}
