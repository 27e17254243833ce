"""Concurrent runs into one output: the second is refused in one line, naming the folder and the holder.

The holders here are real processes (a lock held in another process is what
flock sees; a second fd in this process would not be the same case).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_shards import write_tiny_shards
from typer.testing import CliRunner

from mapnet_cli import run_lock
from mapnet_cli.cli import app
from mapnet_cli.errors import MapnetError

# A job someone else started would set these; the tests start their own processes.
_JOB_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_NTASKS", "SLURM_PROCID", run_lock.HELD_ENV)
ENV = {**{k: v for k, v in os.environ.items() if k not in _JOB_ENV}, "OMP_NUM_THREADS": "1"}
HOLD = (
    "import sys, time; from mapnet_cli.run_lock import output_lock\n"
    "with output_lock(sys.argv[1]):\n    print('locked', flush=True); time.sleep(120)\n"
)
TINY = [
    "--preset",
    "tiny",
    "--recipe",
    "paper",
    "--set",
    "model.max_position=32",
    "--set",
    "shard.max_seq_len=32",
    "--set",
    "train.batch_size=8",
    "--set",
    "train.eval_sequences=8",
    "--set",
    "optim.warmup.steps=1",
    "--set",
    "logging.progress=false",
]


def mapnet(*args: str) -> list[str]:
    return [sys.executable, "-m", "mapnet_cli.cli", *args]


def stop(proc: subprocess.Popen) -> None:
    """SIGKILL the process and everything it started (its own session), as a crash or `kill -9` would."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


@pytest.fixture
def holder(tmp_path):
    """Start a process that holds the lock of a folder; yields (folder, its pid)."""
    procs = []

    def hold(folder: Path) -> int:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLD, str(folder)],
            stdout=subprocess.PIPE,
            text=True,
            env=ENV,
            start_new_session=True,
        )
        procs.append(proc)
        assert proc.stdout.readline().strip() == "locked"
        return proc.pid

    yield hold
    for proc in procs:
        stop(proc)


def refused(res, folder: Path, pid: int) -> str:
    assert isinstance(res.exception, MapnetError), (res.exception, res.output)
    text = str(res.exception)
    assert "\n" not in text and str(folder) in text and f"pid {pid}" in text and "in use" in text, text
    return text


def start_run(args: list[str], err: Path) -> subprocess.Popen:
    """A `mapnet` run in its own session, its stderr to the file `err`. Not a pipe: nobody reads a pipe while the
    run trains, and a run that logs every step fills one (64 KiB) and then blocks in its next write."""
    with open(err, "w") as sink:
        return subprocess.Popen(
            args, env=ENV, stdout=subprocess.DEVNULL, stderr=sink, text=True, start_new_session=True
        )


