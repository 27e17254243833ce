"""A stop signal (SIGTERM, SIGUSR1) ends a run after its current step with a checkpoint, and --resume continues
exactly: the weights match an uninterrupted run's bit for bit (`train/stop_signals.py`)."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import torch
from signalled import signal_once_training, stopped_step
from test_train import TINY, metrics, tiny_settings, weights
from tiny_shards import write_tiny_shards

from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.train import pretrain
from mapnet_cli.train.stop_signals import Stopped


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> Path:
    return write_tiny_shards(tmp_path_factory.mktemp("shards") / "shards")


def signal_at(step: int, signum: int):
    """An on_report that sends this process `signum` when the run reports `step` (inside the loop, mid-run)."""

    def report(kind: str, data: dict) -> None:
        if kind == "step" and data["step"] == step:
            os.kill(os.getpid(), signum)

    return report


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGUSR1])
def test_a_stop_signal_checkpoints_the_step_it_arrived_in_and_resume_continues_exactly(shards, tmp_path, signum):
    s = tiny_settings()  # 20 steps, a checkpoint every 10: step 7's would otherwise be lost
    straight = pretrain(s, shards, tmp_path / "a")
    before = signal.getsignal(signum)
    with pytest.raises(
        Stopped,
        match=rf"^stopped by {signal.Signals(signum).name} after step 7; its checkpoint is "
        rf".*step-00000007; --resume continues the run",
    ) as stopped:
        pretrain(s, shards, tmp_path / "b", on_report=signal_at(7, signum))
    assert stopped.value.exit_code == 128 + signum
    assert signal.getsignal(signum) == before  # the run's handler is gone with the run
    assert checkpoint.latest_checkpoint(tmp_path / "b").name == "step-00000007"
    resumed = pretrain(s, shards, tmp_path / "b", resume=True)
    assert resumed.name == straight.name == "step-00000020"
    wa, wb = weights(straight), weights(resumed)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert [r["loss"] for r in metrics(tmp_path / "a")] == [r["loss"] for r in metrics(tmp_path / "b")]


def test_a_signal_at_the_last_step_stops_nothing_but_is_not_forgotten(shards, tmp_path):
    # The run is complete when the signal is read; the signal still ends the command (a compare stops there).
    with pytest.raises(Stopped, match=r"^stopped by SIGTERM as the run ended at step 20: the run is complete") as end:
        pretrain(tiny_settings(), shards, tmp_path / "run", on_report=signal_at(20, signal.SIGTERM))
    assert end.value.exit_code == 143 and checkpoint.latest_checkpoint(tmp_path / "run").name == "step-00000020"


def test_a_signal_the_caller_ignores_stays_ignored(shards, tmp_path):
    before = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        last = pretrain(tiny_settings(), shards, tmp_path / "run", on_report=signal_at(7, signal.SIGUSR1))
        assert last.name == "step-00000020" and signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_a_stop_after_an_unseen_non_finite_step_saves_nothing(shards, tmp_path):
    # One process stops on any step, also one whose gradient norm was not read: a non-finite one since the last
    # read is found then, and no checkpoint is written from those weights.
    s = tiny_settings(
        "optim.lr=1e30",
        "optim.warmup.steps=0",
        "train.eval_every=0",
        "train.checkpoint_every=0",
        "logging.log_every=100",
    )
    with pytest.raises(
        MapnetError,
        match=r"non-finite loss at step \d+ \(found when SIGTERM stopped the run\); "
        r"stopped, no checkpoint was written yet",
    ):
        pretrain(s, shards, tmp_path / "run", on_report=signal_at(7, signal.SIGTERM))
    assert not checkpoint.list_checkpoints(tmp_path / "run")


def test_a_stopped_budget_run_records_its_budget_as_not_spent_and_resume_finishes_it(shards, tmp_path):
    from test_budget import FakeClock, budget_settings

    s = budget_settings("train.time_budget=1s", "optim.warmup.fraction=0.25")
    straight = pretrain(s, shards, tmp_path / "a", clock=FakeClock())
    with pytest.raises(Stopped):
        pretrain(s, shards, tmp_path / "b", clock=FakeClock(), on_report=signal_at(3, signal.SIGTERM))
    assert json.loads((tmp_path / "b" / "run.json").read_text())["budget"]["finished"] is False
    resumed = pretrain(s, shards, tmp_path / "b", resume=True, clock=FakeClock())
    assert resumed.name == straight.name
    assert json.loads((tmp_path / "b" / "run.json").read_text())["budget"]["finished"] is True
    wa, wb = weights(straight), weights(resumed)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.slow
def test_the_cli_says_so_in_one_line_and_exits_as_the_shell_expects(shards, tmp_path):
    # `kill PID` on a real `mapnet pretrain`: exit status 143 and one line, the checkpoint of the last step on disk.
    out = tmp_path / "run"
    sets = [a for kv in TINY if not kv.startswith("train.steps") for a in ("--set", kv)]
    cmd = [
        sys.executable,
        "-m",
        "mapnet_cli.cli",
        "pretrain",
        str(shards),
        "--out",
        str(out),
        "--preset",
        "tiny",
        *sets,
        "--steps",
        "100000",
        "--set",
        "train.eval_every=0",
        "--set",
        "train.checkpoint_every=0",
    ]
    code, err = signal_once_training(cmd, out)
    assert code == 143, err
    lines = [ln for ln in err.splitlines() if "stopped by" in ln]
    assert len(lines) == 1 and "stopped by SIGTERM after step " in lines[0] and "Traceback" not in err
    step = stopped_step(lines[0])
    assert checkpoint.latest_checkpoint(out).name == f"step-{step:08d}"


# ---------------------------------------------------------------- a step that does not end (the watchdog)
class Exits:
    """The watchdog's exit, recorded instead of ending pytest."""

    def __init__(self):
        self.codes: list[int] = []
        self.at: float | None = None

    def __call__(self, code: int) -> None:
        import time

        self.codes.append(code)
        self.at = time.monotonic()

    def wait(self, seconds: float) -> list[int]:
        """Stand in for a step that does not end: the main thread busy (no step_ended) until an exit or `seconds`."""
        import time

        deadline = time.monotonic() + seconds
        while not self.codes and time.monotonic() < deadline:
            sum(range(10_000))  # Python work, as a step's would be: the handlers run, the step goes on
        return self.codes


