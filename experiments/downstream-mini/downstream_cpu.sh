#!/usr/bin/env bash
# Can the `small` fine-tuning protocol tell a pretrained encoder from an untrained one on a CPU?
# (docs/results.md, section 6.) A `mini` encoder pretrained with uniform masking on the real-text
# setup of section 2, 2,000 steps (1.5 epochs of its training text), then `finetune-glue --protocol
# small --init both`: the same fine-tuning of the pretrained weights and of random weights of the
# same architecture and tokenizer (the control), paired by fine-tuning seed. Then the cheap probe at
# every kept checkpoint, and a cheap one-seed SST-2 fine-tuning at every checkpoint for the probe's
# rank correlation (`probe --against` prints it).
#
#   bash experiments/downstream-mini/downstream_cpu.sh [OUT] [pretrain|finetune|probe|rank|all]   # default OUT: runs/real-text
#
# Needs the shards of experiments/real-text-cpu/real_text_cpu.sh (built here when missing). Measured on 2 cores:
# pretraining ~1 h (one thread, shared), fine-tuning ~1.5 h (two one-thread processes, shared), the
# probe ~5 min per task.
set -euo pipefail
OUT=$(realpath -m "${1:-runs/real-text}")
WHICH=${2:-all}
GLUE=$(realpath -m ../shared/data/glue)
mapnet=(uv run mapnet)
bash experiments/common/real_text_shards.sh "$OUT"
RUN=$OUT/mini-uniform-2000
if [[ $WHICH == pretrain || $WHICH == all ]]; then
    # A checkpoint every 250 steps, all kept: the probe's rank correlation needs them.
    "${mapnet[@]}" pretrain "$OUT/shards" --out "$RUN" --preset mini --config experiments/common/real-text-cpu.toml \
        --steps 2000 --seed 0 --set optim.lr=5e-4 --set optim.warmup.steps=200 --set train.eval_every=250 \
        --set train.checkpoint_every=250 --set train.keep_last=8 \
        --set "train.extra_eval=[\"books=$OUT/heldout-books\", \"wiki=$OUT/heldout-wiki\"]"
fi
if [[ $WHICH == finetune || $WHICH == all ]]; then
    # The largest affordable part of the small protocol (its full grid is several hours on 2 cores):
    # SST-2 and CoLA at the grid's upper rate, 3 seeds, the checkpoint and its random-init control.
    for task in SST-2 CoLA; do
        "${mapnet[@]}" finetune-glue --protocol small --lrs 3e-4 --init both --checkpoint "$RUN" --data "$GLUE" \
            --task "$task" --out "$OUT/glue-small-lr3e-4-$task"
    done
    uv run python experiments/common/downstream_table.py "$OUT"/glue-small-lr3e-4-*/results.json
fi
if [[ $WHICH == probe || $WHICH == all ]]; then
    for task in sst2 cola; do
        "${mapnet[@]}" probe "$RUN" --data "$GLUE" --task "$task" --out "$OUT/probe-mini-2000-$task.json" --overwrite
    done
fi
if [[ $WHICH == rank || $WHICH == all ]]; then
    "${mapnet[@]}" finetune-glue --checkpoints "$RUN" --init both --task SST-2 --data "$GLUE" --batch-sizes 32 \
        --lrs 3e-4 --seeds 1 --epochs 3 --max-train 5000 --set finetune.max_seq_len=128 \
        --out "$OUT/glue-sst2-5k-every-checkpoint"
    "${mapnet[@]}" probe "$RUN" --data "$GLUE" --task sst2 --out "$OUT/probe-mini-2000-sst2.json" --overwrite \
        --against "$OUT/glue-sst2-5k-every-checkpoint/results.json"
fi
