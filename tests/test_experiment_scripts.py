"""The experiment scripts of issue 45 (sections G, H and I): bad arguments refused in one line, before any work.

Their stages are smoke-run by hand (`... OUT smoke`, minutes each); here only what must be refused at once: an
unknown stage, an unknown clock or shards, a masking comparison without uniform as its reference, and a training stage
before its step costs are measured; and which arms of the lever search reuse the baseline's BLiMP controls."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOUR = "experiments/hour-recipe/hour_cpu.sh"
MASKING = "experiments/hour-masking/masking_cpu.sh"
LEVERS = "experiments/hour-levers/levers_cpu.sh"


def script(path: str, out: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", path, str(out), *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


@pytest.mark.parametrize("path, args, env, says", [
    (HOUR, ("train",), {}, "usage: hour_cpu.sh OUT costs|pretrain|blimp|glue|table|smoke"),
    (HOUR, ("pretrain",), {"CLOCK": "cpu"}, "CLOCK must be modelled or wall (got cpu)"),
    (HOUR, ("pretrain",), {"DATA": "seq32"}, "DATA must be base, seq64, vocab16k or vocab16k-seq64 (got seq32)"),
    (LEVERS, ("prepare", "base", "seq32"), {}, "unknown shards seq32 (base, seq64, vocab16k, vocab16k-seq64)"),
    (MASKING, ("sweep",), {}, "usage: masking_cpu.sh OUT costs|run|table|smoke"),
    (MASKING, ("run",), {"STRATEGIES": "pmi,uniform"}, "STRATEGIES must be uniform (the reference"),
    (MASKING, ("run",), {"STRATEGIES": "uniform"}, "STRATEGIES must be uniform (the reference"),
])
def test_bad_arguments_are_one_line_and_exit_2_before_any_work(tmp_path, path, args, env, says):
    out = tmp_path / "out"
    done = script(path, out, *args, **env)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(says)
    assert not out.exists()  # nothing made


@pytest.mark.parametrize("path, stage", [(HOUR, "pretrain"), (MASKING, "run")])
def test_a_stage_that_needs_the_costs_says_so_before_building_data(tmp_path, path, stage):
    # The costs are measured alone first; without them the stage stops before it builds or reads any shards.
    done = script(path, tmp_path / "out", stage, MAPNET="false")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "run the costs stage first" in done.stderr


def test_an_arm_of_the_baselines_architecture_reuses_its_random_weight_controls(tmp_path):
    # levers_cpu.sh with BASELINE=kept has no baseline folder: the controls come from any arm of the baseline's
    # architecture (same seeds, same weights), never from an arm with its own (another shape or block).
    out = tmp_path / "out"
    for arm, score in (("shape-tiny", "own"), ("mask-0.40", "baseline's")):
        (out / "arms" / arm).mkdir(parents=True)
        (out / "arms" / arm / "blimp-controls.json").write_text(score)
    run = ('source experiments/hour-levers/levers_cpu.sh "$OUT" plan > /dev/null; '
           'for line in "$(chosen batch-16)" "$(chosen shape-L8-H128)"; do run_arm "$line"; done')
    done = subprocess.run(["bash", "-c", run], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "OUT": str(out), "BASELINE": "kept", "MAPNET": "true"})
    assert done.returncode == 0, done.stderr
    assert (out / "arms" / "batch-16" / "blimp-controls.json").read_text() == "baseline's"
    assert not (out / "arms" / "shape-L8-H128" / "blimp-controls.json").exists()  # its own: scored by its run