def test_a_step_that_outlasts_its_grace_after_a_stop_is_abandoned_in_one_line(trained_runs, capfd):
    """`train.batch_size = 1e12`: the first step never ended and SIGTERM, which stops after the step, could not stop
    it. The watchdog ends the process once the step has run its grace past the request, naming the checkpoint
    --resume continues from; nothing is written."""
    import time

    from mapnet_cli.train.stop_signals import StopSignals

    run = trained_runs["uniform"]
    exits = Exits()
    with StopSignals(run, exit=exits, step_grace=0.5) as stop:
        stop.step_started(4)
        sent = time.monotonic()
        os.kill(os.getpid(), signal.SIGTERM)
        assert exits.wait(10) == [143] and 0.4 < exits.at - sent < 2.0, exits.at - sent
        assert stop.received == signal.SIGTERM
    err = capfd.readouterr().err.strip().splitlines()
    assert err == [
        f"error: stopped by SIGTERM, step 4 still running 1 s after it (longer than 0 s): abandoned step 4 "
        f"without a checkpoint; --resume continues from the newest checkpoint, {newest(run)} (the steps "
        "after it are trained again)"
    ], err


def newest(run: Path) -> Path:
    return checkpoint.latest_checkpoint(run)


def test_a_second_request_abandons_at_once_and_a_stop_the_loop_took_up_is_left_alone(tmp_path, capfd, monkeypatch):
    import time

    from mapnet_cli import distributed
    from mapnet_cli.train import stop_signals
    from mapnet_cli.train.stop_signals import StopSignals

    monkeypatch.setattr(stop_signals, "REPEAT_WINDOW_S", 0.5)
    for second in (signal.SIGTERM, signal.SIGUSR1):
        exits = Exits()
        with StopSignals(tmp_path, exit=exits, step_grace=60) as stop:  # the step's grace is far off
            stop.step_started(2)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            os.kill(os.getpid(), signal.SIGTERM)  # the same signal at once: one request, passed on twice (SLURM)
            assert exits.wait(0.5) == []
            sent = time.monotonic()
            os.kill(os.getpid(), second)
            assert exits.wait(5) == [128 + second] and exits.at - sent < 1.0
        assert (
            f"error: stopped by {signal.Signals(second).name} again: abandoned step 2 without a checkpoint; no "
            "checkpoint was written yet"
        ) in capfd.readouterr().err

    # The loop reads the request after its step and checkpoints: however long that takes, nothing is abandoned.
    exits = Exits()
    with StopSignals(tmp_path, exit=exits, step_grace=0.2) as stop:
        stop.step_started(1)
        os.kill(os.getpid(), signal.SIGTERM)
        stop.step_ended()
        assert stop.agreed(distributed.DistInfo(0, 1, 0, torch.device("cpu")), read=True) == signal.SIGTERM
        stop.step_started(2)  # (the loop breaks here; a step after it would not be timed either)
        assert exits.wait(1.0) == []
    # Between steps (evaluation, a checkpoint being written) no step is timed; after the run, nothing at all.
    with StopSignals(tmp_path, exit=exits, step_grace=0.2) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert exits.wait(1.0) == []
    assert exits.codes == [] and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.set_wakeup_fd(-1) == -1  # the wakeup fd is given back too


