"""A polite stop: SIGTERM or SIGUSR1 ends a training run after its current step, with a checkpoint.

SIGTERM is what `kill`, `timeout`, Kubernetes and a SLURM job at its time limit send before SIGKILL (SLURM
waits `KillWait`, 30 s by default); SIGUSR1 is what `sbatch --signal=USR1@90` sends 90 s before the limit.
Without a handler either ends the process at once and loses every step since the last checkpoint (up to
`train.checkpoint_every` steps, or ten minutes of a budget run). With `StopSignals` the run finishes the step it
is in, writes a checkpoint of it, records a budget run's time as not yet spent, and leaves with one line and
exit status 128 + the signal's number (143 for SIGTERM: what a shell reports for a process SIGTERM ended);
`--resume` then continues exactly, as after any checkpoint. Ctrl-C (SIGINT) still stops at once: a person at the
terminal wants it now, and the last checkpoint is where it resumes.

Every process of a job must stop at the same step (a checkpoint is written by rank 0 between collectives), so
with more than one process the ranks agree (the largest signal number any rank received, by one all-reduce), and
only on the steps whose results the loop already brings back to the host (`loop.Run._steps`' `read` steps:
logging, evaluation, checkpoint and variance steps, every step of a budget run), so no other step waits for the
host. One process checks its flag after every step. A signal that arrives as the run ends (at its last step, or
while the last checkpoint is written) stops nothing that was left, but is not forgotten: `pretrain` then raises
`Stopped` all the same (the run is complete), so a `compare` stops before its next arm.

`mapnet pretrain --gpus/--nproc` forwards both signals to torchrun (`distributed.launch`), which passes them to
its workers and waits `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` seconds (30 by default) before it kills them: enough for a
step and a checkpoint unless a step is very long; SLURM's own grace (`KillWait`) must be longer still.

Handlers are installed only from the main thread (Python delivers signals there alone; `signal.signal` refuses
other threads), never over a signal the caller ignores (`SIG_IGN`) or handles outside Python, and the previous
ones are put back when the run ends, whichever way.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import torch

from .. import distributed
from ..errors import MapnetError

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class Stopped(MapnetError):
    """A run stopped by a stop signal after checkpointing; the exit status is the shell's for that signal. Every
    process of a job raises it at the same step; one line says so (`MapnetError.once_per_job`)."""

    once_per_job = True

    def __init__(self, signum: int, step: int, checkpoint: Path, complete: bool = False):
        name = signal_name(signum)
        if complete:
            text = (f"stopped by {name} as the run ended at step {step}: the run is complete (its checkpoint is "
                    f"{checkpoint})")
        else:
            text = (f"stopped by {name} after step {step}; its checkpoint is {checkpoint}; --resume continues the run "
                    "(compare: run the same command again)")
        super().__init__(text)
        self.exit_code = 128 + signum


class StopSignals:
    """Within `with StopSignals() as stop:`, a stop signal is remembered (`received`) instead of ending the process."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                previous = signal.getsignal(signum)
                # Ignored on purpose by the caller, or handled outside Python (not restorable): left as it is.
                if previous is not None and previous != signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._remember)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _remember(self, signum: int, frame) -> None:
        self.received = self.received or signum  # the first one decides the exit status

    def agreed(self, info: distributed.DistInfo, read: bool) -> int | None:
        """The signal every rank stops for now, or None. Collective across ranks on `read` steps (the same
        steps on every rank); between them, with more than one process, None."""
        if not info.distributed:
            return self.received
        if not read:
            return None
        # The largest number any rank received: every rank stops, and all report the same signal.
        flag = torch.tensor([self.received or 0], dtype=torch.long, device=info.device)
        return int(distributed.all_reduce_max(flag, info).item()) or None


__all__ = ["STOP_SIGNALS", "Stopped", "StopSignals", "signal_name"]
