"""`mapnet compare --engine dask`: the runs side by side on a local cluster of 2 workers are the serial runs.

Every run trains with one torch thread both ways (the serial comparison in this process, tests/conftest.py; the
workers through engine.threads = 1), so on the CPU the two must agree bit for bit: the weights of every
checkpoint, every loss in metrics.jsonl, and results.json but for timings and paths. A worker killed with SIGKILL
costs its run only (rescheduled, resumed from its newest checkpoint, the same weights in the end); a run that fails
with a user error stops the comparison in one line, untried again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError

pytest.importorskip("distributed")

TINY = [
    "--preset",
    "tiny",
    *[
        a
        for kv in (
            "train.recipe=paper",
            "model.layers=1",
            "model.hidden=32",
            "model.heads=2",
            "model.intermediate=64",
            "model.max_position=32",
            "shard.max_seq_len=32",
            "train.batch_size=8",
            "train.eval_sequences=8",
            "train.eval_every=4",
            "optim.warmup.steps=1",
            "logging.progress=false",
            "logging.log_every=2",
        )
        for a in ("--set", kv)
    ],
]
ON_DASK = ["--engine", "dask", "--set", "engine.workers=2", "--set", "engine.threads=1"]
TIMING = {"elapsed", "tokens_per_s", "memory_bytes", "seconds_per_step", "path", "command"}


def compare(out: Path, shards: Path, *extra: str, steps: int = 8):
    res = CliRunner().invoke(
        app,
        [
            "compare",
            str(shards),
            "--out",
            str(out),
            "--strategies",
            "uniform,mapnet",
            "--seeds",
            "2",
            "--steps",
            str(steps),
            *TINY,
            *extra,
        ],
    )
    return res


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def weights(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): sha(p) for p in sorted(out.glob("runs/*/seed-*/checkpoints/*/model.safetensors"))}


def metrics(out: Path) -> dict[str, list]:
    return {
        str(run.relative_to(out)): [
            {k: v for k, v in json.loads(line).items() if k not in TIMING}
            for line in (run / "metrics.jsonl").read_text().splitlines()
        ]
        for run in sorted(out.glob("runs/*/seed-*"))
    }


def untimed(doc):
    """results.json without what the wall clock, the folder or the engine decide."""
    if isinstance(doc, dict):
        return {
            k: untimed(v)
            for k, v in doc.items()
            if k not in TIMING and k != "engine" and k not in ("curve", "seconds_per_step")
        }
    if isinstance(doc, list):
        return [untimed(v) for v in doc]
    return doc


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("cmp-parallel") / "shards", train=64, valid=16, seq_len=32)


@pytest.fixture(scope="module")
def cluster(dask_scheduler) -> list[str]:
    """The compare options that send the runs to the session's cluster (the tests after the first: the first has
    compare start a cluster of its own, engine.workers, as a user's `--engine dask` does)."""
    return ["--engine", "dask", "--engine-address", dask_scheduler, "--set", "engine.threads=1"]