def test_a_ctrl_c_the_main_thread_does_not_see_is_acted_on_by_the_watchdog(tmp_path, monkeypatch, capfd):
    """Ctrl-C stops at once by KeyboardInterrupt, but only once the main thread runs Python again: inside one long
    torch call it waited for the call. Here the main thread's SIGINT handler is a stand-in that never raises."""
    import time

    from mapnet_cli.train import stop_signals
    from mapnet_cli.train.stop_signals import StopSignals

    monkeypatch.setattr(stop_signals, "SIGINT_GRACE_S", 0.3)
    before = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        exits = Exits()
        with StopSignals(tmp_path, exit=exits) as stop:
            stop.step_started(9)
            sent = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)
            assert exits.wait(5) == [130] and exits.at - sent < 1.5
    finally:
        signal.signal(signal.SIGINT, before)
    assert "error: stopped by SIGINT (0 s ago): abandoned step 9 without a checkpoint" in capfd.readouterr().err


@pytest.mark.slow
def test_a_real_run_stuck_in_a_step_ends_on_sigterm_and_resumes_exactly(shards, tmp_path):
    """`mapnet pretrain` whose step 3 never ends (train_step made to hang there): SIGTERM ends it within its grace
    (1 s here), exit status 143 and one line; `--resume` from step 2's checkpoint gives a straight run's weights."""
    import subprocess
    import time

    s = tiny_settings("train.steps=4", "train.checkpoint_every=2", "logging.log_every=1", "train.eval_every=0")
    straight = pretrain(s, shards, tmp_path / "straight")
    out, stuck = tmp_path / "run", tmp_path / "stuck"
    kept = [
        kv
        for kv in TINY
        if not kv.startswith(("train.steps", "train.eval_every", "train.checkpoint_every", "logging.log_every"))
    ]
    argv = [
        "mapnet",
        "pretrain",
        str(shards),
        "--out",
        str(out),
        "--preset",
        "tiny",
        *[a for kv in kept for a in ("--set", kv)],
        "--steps",
        "4",
        "--set",
        "train.checkpoint_every=2",
        "--set",
        "logging.log_every=1",
        "--set",
        "train.eval_every=0",
    ]
    script = f"""
import sys, time
from pathlib import Path
from mapnet_cli.cli import main
from mapnet_cli.train import loop, stop_signals
stop_signals.STEP_GRACE_S = 1.0
real = loop.train_step
def train_step(*args, **kwargs):
    if Path({str(out)!r}, "checkpoints", "step-00000002", "COMPLETE").is_file():
        Path({str(stuck)!r}).touch()
        while True:
            time.sleep(0.05)  # a step that never ends
    return real(*args, **kwargs)
loop.train_step = train_step
sys.argv = {argv!r}
main()
"""
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 120
        while not stuck.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 143 and took < 5, (proc.returncode, took, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("error: stopped by SIGTERM, step 3 still running") and "abandoned step 3" in lines[0]
    assert str(out / "checkpoints" / "step-00000002") in lines[0]
    resumed = pretrain(s, shards, out, resume=True)
    wa, wb = weights(straight), weights(resumed)
    assert resumed.name == "step-00000004" and all(torch.equal(wa[k], wb[k]) for k in wa)
