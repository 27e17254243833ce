#!/usr/bin/env bash
# The whole test suite as the README runs it, timed, with the machine and the load average before and after kept
# beside this script (docs/architecture.md quotes it; the brief's target is under 4 minutes on 2 cores, alone).
#
#     bash experiments/bench-cpu/time_suite.sh          # nothing else may run meanwhile
set -u
cd "$(dirname "$0")/../.."
out=experiments/bench-cpu/pytest.txt
{
  echo "# command: uv run pytest -n 2"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "# started: $(date -u '+%Y-%m-%d %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s.%N)
  uv run pytest -n 2 -p no:cacheprovider 2>&1 | tail -40
  rc=${PIPESTATUS[0]}
  echo "# exit: $rc"
  echo "# wall: $(echo "$(date +%s.%N) - $start" | bc) s"
  echo "# ended: $(date -u '+%Y-%m-%d %H:%M UTC'); load after: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out.tmp" && mv "$out.tmp" "$out"
tail -4 "$out"
