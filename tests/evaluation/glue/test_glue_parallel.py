"""`mapnet finetune-glue --engine dask`: the grid's runs as tasks of a cluster of 2 workers are the serial runs.

Every run fine-tunes with one torch thread both ways (the serial sweep in this process, tests/conftest.py; the workers
through engine.threads = 1), so on the CPU the records must agree but for their seconds: every epoch's losses and
dev scores. An interrupted sweep resumes on the cluster with exactly the runs it lacks; a worker killed with SIGKILL
costs its run only (run again from scratch); results.json is written by this process alone.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError

pytest.importorskip("distributed")


def finetune(out: Path, run: Path, glue: Path, *extra: str):
    args = ["finetune-glue", "--data", str(glue), "--out", str(out), "--task", "rte", "--checkpoints", str(run),
            "--init", "both", "--grid", "8x1e-4", "--seeds", "2", "--epochs", "2", "--set", "logging.progress=false",
            *extra]  # fmt: skip
    return CliRunner().invoke(app, args)


def records(out: Path) -> dict[str, dict]:
    """results.json's runs without their seconds (the wall clock's), in the file's order."""
    runs = json.loads((out / "results.json").read_text())["runs"]
    return {key: {k: v for k, v in r.items() if k != "seconds"} for key, r in runs.items()}


@pytest.fixture(scope="module")
def glue(tmp_path_factory) -> Path:
    from glue_fixtures import make_glue_dir

    return make_glue_dir(tmp_path_factory.mktemp("glue-parallel") / "glue", tasks=("RTE",))


@pytest.fixture(scope="module")
def serial(fake_run, glue, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serial") / "ft"
    res = finetune(out, fake_run, glue)
    assert res.exit_code == 0, (res.output, res.exception)
    return out


@pytest.fixture(scope="module")
def on_cluster(dask_scheduler) -> list[str]:
    return ["--engine", "dask", "--engine-address", dask_scheduler, "--set", "engine.threads=1"]


@pytest.mark.slow
def test_runs_on_two_dask_workers_are_the_serial_runs_and_a_resumed_sweep_runs_only_what_it_lacks(
    serial, fake_run, glue, on_cluster, tmp_path
):
    out = tmp_path / "ft"
    first = finetune(out, fake_run, glue, "--seeds", "1")  # interrupted, as it were: seed 0 of every run only
    assert first.exit_code == 0, first.output
    before = json.loads((out / "results.json").read_text())["runs"]
    res = finetune(out, fake_run, glue, *on_cluster)
    assert res.exit_code == 0, (res.output, res.exception)
    assert "3 fine-tuning runs side by side (Dask)" in res.output  # 2 checkpoints + their random-init control
    after = json.loads((out / "results.json").read_text())["runs"]
    assert all(after[key] == record for key, record in before.items())  # kept as they were, not run again
    assert records(out) == records(serial) and list(records(out)) == list(records(serial)) and len(after) == 6
    a, b = (json.loads((o / "results.json").read_text())["summary"] for o in (serial, out))
    assert a == b


@pytest.mark.slow
def test_a_killed_worker_costs_its_run_only_and_the_sweep_ends_as_an_undisturbed_one(
    serial, fake_run, glue, on_cluster, dask_scheduler, tmp_path
):
    from distributed import Client

    killed: list[int] = []

    def kill_a_worker_mid_run() -> None:
        """SIGKILL the worker process that is running a fine-tuning task, as soon as one is."""
        with Client(dask_scheduler, timeout="30s") as client:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                busy = [w for w, keys in client.processing().items() if any("finetune-glue" in k for k in keys)]
                if busy:
                    pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
                time.sleep(0.005)

    watcher = threading.Thread(target=kill_a_worker_mid_run, daemon=True)
    watcher.start()
    out = tmp_path / "ft"
    res = finetune(out, fake_run, glue, *on_cluster, "--epochs", "6")  # longer runs: one is caught running
    watcher.join()
    assert killed, "no worker was caught running a task"
    assert res.exit_code == 0, (res.output, res.exception)
    alone = tmp_path / "alone"
    assert finetune(alone, fake_run, glue, "--epochs", "6").exit_code == 0
    assert records(out) == records(alone) and len(records(out)) == 6


def test_gpus_on_a_machine_without_cuda_and_contradictory_flags_are_one_line_before_any_work(fake_run, glue, tmp_path):
    out = tmp_path / "ft"
    for extra, said in (
        (["--gpus", "2"], "--gpus 2: this machine has no CUDA device"),
        (["--gpus", "2", "--engine", "dask"], "with --engine dask the cluster's workers bring theirs"),
        (["--engine-address", "tcp://127.0.0.1:1"], "--engine-address needs --engine dask"),
    ):
        res = finetune(out, fake_run, glue, *extra)
        assert isinstance(res.exception, MapnetError) and said in str(res.exception), (extra, res.output)
        assert "\n" not in str(res.exception) and not out.exists()
