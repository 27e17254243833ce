# Two-lane `compare` training and the smoke data, sourced by the experiments/ scripts that use it: each lane is one
# `compare` process of one thread over its own arms, in its own folder; `gather` then moves the
# finished runs into one comparison folder, where a last `compare` over every arm reuses them all (it
# retrains nothing: it checks each run's recorded settings). A lane's logged s/step are not idle step
# costs (two runs share the machine). Needs the caller's `mapnet` array (the command to run).

lane() {  # OUT NAME SHARDS ARMS COMPARE-ARGS...
    local out=$1 name=$2 shards=$3 arms=$4
    shift 4
    OMP_NUM_THREADS=1 "${mapnet[@]}" compare "$shards" --out "$out/lane-$name" --strategies "$arms" "$@" \
        > "$out/lane-$name.log" 2>&1
}

gather() {  # OUT DEST: every lane-*/runs/ARM of OUT into DEST/runs (an ARM already there is kept)
    local out=$1 dest=$2 arm
    mkdir -p "$dest/runs"
    for arm in "$out"/lane-*/runs/*; do
        [[ -e $arm ]] || continue  # no lane, or every lane already gathered: the pattern matched nothing
        [[ -e $dest/runs/$(basename "$arm") ]] || mv "$arm" "$dest/runs/"
    done
}

# The smoke modes' data: the embedded synthetic corpus, small, with a PMI vocabulary; SMOKE_RUN is a few
# steps of a small batch (the caller adds --steps and --seeds).
SMOKE_RUN=(--config data_recipes/tiny.toml --set train.eval_every=2 --set train.eval_sequences=16 --set train.batch_size=8
           --set optim.warmup_steps=1 --set train.short_seq_steps=2)

smoke_shards() {  # OUT: OUT/prep and OUT/shards (with OUT/shards/pmi.tsv)
    "${mapnet[@]}" preprocess --recipe data_recipes/tiny.toml --out "$1/prep" --set synthetic.documents=300 --overwrite
    "${mapnet[@]}" shard "$1/prep" --out "$1/shards" --set shard.valid_fraction=0.1 --overwrite
    "${mapnet[@]}" pmi-vocab "$1/prep" --out "$1/shards/pmi.tsv" --min-count 3 --no-progress
}
