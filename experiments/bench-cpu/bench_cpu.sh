#!/usr/bin/env bash
# The CPU benchmarks behind docs/performance.md's tables that had no kept printout (issue 66, item 3): each run
# alone on the 2-core development machine, one after another, its printout kept beside this script with the
# machine, the date and the load average before and after (the tables are generated from these files by
# experiments/common/tables_bench_cpu.py).
#
#     bash experiments/bench-cpu/bench_cpu.sh          # about 30 minutes; nothing else may run meanwhile
set -u
cd "$(dirname "$0")/../.."
out=experiments/bench-cpu
run() {  # run NAME COMMAND...: the printout goes to $out/NAME.txt
  local name=$1; shift
  {
    echo "# command: $*"
    echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "# started: $(date -u '+%Y-%m-%d %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    "$@" 2>&1
    echo "# exit: $?"
    echo "# ended: $(date -u '+%Y-%m-%d %H:%M UTC'); load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  } > "$out/$name.txt.tmp" && mv "$out/$name.txt.tmp" "$out/$name.txt"
}
run preprocess uv run python benchmarks/bench_preprocess.py
run shard uv run python benchmarks/bench_shard.py
run pretrain uv run python benchmarks/bench_pretrain.py --rounds 5
run pretrain-compile uv run python benchmarks/bench_pretrain.py --compile
run mapnet uv run python benchmarks/bench_mapnet.py --batch 8 --steps 20
run variance uv run python benchmarks/bench_variance.py
run variance-snapshot uv run python benchmarks/bench_variance.py --sentences 8 --masks 4 --modes 4096 --mapnet
run glue uv run python benchmarks/bench_glue.py --task sst2 --preset tiny --steps 20 --threads 1
