#!/usr/bin/env bash
# Can the `small` fine-tuning protocol tell a pretrained encoder from an untrained one once the encoder
# gets a GPU's pretraining budget? (docs/results.md section 6b; section 6 is the CPU budget, where it
# cannot.) A `mini` encoder pretrained with uniform masking, 6,000 steps of 128 x 128 tokens (98M
# tokens, 5.5 epochs of 18M), then `finetune-glue --protocol small --init both` on SST-2, CoLA and MRPC:
# the pretrained weights and random weights of the same architecture and tokenizer, paired by
# fine-tuning seed. Also the GPU checks that came out of experiments/gpu-h100/gpu_check.sh: resume on the GPU
# through torchrun, and the CUDA tests.
#
#   bash experiments/common/gpu_downstream.sh prepare                   # here, with spaCy: the shards (~2 min)
#   MAPNET="python3 -m mapnet_cli.cli" PY=python3 GLUE=.gpu/glue bash experiments/common/gpu_downstream.sh run OUT
#
# Training text: every 5th Gutenberg book and Wikipedia file (125 inputs in the manifest: 104 books, 21
# Wikipedia files), 14.3M words, through
# the tokenizer of experiments/real-text-cpu/real_text_cpu.sh; its held-out books and Wikipedia (disjoint from these:
# every 125th book at offset 14, every 50th Wikipedia file at offset 27) are the held-out sets.
set -uo pipefail
WHICH=$1
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
read -r -a py <<<"${PY:-uv run python}"
RT=$(realpath -m runs/real-text)  # absolute: runs record their held-out sets' paths
X5=$(realpath -m runs/real-text-x5)

if [[ $WHICH == prepare ]]; then
    set -e
    bash experiments/common/real_text_shards.sh "$RT"  # the tokenizer and the held-out shards
    G=../shared/data/gutenberg
    W=../shared/data/wiki-articles/enwiki-2015-wikiextractor
    mapfile -t BOOKS < <(ls "$G"/*.txt.gz | awk 'NR % 5 == 2')
    mapfile -t WIKI < <(ls "$W"/*_wiki_*.txt.gz | awk 'NR % 5 == 1')
    "${mapnet[@]}" preprocess "${BOOKS[@]}" "${WIKI[@]}" --out "$X5/prep" --tokenizer "$RT/prep/tokenizer.json" \
        --set preprocess.strip_gutenberg=true --overwrite
    "${mapnet[@]}" shard "$X5/prep" --out "$X5/shards" --set shard.max_seq_len=128 --set shard.valid_fraction=0.01 --overwrite
    exit 0
fi

OUT=$(realpath -m "$2")
mkdir -p "$OUT"
GLUE=$(realpath -m "${GLUE:-../shared/data/glue}")
stage() { echo; echo "=== $1 ($(date -u +%H:%M:%S))"; }
timed() { local t0=$SECONDS; "$@"; local rc=$?; echo "wall $((SECONDS - t0)) s, exit $rc"; return $rc; }

stage "CUDA tests"
MAPNET_SHARED_DATA=$(dirname "$GLUE") timeout 180 "${py[@]}" -m pytest -q -p no:cacheprovider -m gpu \
    tests/train/test_train.py tests/evaluation/glue/test_glue_sweep.py

stage "torchrun --gpus 1: run, then resume on the GPU"
SMOKE=$OUT/tiny-gpus1
timeout 120 "${mapnet[@]}" pretrain "$X5/shards" --out "$SMOKE" --preset tiny --config experiments/common/real-text-cpu.toml \
    --steps 100 --gpus 1 --set train.eval_every=50 --set train.checkpoint_every=50 --set logging.log_every=50
timeout 120 "${mapnet[@]}" pretrain "$X5/shards" --out "$SMOKE" --steps 150 --gpus 1 --resume

stage "pretraining: mini, uniform, 6,000 steps x 128 sequences"
RUN=$OUT/mini-uniform-6000
timed timeout 330 "${mapnet[@]}" pretrain "$X5/shards" --out "$RUN" --preset mini --config experiments/common/real-text-cpu.toml \
    --steps 6000 --seed 0 --set train.batch_size=128 --set optim.lr=5e-4 --set optim.warmup.steps=360 \
    --set train.eval_every=1000 --set train.checkpoint_every=1000 --set train.keep_last=1 --set logging.log_every=500 \
    --set "train.extra_eval=[\"books=$RT/heldout-books\", \"wiki=$RT/heldout-wiki\"]"

stage "fine-tuning: small protocol, the checkpoint and its random-init control, four processes side by side"
ft() {  # NAME, then finetune-glue's task and grid flags
    local name=$1; shift
    timed timeout 290 "${mapnet[@]}" finetune-glue --checkpoint "$RUN" --data "$GLUE" --protocol small --init both \
        --out "$OUT/glue-$name" "$@" > "$OUT/glue-$name.log" 2>&1
}
ft SST-2-lr1e-4 --task SST-2 --lrs 1e-4 &
ft SST-2-lr3e-4 --task SST-2 --lrs 3e-4 &
ft CoLA --task CoLA &
ft MRPC --task MRPC &
wait
tail -n 3 "$OUT"/glue-*.log
"${py[@]}" experiments/common/downstream_table.py "$OUT"/glue-*/results.json
