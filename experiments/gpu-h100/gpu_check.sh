#!/usr/bin/env bash
# The first GPU figures (docs/results.md sections 4a and 4b, docs/performance.md): the CUDA tests, training-step
# throughput and MFU at `base` against transformers' BertForMaskedLM (eager and compiled), MAP-Net's and
# the other strategies' step cost at `base`, the `--gpus 1` torchrun/NCCL path with resume and a CPU load
# of the GPU-trained checkpoint, and the step and fine-tuning speeds that size the GPU experiments.
#
#   bash experiments/gpu-h100/gpu_check.sh OUT                               # here: uv run, ../shared/data
#   MAPNET="python3 -m mapnet_cli.cli" PY=python3 GLUE=.gpu/glue bash experiments/gpu-h100/gpu_check.sh $OUT   # device image
#
# Needs the real-text shards (experiments/common/real_text_shards.sh runs/real-text). Every stage has its own
# time limit, so one that hangs or fails leaves the others' figures. The device image has torch and
# transformers but not spaCy, sacremoses or tomli_w; what travels there (an ignored folder .gpu/):
#   mkdir -p .gpu/glue .gpu/whl && cp -r ../shared/data/glue/{SST-2,CoLA,MRPC} .gpu/glue/
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d .gpu/whl tomli_w sacremoses
# and each device command starts with
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl && export PYTHONPATH=$PWD:/tmp/site
set -uo pipefail
OUT=$(realpath -m "$1")
mkdir -p "$OUT"
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
read -r -a py <<<"${PY:-uv run python}"
GLUE=$(realpath -m "${GLUE:-../shared/data/glue}")
RT=$(realpath -m runs/real-text)  # absolute: runs record their held-out sets' paths
stage() { echo; echo "=== $1 ($(date -u +%H:%M:%S))"; }
timed() { local t0=$SECONDS; "$@"; local rc=$?; echo "wall $((SECONDS - t0)) s, exit $rc"; return $rc; }

stage "device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
"${py[@]}" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"

stage "CUDA tests"
MAPNET_SHARED_DATA=$(dirname "$GLUE") timeout 240 "${py[@]}" -m pytest -q -p no:cacheprovider -m gpu tests

stage "throughput and MFU, base, 128 tokens"
timeout 300 "${py[@]}" benchmarks/bench_pretrain.py --device cuda --sizes base --seq-len 128 --batch 128 \
    --warmup 3 --iters 10 --rounds 3 --compile
stage "throughput and MFU, base, 512 tokens"
timeout 300 "${py[@]}" benchmarks/bench_pretrain.py --device cuda --sizes base --seq-len 512 --batch 32 \
    --warmup 3 --iters 10 --rounds 3 --compile

stage "MAP-Net step cost, base"
timeout 200 "${py[@]}" benchmarks/bench_mapnet.py --device cuda --presets base --batch 32 --seq-len 512 --steps 20
timeout 200 "${py[@]}" benchmarks/bench_mapnet.py --device cuda --presets base --batch 128 --seq-len 128 --steps 20

stage "torchrun --gpus 1 (NCCL), resume on the GPU, the checkpoint read on the CPU"
RUN=$OUT/tiny-gpus1
timeout 200 "${mapnet[@]}" pretrain "$RT/shards" --out "$RUN" --preset tiny --config experiments/common/real-text-cpu.toml \
    --steps 200 --gpus 1 --set train.eval_every=100 --set train.checkpoint_every=100
timeout 200 "${mapnet[@]}" pretrain "$RT/shards" --out "$RUN" --steps 300 --gpus 1 --resume
tail -n 2 "$RUN/metrics.jsonl"
CUDA_VISIBLE_DEVICES="" timeout 120 "${mapnet[@]}" export "$RUN" --out "$OUT/tiny-gpus1-export" \
    && ls -l "$OUT/tiny-gpus1-export"

stage "every strategy's step cost, base, 128 tokens"
timeout 240 "${py[@]}" benchmarks/bench_strategies.py --device cuda --presets base --batch 128 --seq-len 128 \
    --steps 15 --warmup 3 --arms uniform uniform@0.3 stratified frequency-ht mapnet mapnet-ht mapnet-ht-1layer

stage "real-text pretraining speed, mini, batch 128, one process"
RUN=$OUT/mini-speed
timed timeout 300 "${mapnet[@]}" pretrain "$RT/shards" --out "$RUN" --preset mini \
    --config experiments/common/real-text-cpu.toml --steps 1000 --set train.batch_size=128 --set train.eval_every=500 \
    --set optim.warmup.steps=100 --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]"
tail -n 1 "$RUN/metrics.jsonl"

stage "fine-tuning speed, SST-2 (20,000 examples, 3 epochs, one seed, one rate), both inits"
timed timeout 300 "${mapnet[@]}" finetune-glue --checkpoint "$RUN" --data "$GLUE" \
    --task SST-2 --protocol small --lrs 3e-4 --seeds 1 --init both --out "$OUT/glue-speed"
