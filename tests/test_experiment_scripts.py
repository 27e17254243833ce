"""The experiment scripts of issue 45 (sections H and I) refuse bad arguments in one line, before any work.

Their stages are smoke-run by hand (`... OUT smoke`, minutes each); here only what must be refused at once: an
unknown stage, an unknown clock, a masking comparison without uniform as its reference, and a training stage
before its step costs are measured."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HOUR = "experiments/hour-recipe/hour_cpu.sh"
MASKING = "experiments/hour-masking/masking_cpu.sh"


def script(path: str, out: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", path, str(out), *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})


@pytest.mark.parametrize("path, args, env, says", [
    (HOUR, ("train",), {}, "usage: hour_cpu.sh OUT costs|pretrain|blimp|glue|table|smoke"),
    (HOUR, ("pretrain",), {"CLOCK": "cpu"}, "CLOCK must be modelled or wall (got cpu)"),
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
