# The run flags of the hour recipe's experiment scripts (sections H to K: hour_cpu.sh, masking_cpu.sh,
# syntax_cpu.sh, wall_cpu.sh) and their smokes' data, kept in one place so that one section's arms train exactly as
# another's did: a flag changed here changes every section that compares against the recipe. Sourced; it defines
# functions and sets nothing until one is called.

# hour_run_flags SEQ HELDOUT: HOUR_RUN, what every hour-family run adds to its recipe. A position table of 128 (the
# short-sequence phase and the 64-token shards fit it), the shards' sequence length SEQ, 512 held-out sequences
# spread over the shards' validation split, a log line every 50 steps and no progress bar (the logs are kept), and
# the held-out books and wiki of the shards' tokenizer (HELDOUT/heldout-books, HELDOUT/heldout-wiki).
hour_run_flags() {
    local seq=$1 heldout=$2
    HOUR_RUN=(--set model.max_position=128 --set "shard.max_seq_len=$seq" --set train.eval_sequences=512
              --set train.eval_pick=spread --set logging.log_every=50 --set logging.progress=false
              --set "train.extra_eval=[\"books=$heldout/heldout-books\", \"wiki=$heldout/heldout-wiki\"]")
}

# smoke_run_flags BATCH [RECIPE [PRESET]]: SMOKE_RUN, a smoke's run on the synthetic language (`tiny` `fast` unless
# said): seconds a stage, to show every stage and table works, never a measurement.
smoke_run_flags() {
    SMOKE_RUN=(--recipe "${2:-fast}" --preset "${3:-tiny}" --set "train.batch_size=$1" --set train.eval_sequences=16
               --set logging.log_every=5 --set logging.progress=false)
}

# synthetic_shards PREP SHARDS: the embedded synthetic language preprocessed into PREP (a 1,024-token BPE) and
# sharded into SHARDS with a tenth held out, unless SHARDS is already there. Needs the caller's `mapnet` array.
synthetic_shards() {
    local prep=$1 shards=$2
    [[ -f $shards/manifest.json ]] && return
    "${mapnet[@]}" preprocess --recipe data_recipes/tiny.toml --out "$prep" --set synthetic.documents=300 \
        --vocab-size 1024 --overwrite
    "${mapnet[@]}" shard "$prep" --out "$shards" --set shard.valid_fraction=0.1 --overwrite
}
