#!/usr/bin/env bash
# Issue 46 in one device call of at most 9 minutes (50 + 230 + 20 + 2 x 55 + 70 s by the stages' limits) on one H100 or H200 (each stage has its own time limit, so
# one that hangs or fails leaves the others' figures): the ceiling of a `base` step (its FLOPs and bytes
# counted, its own matrix products and attention timed, the floor, which SDPA kernel runs), each candidate
# change on and off with its prediction (optim.impl, compile scope and modes, CUDA graphs, a vocabulary padded
# to 64, a larger micro-batch) beside Hugging Face's BertForMaskedLM eager and compiled, train.prefetch off and
# on in the real loop, and every learned masking arm's step cost against uniform. base, 128 tokens, bf16.
#
#   bash experiments/gpu-h100/gpu_step.sh prepare            # here, once: shards + tomli_w for the device (~3 min)
#   bash experiments/gpu-h100/gpu_step.sh smoke OUT          # here: the CPU smoke, tiny shapes, every stage and arm
#   bash experiments/gpu-h100/gpu_step.sh run OUT            # on the device (README.md has the exact `run` call)
#
# What travels (git-ignored, named in `carry`): runs/gpu-step/shards (real text: 11 Gutenberg books and one
# Wikipedia file, 1.3M tokens of 128-token sequences, a 32,768 BPE vocabulary, 5 MB) and .gpu/site (tomli_w,
# which the settings tree imports and the device image lacks; torch and transformers are in the image).
set -uo pipefail
MODE=$1
SHARDS=runs/gpu-step/shards
SITE=.gpu/site
if [[ $MODE == prepare ]]; then
    set -e
    if [[ ! -f $SHARDS/manifest.json ]]; then
        G=../shared/data/gutenberg
        W=../shared/data/wiki-articles/enwiki-2015-wikiextractor
        mapfile -t BOOKS < <(ls "$G"/*.txt.gz | awk 'NR % 50 == 3')
        uv run mapnet preprocess "${BOOKS[@]}" "$W/AA_wiki_00.txt.gz" --out runs/gpu-step/prep --vocab-size 32768 \
            --set preprocess.strip_gutenberg=true --overwrite
        uv run mapnet shard runs/gpu-step/prep --out "$SHARDS" --set shard.max_seq_len=128 \
            --set shard.valid_fraction=0.01 --overwrite
    fi
    # tomli_w is pure Python: its package folder from this environment is all the device needs.
    mkdir -p "$SITE"
    rm -rf "$SITE/tomli_w"
    cp -r "$(uv run python -c 'import tomli_w, os; print(os.path.dirname(tomli_w.__file__))')" "$SITE/tomli_w"
    du -sh "$SHARDS" "$SITE"
    exit 0
fi
OUT=$(realpath -m "$2")
mkdir -p "$OUT"
stage() { echo; echo "=== $1 ($(date -u +%H:%M:%S), $SECONDS s in)"; }
if [[ $MODE == run ]]; then
    export PYTHONPATH=$PWD:$PWD/$SITE${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
    py=(python3)
    DEV=(--device cuda)
    CEIL=(); VAR=(--budget 190); PRE=base; BATCH=128; PSTEPS=20; PWARM=4; STEPS=8; WARM=2
    L_CEIL=50; L_VAR=230; L_PRE=55; L_ARMS=70
elif [[ $MODE == smoke ]]; then  # every stage, arm and flag of the run, at a size the CPU runs
    py=(uv run python)
    DEV=(--device cpu)
    CEIL=(--smoke); VAR=(--smoke --budget 0); PRE=tiny; BATCH=8; PSTEPS=2; PWARM=1; STEPS=4; WARM=1
    L_CEIL=900; L_VAR=3000; L_PRE=600; L_ARMS=900
else
    echo "usage: gpu_step.sh prepare | smoke OUT | run OUT" >&2
    exit 2
fi
[[ -f $SHARDS/manifest.json ]] || { echo "no $SHARDS: run 'gpu_step.sh prepare' here first" >&2; exit 2; }

stage "device"
[[ $MODE == run ]] && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
"${py[@]}" -c "import torch, transformers; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'transformers', transformers.__version__)"

# The ceiling times no mapnet step itself (--arms ''): the next stage shows every arm as a fraction of this floor.
stage "ceiling: FLOPs and bytes counted, the step's products and attention timed, the floor"
timeout "$L_CEIL" "${py[@]}" benchmarks/bench_ceiling.py "${DEV[@]}" "${CEIL[@]}" --arms '' --json "$OUT/ceiling.json" \
    2>&1 | grep -v '^USDT\|^ERROR:.*DeviceProperties' | tee "$OUT/ceiling.txt"

stage "each change on and off, predicted and measured; Hugging Face eager and compiled"
# SIGTERM at the limit makes it print the table of what it measured; KILL 20 s later if that hangs.
timeout -k 20 "$L_VAR" "${py[@]}" benchmarks/bench_step_variants.py "${DEV[@]}" "${VAR[@]}" --json "$OUT/variants.json" \
    --ceiling "$OUT/ceiling.json" \
    --arms eager blocks model hf hf-compiled foreach vocab-30528 vocab-30522 modern micro-256 model-graphs blocks-graphs \
    model-autotune 2>&1 | tee "$OUT/variants.txt"

# train.prefetch in the real loop (compiled as on CUDA by default), off then on; predicted: +2% to +5% on.
WHOLE=(--set train.short_seq.len=0 --set train.short_seq.steps=0)
for prefetch in false true; do
    stage "train.prefetch = $prefetch: profile of the real loop, uniform, $PRE, $BATCH x 128"
    timeout "$L_PRE" "${py[@]}" benchmarks/profile_step.py --data "$SHARDS" --preset "$PRE" "${DEV[@]}" --batch "$BATCH" \
        --steps "$PSTEPS" --warmup "$PWARM" --masking uniform "${WHOLE[@]}" --set train.prefetch=$prefetch \
        2>&1 | grep -v '^USDT\|^ERROR:.*DeviceProperties' | tee "$OUT/prefetch-$prefetch.txt"
done

# Predicted (RESULTS 4b): mapnet 1.6-1.9x, mapnet-ht ~1.9x, mapnet-ht-lite 1.15-1.25x, adaptive 1.05-1.15x uniform's step.
stage "every learned arm's step cost against uniform, $PRE, $BATCH x 128, vocabulary 32,768"
timeout "$L_ARMS" "${py[@]}" benchmarks/bench_strategies.py "${DEV[@]}" --presets "$PRE" --batch "$BATCH" --vocab 32768 \
    --steps "$STEPS" --warmup "$WARM" --arms uniform mapnet mapnet-ht mapnet-ht-lite adaptive 2>&1 | tee "$OUT/arms.txt"
stage "done"
