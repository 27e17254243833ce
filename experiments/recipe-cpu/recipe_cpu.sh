#!/usr/bin/env bash
# Does the trainer learn? (docs/results.md, section 0): time to leave the MLM unigram plateau on the
# 2-core CPU for the `fast` recipe, the paper's settings and the Hugging Face reference's settings, and
# what each part of the recipe buys (one part changed at a time). Real text: the 18M-token shards of
# RESULTS 4c (every 5th Gutenberg book and Wikipedia file, 8,192-token BPE), held-out books and
# Wikipedia as in section 2. Batch 32 x 128 tokens; evaluation every 250 steps on 512 sequences of each
# set, all-[MASK] masks (train.eval_replace = "mask"), the unigram level printed beside every loss.
#
#   bash experiments/recipe-cpu/recipe_cpu.sh OUT tiny [ARM ...]    # ~1 h with JOBS=2 (one thread per run)
#   bash experiments/recipe-cpu/recipe_cpu.sh OUT mini [ARM ...]    # fast arms ~17 min; hf/paper arms ~50 min each
#   uv run python experiments/recipe-cpu/recipe_table.py OUT/tiny   # the tables of RESULTS 0
#
# ARM names a subset (default: every arm of the size). Runs are independent `mapnet pretrain` commands,
# JOBS at a time (default 2, OMP_NUM_THREADS=1 each); a finished run (its final checkpoint) is kept.
# Wall times in the logs are NOT the idle times RESULTS quotes: two runs share the machine. RESULTS
# converts steps to minutes with the idle step times that experiments/recipe-cpu/recipe_timing.sh measures.
set -uo pipefail
OUT=$(realpath -m "$1"); SIZE=${2:-tiny}; shift 2 || true
JOBS=${JOBS:-2}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
RT=$(realpath -m runs/real-text); X5=$(realpath -m runs/real-text-x5)
bash experiments/common/real_text_shards.sh "$RT" || exit 1
[[ -f $X5/shards/manifest.json ]] || bash experiments/common/gpu_downstream.sh prepare || exit 1
mkdir -p "$OUT/$SIZE"

COMMON=(--preset "$SIZE" --set train.batch_size=32 --set model.max_position=128 --set shard.max_seq_len=128
        --set train.eval_every=250 --set train.eval_sequences=512 --set train.eval_pick=spread
        --set train.checkpoint_every=0 --set "train.keep_steps=[]" --set logging.log_every=50 --set logging.progress=false
        --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]")
# The Hugging Face reference's settings (hf_mlm_reference.py, the table of the "learns" issue): post-LN
# BERT, dropout 0.1, AdamW eps 1e-6, clipping at 1.0, Bernoulli 15% masking; its higher rate 1.5e-3.
HF=(--recipe paper --set optim.lr=1.5e-3 --set optim.warmup.steps=300 --set optim.grad_clip=1.0
    --set masking.mask_count=bernoulli)
# The paper's settings; its warm-up is 1% of its 1M steps, here 1% of the run (schedule shortened).
PAPER=(--recipe paper --set optim.warmup.steps=30)

declare -A ARMS
if [[ $SIZE == tiny ]]; then
    LONG=3000  # ~6.5 min of idle 2-core time at ~0.13 s/step: four times the recipe's time to leave the plateau
    ARMS=(
        [fast-s0]="1500 0 --recipe fast"
        [fast-s1]="1500 1 --recipe fast"
        [fast-1000]="1000 0 --recipe fast"  # the ablations' baseline: the same 1,000-step schedule
        [fast-postln]="1000 0 --recipe fast --set model.norm=post"
        [fast-no-warmup-pieces]="1000 0 --recipe fast --set train.short_seq.len=0 --set train.short_seq.steps=0"
        [fast-dropout]="1000 0 --recipe fast --set model.dropout=0.1 --set model.attention_dropout=0.1"
        [fast-noclip]="1000 0 --recipe fast --set optim.grad_clip=0"
        [fast-lr1e-3]="1000 0 --recipe fast --set optim.lr=1e-3"
        [fast-lr4e-3]="1000 0 --recipe fast --set optim.lr=4e-3"
        [fast-mask0.3]="1000 0 --recipe fast --mask-prob 0.3"
        [fast-batch64]="500 0 --recipe fast --set train.batch_size=64 --set train.short_seq.steps=250 --set optim.warmup.steps=150"
        [fast-batch16]="2000 0 --recipe fast --set train.batch_size=16 --set train.short_seq.steps=1000 --set optim.warmup.steps=600"
        [hf-s0]="$LONG 0 ${HF[*]}"
        [hf-s1]="$LONG 1 ${HF[*]}"
        [paper-s0]="$LONG 0 ${PAPER[*]}"
        [paper-s1]="$LONG 1 ${PAPER[*]}"
    )
else
    ARMS=(
        [fast-s0]="1000 0 --recipe fast"
        [fast-s1]="1000 1 --recipe fast"
        [hf-s0]="3000 0 ${HF[*]}"
        [hf-s1]="3000 1 ${HF[*]}"
        [paper-s0]="3000 0 ${PAPER[*]} --set optim.warmup.steps=30"
        [paper-s1]="3000 1 ${PAPER[*]} --set optim.warmup.steps=30"
    )
fi

run_arm() {  # NAME: one pretrain run, skipped when its final checkpoint exists
    local name=$1 run="$OUT/$SIZE/$1"
    read -r -a spec <<<"${ARMS[$name]}"
    local steps=${spec[0]} seed=${spec[1]}
    if [[ -d $run/checkpoints/step-$(printf %08d "$steps") ]]; then echo "kept: $name"; return 0; fi
    rm -rf "$run"
    echo "start: $name ($(date -u +%H:%M:%S))"
    OMP_NUM_THREADS=$((JOBS > 1 ? 1 : 2)) "${mapnet[@]}" pretrain "$X5/shards" --out "$run" "${COMMON[@]}" \
        --steps "$steps" --seed "$seed" "${spec[@]:2}" > "$OUT/$SIZE/$name.log" 2>&1
    echo "done: $name, exit $? ($(date -u +%H:%M:%S))"
}

names=("$@")
[[ ${#names[@]} -gt 0 ]] || mapfile -t names < <(printf '%s\n' "${!ARMS[@]}" | sort)
for name in "${names[@]}"; do
    [[ -n ${ARMS[$name]:-} ]] || { echo "unknown arm $name (known: ${!ARMS[*]})"; exit 2; }
    while (( $(jobs -rp | wc -l) >= JOBS )); do wait -n; done
    run_arm "$name" &
done
wait
