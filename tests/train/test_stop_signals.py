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

from mapnet_cli.errors import MapnetError
from mapnet_cli.model import checkpoint
from mapnet_cli.train import pretrain
from mapnet_cli.train.stop_signals import Stopped
from signalled import signal_once_training, stopped_step
from test_train import TINY, metrics, tiny_settings, weights
from tiny_shards import write_tiny_shards


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
    with pytest.raises(Stopped, match=rf"^stopped by {signal.Signals(signum).name} after step 7; its checkpoint is "
                                      rf".*step-00000007; --resume continues the run") as stopped:
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
    s = tiny_settings("optim.lr=1e30", "optim.warmup_steps=0", "train.eval_every=0", "train.checkpoint_every=0",
                      "logging.log_every=100")
    with pytest.raises(MapnetError, match=r"non-finite loss at step \d+ \(found when SIGTERM stopped the run\); "
                                          r"stopped, no checkpoint was written yet"):
        pretrain(s, shards, tmp_path / "run", on_report=signal_at(7, signal.SIGTERM))
    assert not checkpoint.list_checkpoints(tmp_path / "run")


def test_a_stopped_budget_run_records_its_budget_as_not_spent_and_resume_finishes_it(shards, tmp_path):
    from test_budget import FakeClock, budget_settings

    s = budget_settings("train.time_budget=1s", "optim.warmup_fraction=0.25")
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
    cmd = [sys.executable, "-m", "mapnet_cli.cli", "pretrain", str(shards), "--out", str(out), "--preset", "tiny",
           *sets, "--steps", "100000", "--set", "train.eval_every=0", "--set", "train.checkpoint_every=0"]
    code, err = signal_once_training(cmd, out)
    assert code == 143, err
    lines = [ln for ln in err.splitlines() if "stopped by" in ln]
    assert len(lines) == 1 and "stopped by SIGTERM after step " in lines[0] and "Traceback" not in err
    step = stopped_step(lines[0])
    assert checkpoint.latest_checkpoint(out).name == f"step-{step:08d}"
