#!/usr/bin/env bash
# The step-efficiency figures still to measure on a GPU (docs/performance.md, RESULTS 4 and D), in one device call
# of at most 10 minutes (the stages' limits: 4 x 90 s + 90 s + 150 s; not yet run on a GPU): where a `base` step's time goes with the batches made ahead (`train.prefetch`) and without, with the
# blocks compiled and not, the syncs the device waits for and how busy it is; MFU against transformers'
# BertForMaskedLM; and every learned arm's step cost, the lite MAP-Net arm included.
#
#   bash experiments/gpu-h100/gpu_step.sh OUT                                          # the CPU smoke: tiny, a few steps
#   DEVICE=cuda PY=python3 bash experiments/gpu-h100/gpu_step.sh OUT                   # on the device, at base
#
# Needs the real-text shards of RESULTS 0 (runs/real-text-x5/shards: bash experiments/common/gpu_downstream.sh prepare,
# here; carry runs/real-text-x5/shards). Every stage has its own time limit, so one that hangs or fails leaves
# the others' figures; each writes OUT/NAME.txt.
set -uo pipefail
OUT=$(realpath -m "$1")
mkdir -p "$OUT"
read -r -a py <<<"${PY:-uv run python}"
DEVICE=${DEVICE:-cpu}
SHARDS=${SHARDS:-runs/real-text-x5/shards}
if [[ $DEVICE == cuda ]]; then
    PRESET=base; BATCH=128; STEPS=20; WARMUP=5; BENCH_STEPS=15; LIMIT=90
else  # the smoke: every command and flag, at a size the CPU runs in seconds
    PRESET=tiny; BATCH=8; STEPS=2; WARMUP=1; BENCH_STEPS=4; LIMIT=300  # 4: the lite arm is timed per cycle of 4
fi
stage() { echo; echo "=== $1 ($(date -u +%H:%M:%S))"; }
# Whole sequences (the `fast` recipe's warm-up pieces would make the first steps another shape).
WHOLE=(--set train.short_seq_len=0 --set train.short_seq_steps=0)
profile() {  # NAME MASKING PROFILE-ARGS...
    local name=$1 masking=$2
    shift 2
    stage "profile: $name"
    timeout "$LIMIT" "${py[@]}" benchmarks/profile_step.py --data "$SHARDS" --preset "$PRESET" --device "$DEVICE" \
        --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --masking "$masking" "${WHOLE[@]}" "$@" \
        2>&1 | tee "$OUT/profile-$name.txt"
}

[[ $DEVICE == cuda ]] && { stage "device"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; }
"${py[@]}" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"

# Prefetch off and on (compile at its default, on with CUDA), then compile off; one Chrome trace.
profile uniform-prefetch-off uniform --set train.prefetch=false
profile uniform uniform --set train.prefetch=true --trace "$OUT/trace-uniform.json"
profile uniform-eager uniform --set train.prefetch=true --set train.compile=false
profile mapnet-ht-lite mapnet-ht-lite --set train.prefetch=true

stage "every learned arm's step cost (batches made inline, as bench_strategies times them)"
timeout "$LIMIT" "${py[@]}" benchmarks/bench_strategies.py --data "$SHARDS" --device "$DEVICE" --presets "$PRESET" \
    --batch "$BATCH" --steps "$BENCH_STEPS" --warmup 2 \
    --arms uniform uniform@0.3 mapnet mapnet-ht mapnet-ht-1layer mapnet-ht-lite 2>&1 | tee "$OUT/bench_strategies.txt"

if [[ $DEVICE == cuda ]]; then
    stage "throughput and MFU, base, 128 tokens, eager and compiled, against BertForMaskedLM"
    timeout 150 "${py[@]}" benchmarks/bench_pretrain.py --device cuda --sizes base --seq-len 128 --batch 128 \
        --warmup 3 --iters 10 --rounds 3 --compile 2>&1 | tee "$OUT/bench_pretrain.txt"
fi