@pytest.fixture(scope="module")
def serial(shards, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serial") / "cmp"
    res = compare(out, shards)
    assert res.exit_code == 0, (res.output, res.exception)
    return out


@pytest.mark.slow
def test_runs_on_two_dask_workers_are_the_serial_runs_bit_for_bit(serial, shards, tmp_path):
    out = tmp_path / "cmp"
    res = compare(out, shards, *ON_DASK)
    assert res.exit_code == 0, (res.output, res.exception)
    assert "training 4 runs side by side (Dask)" in res.output and "runs: 4 done, 0 running, 0 waiting" in res.output
    assert weights(out) == weights(serial) and len(weights(out)) == 4 * 2  # steps 4 and 8 (the last), per run
    assert metrics(out) == metrics(serial)
    a, b = (json.loads((o / "results.json").read_text()) for o in (serial, out))
    assert untimed(a) == untimed(b)
    assert [r["settings"]["engine"]["name"] for r in b["runs"]] == ["dask"] * 4
    # Run again in this process: every run is reused, whichever engine trained it.
    again = compare(out, shards)
    assert again.exit_code == 0 and again.output.count("reusing ") == 4, again.output


@pytest.mark.slow
def test_a_killed_worker_costs_its_run_only_which_resumes_to_the_same_weights(serial, shards, cluster, tmp_path):
    out = tmp_path / "cmp"
    killed: list[int] = []

    def kill_a_worker_mid_run() -> None:
        """SIGKILL the process that holds a run's lock once that run has a checkpoint but not its last one."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            for lock in out.glob("runs/*/.seed-*.lock"):
                run = lock.parent / lock.name[1 : -len(".lock")]
                steps = sorted(p.name for p in (run / "checkpoints").glob("step-*")) if run.is_dir() else []
                if steps and steps[-1] != "step-00000008":
                    try:
                        pid = json.loads(lock.read_text())["pid"]
                    except (OSError, ValueError, KeyError):
                        continue
                    if pid != os.getpid():
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        return
            time.sleep(0.02)

    watcher = threading.Thread(target=kill_a_worker_mid_run, daemon=True)
    watcher.start()
    res = compare(out, shards, *cluster, "--set", "train.checkpoint_every=2")
    watcher.join()
    assert killed, "no worker was caught mid-run"
    assert res.exit_code == 0, (res.output, res.exception)
    final = {k: v for k, v in weights(out).items() if "step-00000008" in k}
    assert final == {k: v for k, v in weights(serial).items() if "step-00000008" in k} and len(final) == 4


@pytest.mark.slow
def test_a_run_that_fails_with_a_user_error_stops_the_comparison_in_one_line(serial, shards, cluster, tmp_path):
    out = tmp_path / "cmp"
    shutil.copytree(serial, out)
    run = out / "runs" / "mapnet" / "seed-1" / "checkpoints"
    shutil.rmtree(run / "step-00000008")  # so the run resumes from step 4 ...
    weights_file = run / "step-00000004" / "model.safetensors"
    data = bytearray(weights_file.read_bytes())
    data[-3] ^= 0xFF  # ... whose weights were damaged: refused by the run itself, on its worker
    weights_file.write_bytes(bytes(data))
    res = compare(out, shards, *cluster)
    assert isinstance(res.exception, MapnetError), res.output
    assert "does not match its sha256" in str(res.exception) and "\n" not in str(res.exception)
    assert "retries" not in str(res.exception)  # a user error is not tried again


@pytest.mark.slow
def test_glue_and_blimp_scored_on_the_cluster_are_the_serial_scores(
    serial, shards, cluster, shared_data, tmp_path, monkeypatch
):
    """compare --glue-tasks and --blimp on the cluster: every fine-tuning run and every BLiMP score (the runs' and the
    controls') as a task, the same records as scored one after another here; this process writes every file. The
    engine says "none finished yet" every millisecond here (every second in use): tasks that take longer than a
    tick, as real models do, must be waited through."""
    import sys

    from mapnet_cli.data.engine import DaskEngine

    real = DaskEngine.as_completed
    monkeypatch.setattr(
        DaskEngine, "as_completed", lambda self, fn, specs, what, every=1.0: real(self, fn, specs, what, every=0.001)
    )

    sys.path.insert(0, str(Path(__file__).parents[1] / "evaluation"))
    from glue_fixtures import make_glue_dir

    glue = make_glue_dir(tmp_path / "glue", tasks=("SST-2",))
    scored = ["--glue-tasks", "sst2", "--glue-data", str(glue), "--set", "finetune.max_seq_len=32",
              "--blimp", str(shared_data / "blimp"), "--blimp-pairs", "2"]  # fmt: skip
    here, there = tmp_path / "here", tmp_path / "there"
    for out in (here, there):
        shutil.copytree(serial, out)  # the runs are reused: only the scoring runs
    res = compare(here, shards, *scored)
    assert res.exit_code == 0, (res.output, res.exception)
    res = compare(there, shards, *scored, *cluster)
    assert res.exit_code == 0, (res.output, res.exception)
    assert "fine-tuning runs side by side (Dask)" in res.output and "models side by side (Dask)" in res.output

    def sweep_runs(out: Path) -> dict:
        runs = json.loads((out / "glue" / "results.json").read_text())["runs"]
        return {key: untimed({k: v for k, v in r.items() if k != "seconds"}) for key, r in runs.items()}

    a, b = sweep_runs(here), sweep_runs(there)
    assert a == b and len(a) == (4 + 2) * 2  # 4 runs and 2 random-init controls, 2 fine-tuning seeds each
    assert list(a) == list(b)  # in the plan's order, whichever finished first
    caches = ["blimp-controls.json", *(str(p.relative_to(here)) for p in here.glob("runs/*/seed-*/compare-blimp.json"))]
    assert len(caches) == 1 + 4
    for name in caches:
        assert json.loads((here / name).read_text()) == json.loads((there / name).read_text()), name
    a, b = (json.loads((o / "results.json").read_text()) for o in (here, there))
    assert untimed(a) == untimed(b)
