#!/usr/bin/env bash
# The same 12-step MAP-Net runs with the code before (362aedc) and after (42b2130) the host-drawn masks.
set -e
SH=/tmp/eq/shards
mkdir -p /tmp/eq
cd /work/main
[[ -f $SH/manifest.json ]] || { uv run mapnet preprocess --recipe data_recipes/tiny.toml --out /tmp/eq/prep --set synthetic.documents=300 --overwrite >/dev/null; uv run mapnet shard /tmp/eq/prep --out $SH --overwrite >/dev/null; }
for arm in "paper:--masking mapnet --set masking.mapnet.explore_steps=6" "ht:--masking mapnet --set masking.mapnet.importance=ht --set masking.mapnet.mix_uniform=0.5 --set masking.mapnet.explore_start=0 --set masking.mapnet.explore_end=0 --set masking.mapnet.target=gradnorm"; do
  name=${arm%%:*}; flags=${arm#*:}
  for code in old new; do
    dir=/work/main; [[ $code == old ]] && dir=/tmp/old
    (cd $dir && OMP_NUM_THREADS=1 PYTHONPATH=$dir /work/main/.venv/bin/python -m mapnet_cli.cli pretrain $SH --out /tmp/eq/$name-$code --preset tiny --steps 12 $flags --set logging.log_every=1 --set logging.progress=false --set train.eval_every=6 >/dev/null 2>&1 || echo "FAIL $name $code")
  done
  python3 - "$name" <<'PY'
import json, sys
name = sys.argv[1]
def rows(p): return [json.loads(l) for l in open(p)]
a, b = rows(f"/tmp/eq/{name}-old/metrics.jsonl"), rows(f"/tmp/eq/{name}-new/metrics.jsonl")
la = [(r["kind"], r["step"], r.get("loss", r.get("eval_loss"))) for r in a if r["kind"] in ("train", "eval")]
lb = [(r["kind"], r["step"], r.get("loss", r.get("eval_loss"))) for r in b if r["kind"] in ("train", "eval")]
print(name, "identical" if la == lb else "DIFFER", len(la), la[-1], lb[-1])
PY
done
