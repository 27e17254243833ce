"""Is this machine as fast as the one the kept lever arms ran on? (experiments/hour-levers, issue 45)

    python experiments/common/levers_calibration.py record OUT/load.tsv MS LOAD CORES   # append a calibration line
    python experiments/common/levers_calibration.py check OUT/load.tsv KEPT/logs/series-N/load.tsv   # exit 1 if not

The lever search compares arms at equal *wall time*, so an arm is only comparable with a baseline trained on a
machine of the same speed. The search is longer (~14 h) than one sitting, and each sitting may get another
machine, so every `search` first times a fixed step (`mini`, the fast recipe, uniform masking, batch 32 x 128 on
the base shards: `benchmarks/bench_strategies.py`, the median of 20 steps) and writes it to OUT/load.tsv as a
`calibration` line. An arm run without its baseline (`BASELINE=kept`) is compared with the kept one only when
this sitting's calibration is within TOLERANCE of every one of the kept series' (levers_series.py); otherwise the
baseline must run again here, as a new series. The kept calibrations stay beside the results
(logs/series-N/load.tsv), so the table's reader can check the same.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

# 5% in steps is ~100 of 2,200, the spread of two seeds' steps in one sitting. The gate rarely opens: one idle machine's
# 20-step calibrations read 582-708 ms within nine hours (2026-11-26/27, experiments/hour-levers), so the safe answer,
# run the baseline again, is the usual one.
TOLERANCE = 0.05


def calibrations(path: Path) -> list[tuple[str, float]]:
    """(when, ms per step) of every `calibration` line of a load.tsv (none when the file is absent)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = line.split("\t")
        if cells[0] == "calibration":
            out.append((cells[1], float(cells[4].split()[0])))
    return out


def record(load_tsv: Path, ms: float, load: str, cores: int) -> str:
    line = f"calibration\t{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\t{load}\t{cores}\t{ms:.1f} ms/step"
    with load_tsv.open("a", encoding="utf-8") as fh:
        fh.write(line + "\n")
    return line


def check(now: list[tuple[str, float]], kept: list[tuple[str, float]], tolerance: float = TOLERANCE) -> str | None:
    """None when this sitting's latest calibration is within `tolerance` of every kept one; else why not."""
    if not now:
        return "this sitting has no calibration (run `levers_cpu.sh OUT search` or `calibrate` first)"
    if not kept:
        return "nothing kept has a calibration: the kept baseline's machine speed is unknown"
    ms = now[-1][1]
    off = [(when, k) for when, k in kept if abs(ms / k - 1) > tolerance]
    if off:
        shown = ", ".join(f"{k:.0f} ms ({when})" for when, k in off)
        return (
            f"this machine's step is {ms:.0f} ms; the kept arms ran at {shown}: more than {tolerance:.0%} apart, "
            "so equal wall time is not equal work. Run the baseline here (unset BASELINE) and keep it as a new series"
        )
    return None


def main(argv: list[str]) -> int:
    if len(argv) == 5 and argv[0] == "record":
        print(record(Path(argv[1]), float(argv[2]), argv[3], int(argv[4])))
        return 0
    if len(argv) == 3 and argv[0] == "check":
        why = check(calibrations(Path(argv[1])), calibrations(Path(argv[2])))
        if why:
            print(why, file=sys.stderr)
            return 1
        print(f"calibration within {TOLERANCE:.0%} of every kept sitting's: the kept baseline is comparable")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