def kill_processes_naming(path: Path) -> None:
    """SIGKILL every process whose command line names `path` (a run's torchrun and workers, which leave the session
    of the launcher that started them), and wait until they are gone, so no test leaves training behind."""
    import psutil

    procs = []
    for proc in psutil.process_iter(["cmdline"]):
        if str(path) in " ".join(proc.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                proc.kill()
                procs.append(proc)
    psutil.wait_procs(procs, timeout=60)


def processes_naming(path: Path) -> list:
    """The processes whose command line names `path` (a run's launcher, torchrun and workers)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            if str(path) in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
    return found


def pause(procs, signum: int = signal.SIGSTOP) -> None:
    """SIGSTOP: a run that holds its lock stops training while the test starts the next run, so on a busy 2-core
    machine the run to be refused does not wait for the cores the holder trains on. A stopped process keeps its
    descriptors, so its lock is held as before (and SIGKILL still ends it); `resume` (SIGCONT) lets it go on."""
    import psutil

    for proc in procs:
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            proc.send_signal(signum)


def resume(procs) -> None:
    pause(procs, signal.SIGCONT)


def wait_for(
    predicate, proc: subprocess.Popen | None, what: str, timeout: float = 240, err: Path | None = None
) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the first run ended before {what}: {err.read_text()[-3000:] if err else ''}")
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def holder_pid(folder: Path) -> int | None:
    try:
        return json.loads(run_lock.lock_path(folder).read_text() or "{}").get("pid")
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- the lock itself
def test_the_lock_file_is_beside_the_output_and_shared_by_every_spelling(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    monkeypatch.chdir(tmp_path)
    assert run_lock.lock_path("run") == run_lock.lock_path(tmp_path / "a" / ".." / "run") == tmp_path / ".run.lock"
    os.symlink(tmp_path / "a", tmp_path / "link")
    assert run_lock.lock_path("link") == run_lock.lock_path("a/") == tmp_path / ".a.lock"
    with run_lock.output_lock(tmp_path / "run"):
        with run_lock.output_lock("run"):  # nested in one process: allowed
            assert json.loads((tmp_path / ".run.lock").read_text())["pid"] == os.getpid()
        assert (tmp_path / ".run.lock").exists()
    assert not (tmp_path / ".run.lock").exists()  # a clean exit leaves nothing beside the output


def test_a_folder_held_by_another_process_is_refused_with_its_pid(tmp_path, holder):
    pid = holder(tmp_path / "run")
    with pytest.raises(MapnetError) as exc:
        with run_lock.output_lock(tmp_path / "run"):
            pass
    assert f"pid {pid} on " in str(exc.value) and str(tmp_path / "run") in str(exc.value)
    with run_lock.output_lock(tmp_path / "other"):  # another folder is free
        pass


def test_only_rank_0_locks_and_a_worker_accepts_its_launchers_lock(tmp_path, holder, monkeypatch):
    pid = holder(tmp_path / "run")
    monkeypatch.setenv("RANK", "1")
    with run_lock.output_lock(tmp_path / "run"):  # rank 1 never locks
        pass
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv(run_lock.HELD_ENV, json.dumps({str(tmp_path / ".run.lock"): pid + 1}))
    with pytest.raises(MapnetError, match="in use"):  # the environment names another holder: no pass
        with run_lock.output_lock(tmp_path / "run"):
            pass
    monkeypatch.setenv(run_lock.HELD_ENV, json.dumps({str(tmp_path / ".run.lock"): pid}))
    with run_lock.output_lock(tmp_path / "run"):  # held by the launcher named there
        pass


def test_a_killed_holder_does_not_block_the_next_run(tmp_path, holder):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "run")],
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
        start_new_session=True,
    )
    assert proc.stdout.readline().strip() == "locked"
    stop(proc)  # SIGKILL: no clean-up ran, the lock file is still there
    assert (tmp_path / ".run.lock").exists()
    with run_lock.output_lock(tmp_path / "run"):  # the kernel released the lock with the process
        assert json.loads((tmp_path / ".run.lock").read_text())["pid"] == os.getpid()


# ---------------------------------------------------------------- every command that writes an output
@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("locked")
    shards = write_tiny_shards(root / "shards")
    res = CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(root / "run"), "--steps", "2", *TINY])
    assert res.exit_code == 0, res.output
    rows = "".join(f"w{5 + i % 9} w{6 + i % 7}\t{i % 2}\n" for i in range(16))
    (root / "glue" / "SST-2").mkdir(parents=True)
    for split in ("train", "dev"):
        (root / "glue" / "SST-2" / f"{split}.tsv").write_text("sentence\tlabel\n" + rows)
    return shards, root / "run", root / "glue"


COMMANDS = {
    "pretrain": lambda out, shards, run, glue: ["pretrain", str(shards), "--out", str(out), "--steps", "2", *TINY],
    "pretrain --nproc 2": lambda out, shards, run, glue: [
        "pretrain",
        str(shards),
        "--out",
        str(out),
        "--steps",
        "2",
        "--nproc",
        "2",
        *TINY,
    ],
    "compare": lambda out, shards, run, glue: [
        "compare",
        str(shards),
        "--out",
        str(out),
        "--seeds",
        "1",
        "--steps",
        "2",
        *TINY,
    ],
    "finetune-glue": lambda out, shards, run, glue: [
        "finetune-glue",
        "--task",
        "sst2",
        "--checkpoint",
        str(run),
        "--data",
        str(glue),
        "--out",
        str(out),
        "--quick",
        "--seeds",
        "1",
    ],
    "quickstart": lambda out, shards, run, glue: ["quickstart", "--out", str(out), "--steps", "2", "--overwrite"],
    "preprocess": lambda out, shards, run, glue: [
        "preprocess",
        "synthetic:",
        "--out",
        str(out),
        "--set",
        "synthetic.documents=20",
    ],
    "shard": lambda out, shards, run, glue: ["shard", str(out.parent / "prep"), "--out", str(out)],
    "export": lambda out, shards, run, glue: ["export", str(run), "--out", str(out)],
    "probe": lambda out, shards, run, glue: ["probe", str(run), "--data", str(glue), "--out", str(out)],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_refuses_an_output_another_process_is_writing(trained, tmp_path, holder, command):
    out = tmp_path / "out"
    pid = holder(out)
    before = sorted(p.name for p in tmp_path.iterdir())
    res = CliRunner().invoke(app, COMMANDS[command](out, *trained))
    refused(res, out, pid)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written, nothing staged


# ---------------------------------------------------------------- two real runs of `mapnet pretrain`
@pytest.mark.slow
def test_a_second_pretrain_into_a_running_folder_is_refused_and_a_killed_one_blocks_nothing(tmp_path):
    shards = write_tiny_shards(tmp_path / "shards")
    run = tmp_path / "run"
    err = tmp_path / "first.err"
    first = start_run(
        mapnet(
            "pretrain", str(shards), "--out", str(run), "--steps", "100000", "--set", "train.checkpoint_every=0", *TINY
        ),
        err,
    )
    try:
        wait_for(lambda: (run / "metrics.jsonl").is_file() and holder_pid(run) == first.pid, first, "training", err=err)
        pause([first])  # holding the lock, stopped: the runs below get the cores
        # The same folder spelled another way: a second `mapnet pretrain` as the shell runs it (exit 2, one line) ...
        other_spelling = str(tmp_path / "shards" / ".." / "run")
        second = subprocess.run(
            mapnet("pretrain", str(shards), "--out", other_spelling, "--steps", "2", *TINY),
            env=ENV,
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 2 and len(lines) == 1, second.stderr
        assert lines[0].startswith("error: ") and "run is in use" in lines[0] and f"pid {first.pid} " in lines[0]
        assert "Traceback" not in second.stderr and first.poll() is None
        # ... and through the launcher (`--nproc 2`, which locks before it starts torchrun), in this process.
        launched = CliRunner().invoke(
            app, ["pretrain", str(shards), "--out", other_spelling, "--steps", "2", "--nproc", "2", *TINY]
        )
        assert isinstance(launched.exception, MapnetError), launched.output
        text = str(launched.exception)
        assert "\n" not in text and "run is in use" in text and f"pid {first.pid} " in text and first.poll() is None
    finally:
        stop(first)  # SIGKILL mid-run: the lock file stays behind, the lock does not
    assert run_lock.lock_path(run).exists()
    third = CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(run), "--steps", "2", *TINY])
    assert third.exit_code == 0, third.output
    assert not run_lock.lock_path(run).exists()


@pytest.mark.slow
@pytest.mark.distributed
def test_nproc_2_holds_one_lock_for_the_job_and_refuses_a_second_run(tmp_path):
    """The launcher locks; its rank 0 accepts that lock (else the run would stop with "in use")."""
    shards = write_tiny_shards(tmp_path / "shards", train=64, valid=8)
    run = tmp_path / "run"
    err = tmp_path / "first.err"
    first = start_run(
        mapnet(
            "pretrain",
            str(shards),
            "--out",
            str(run),
            "--steps",
            "100000",
            "--nproc",
            "2",
            "--set",
            "train.checkpoint_every=0",
            "--set",
            "logging.log_every=1",
            *TINY,
        ),
        err,
    )
    try:
        # metrics.jsonl is written by rank 0 once training runs: the workers got past the lock
        wait_for(
            lambda: (run / "metrics.jsonl").is_file() and (run / "metrics.jsonl").stat().st_size > 0,
            first,
            "rank 0 to train",
            err=err,
        )
        assert holder_pid(run) == first.pid  # the launcher, not a worker
        job = processes_naming(run)  # the launcher, torchrun and its two workers
        pause(job)
        # A second run, in this process (a real process is refused from the shell in the test above).
        second = CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(run), "--steps", "2", *TINY])
        assert isinstance(second.exception, MapnetError), second.output
        assert f"pid {first.pid} " in str(second.exception) and first.poll() is None
        # The launcher killed alone: torchrun and its workers train on, and still hold the folder.
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
        size = (run / "metrics.jsonl").stat().st_size
        resume(job)
        wait_for(lambda: (run / "metrics.jsonl").stat().st_size > size, None, "the orphaned workers to train on")
        pause(job)
        third = CliRunner().invoke(app, ["pretrain", str(shards), "--out", str(run), "--steps", "2", *TINY])
        assert isinstance(third.exception, MapnetError) and "is in use" in str(third.exception), third.output
    finally:
        stop(first)
        kill_processes_naming(run)  # torchrun and its workers left their launcher's session: they would train on
