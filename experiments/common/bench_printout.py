"""Read the printouts of `benchmarks/bench_strategies.py` kept in experiments/ (one file may hold several runs).

    uv run python experiments/common/bench_printout.py experiments/blimp-arms-mini/bench_strategies-h200.txt

A step cost is the ratio the benchmark printed ("1.64x"), which it computed from its unrounded times: dividing
the printed milliseconds again gives a different last digit (22.5 / 13.8 = 1.63 where it printed 1.64). The
machine is the printout's own first word(s): "CPU, 2 threads" or the GPU's name, so a table can say where its
costs were measured.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

HEADER = re.compile(r"^(?P<machine>[^;]+); load average (?P<load>[\d.]+) \(1 min\) before;")
BLOCK = re.compile(r"^(?P<preset>\w+): arm\s+ms/step\s+vs uniform\s*$")
ARM = re.compile(r"^\s+(?P<arm>\S+)\s+(?P<ms>[\d.]+)\s+(?P<ratio>[\d.]+)x\s*$")


@dataclass(frozen=True)
class Printout:
    path: Path
    machine: str  # as printed: "CPU, 2 threads", "NVIDIA H200"
    load_before: float
    presets: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # preset -> arm -> (ms, ratio)

    @property
    def where(self) -> str:
        """The machine in a table's words: the GPU's model ("H200"), or the CPU as printed."""
        return (
            self.machine.removeprefix("NVIDIA ").split(" ", 1)[0] if self.machine.startswith("NVIDIA") else self.machine
        )


def read(path: str | Path) -> list[Printout]:
    """Every run in the file, in order; a file with no run is an error (a misnamed path must not read as 'no costs')."""
    path, runs, preset = Path(path), [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := HEADER.match(line):
            runs.append(Printout(path, m["machine"].strip(), float(m["load"])))
            preset = None
        elif (m := BLOCK.match(line)) and runs:
            preset = m["preset"]
            runs[-1].presets[preset] = {}
        elif (m := ARM.match(line)) and runs and preset:
            runs[-1].presets[preset][m["arm"]] = (float(m["ms"]), float(m["ratio"]))
    if not any(run.presets for run in runs):
        raise SystemExit(f"{path}: no bench_strategies.py printout in it")
    return runs


def step_costs(paths: list[str | Path], preset: str | None = None) -> dict[str, tuple[float, Printout]]:
    """{arm: (printed ratio to uniform, the run it came from)} over the files' runs in order, the first figure
    found for an arm winning; `preset` None takes each run's first block. Each ratio is against its own run's
    uniform, which every run has (checked)."""
    out: dict[str, tuple[float, Printout]] = {}
    for path in paths:
        for run in read(path):
            block = run.presets.get(preset) if preset else next(iter(run.presets.values()), None)
            if block is None:
                continue
            if "uniform" not in block:
                raise SystemExit(f"{run.path}: a run with no uniform line, so no step cost is relative to anything")
            for arm, (_, ratio) in block.items():
                out.setdefault(arm, (ratio, run))
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        for run in read(arg):
            print(f"{arg}: {run.machine} (load {run.load_before:.2f} before)")
            for preset, arms in run.presets.items():
                print(f"  {preset}: " + ", ".join(f"{arm} {ratio:.2f}x" for arm, (_, ratio) in arms.items()))
