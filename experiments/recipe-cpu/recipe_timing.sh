#!/usr/bin/env bash
# Idle seconds per training step of each configuration of experiments/recipe-cpu/recipe_cpu.sh, on this machine with
# both cores (run it ALONE: a second process slows every step; the load average is recorded).
# Writes OUT/timing-SIZE.json, which recipe_table.py --timing reads to turn steps into minutes.
#
#   bash experiments/recipe-cpu/recipe_timing.sh runs/recipe tiny      # ~3 min
#   bash experiments/recipe-cpu/recipe_timing.sh runs/recipe mini      # ~10 min
set -euo pipefail
OUT=$(realpath -m "$1"); SIZE=${2:-tiny}; STEPS=${STEPS:-$([[ $SIZE == tiny ]] && echo 300 || echo 120)}
read -r -a mapnet <<<"${MAPNET:-uv run mapnet}"
X5=$(realpath -m runs/real-text-x5)
T=$(mktemp -d)
COMMON=(--preset "$SIZE" --steps "$STEPS" --set train.batch_size=32 --set model.max_position=128 --set shard.max_seq_len=128
        --set train.eval_every=0 --set train.eval_sequences=8 --set logging.log_every=10 --set logging.progress=false
        --set optim.warmup.steps=10)
# name, then flags; a step's cost does not depend on the learning rate or seed, only on the shapes and dropout.
configs=(
    "fast-pieces --recipe fast --set train.short_seq.steps=$STEPS"
    "fast-whole --recipe fast --set train.short_seq.len=0 --set train.short_seq.steps=0"
    "paper --recipe paper"
    "hf --recipe paper --set optim.grad_clip=1.0 --set masking.mask_count=bernoulli"
)
echo "load average before: $(cat /proc/loadavg)"
for spec in "${configs[@]}"; do
    read -r -a c <<<"$spec"
    "${mapnet[@]}" pretrain "$X5/shards" --out "$T/${c[0]}" "${COMMON[@]}" "${c[@]:1}" > "$T/${c[0]}.log" 2>&1
done
echo "load average after: $(cat /proc/loadavg)"
uv run python - "$T" "$OUT/timing-$SIZE.json" "$SIZE" <<'PY'
import json, sys
from pathlib import Path
T, out, size = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
def s_per_step(name):  # training time only (metrics' elapsed), from step 10 on: the first steps warm the allocator
    rows = [json.loads(l) for l in (T / name / "metrics.jsonl").read_text().splitlines()]
    tr = [r for r in rows if r["kind"] == "train"]
    return (tr[-1]["elapsed"] - tr[0]["elapsed"]) / (tr[-1]["step"] - tr[0]["step"])
pieces = {"tiny": 500, "mini": 500}[size]  # the recipe's train.short_seq.steps at this size
timing = {"fast": {"s_per_step": s_per_step("fast-whole"), "s_per_step_pieces": s_per_step("fast-pieces"), "short_seq_steps": pieces},
          "hf": {"s_per_step": s_per_step("hf")}, "paper": {"s_per_step": s_per_step("paper")}}
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(timing, indent=1))
print(json.dumps(timing, indent=1))
PY
rm -rf "$T"
