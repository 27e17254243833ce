"""A polite stop: SIGTERM or SIGUSR1 ends a training run after its current step, with a checkpoint.

SIGTERM is what `kill`, `timeout`, Kubernetes and a SLURM job at its time limit send before SIGKILL; SIGUSR1 what
`sbatch --signal=USR1@90` sends 90 s before the limit. Without a handler either loses every step since the last
checkpoint. With `StopSignals` the run finishes the step it is in, checkpoints it, records a budget run's time as
not yet spent, and exits with 128 + the signal's number (143 for SIGTERM); `--resume` continues exactly. Ctrl-C
(SIGINT) still stops at once. With several processes the ranks agree on the step (the largest signal number any rank
received, one all-reduce, on the steps the loop reads anyway).

A step that does not end would hold a polite stop off for ever, so a watchdog thread (`signal.set_wakeup_fd`) ends
the process itself, writing nothing, when a second stop request comes, when the step in progress runs
`max(STEP_GRACE_S, STEP_GRACE_FACTOR x the longest step so far)` past the request, or when a Ctrl-C has not reached
the main thread within `SIGINT_GRACE_S`: `--resume` then continues from the newest checkpoint as after a kill.
Handlers are installed only from the main thread and put back when the run ends. Each rule and why, torchrun's and
SLURM's grace, what no thread can do: docs/internals.md#trainstop_signalspy.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from .. import distributed
from ..errors import MapnetError

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
REQUESTS = (*STOP_SIGNALS, signal.SIGINT)  # what the watchdog counts as a request to stop
STEP_GRACE_S = 10.0  # a step may run this long past a stop request before it is abandoned ...
STEP_GRACE_FACTOR = 3.0  # ... or this many times the longest step so far, whichever is longer
SIGINT_GRACE_S = 3.0  # Ctrl-C not seen by the main thread in this long: it is stuck in one C call
REPEAT_WINDOW_S = 2.0  # the same signal again within this long is one request delivered twice, not a second


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class Stopped(MapnetError):
    """A run stopped by a stop signal after checkpointing; the exit status is the shell's for that signal. Every
    process of a job raises it at the same step; one line says so (`MapnetError.once_per_job`)."""

    once_per_job = True

    def __init__(self, signum: int, step: int, checkpoint: Path, complete: bool = False):
        name = signal_name(signum)
        if complete:
            text = (
                f"stopped by {name} as the run ended at step {step}: the run is complete (its checkpoint is "
                f"{checkpoint})"
            )
        else:
            text = (
                f"stopped by {name} after step {step}; its checkpoint is {checkpoint}; --resume continues the run "
                "(compare: run the same command again)"
            )
        super().__init__(text)
        self.exit_code = 128 + signum


class StopSignals:
    """Within `with StopSignals(out) as stop:`, a stop signal is remembered (`received`) instead of ending the
    process; the loop marks its steps (`step_started`, `step_ended`) so the watchdog can bound them (module doc).
    `out`: the run folder, to name the checkpoint `--resume` continues from; `exit`: how the watchdog ends the
    process (`os._exit`: no cleanup that could itself hang)."""

    def __init__(
        self, out: Path | None = None, exit: Callable[[int], None] = os._exit, step_grace: float | None = None
    ) -> None:
        self.received: int | None = None
        self._previous: dict[int, object] = {}
        self.out, self._exit = out, exit
        self.step_grace = STEP_GRACE_S if step_grace is None else step_grace
        self._lock = threading.Lock()
        self._first: tuple[int, float] | None = None  # the first request the watchdog heard, and when
        self._honoured = False  # the loop has acted on it (checkpointing, or unwinding)
        self._step: tuple[int, float] | None = None  # the step in progress and when it started
        self._step_done = 0  # the last step that ended
        self._longest = 0.0
        self._done = threading.Event()
        self._watchdog: threading.Thread | None = None
        self._wakeup: tuple[socket.socket, socket.socket] | None = None
        self._old_wakeup = -1

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                previous = signal.getsignal(signum)
                # Ignored on purpose by the caller, or handled outside Python (not restorable): left as it is.
                if previous is not None and previous != signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._remember)
            if self._previous:
                self._start_watchdog()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._done.set()  # the run has ended, whichever way: the watchdog abandons nothing after this
        if self._wakeup is not None:
            try:
                self._wakeup[1].send(b"\0")  # wakes its select now (0 is no signal), rather than in 0.2 s
            except OSError:
                pass
        if self._watchdog is not None:
            self._watchdog.join()
            self._watchdog = None
        if self._wakeup is not None:
            signal.set_wakeup_fd(self._old_wakeup)
            for sock in self._wakeup:
                sock.close()
            self._wakeup = None
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _remember(self, signum: int, frame) -> None:
        self.received = self.received or signum  # the first one decides the exit status
        if self._wakeup is None:  # no wakeup fd: the watchdog hears of it here, from the main thread
            self._request(signum)

    def agreed(self, info: distributed.DistInfo, read: bool) -> int | None:
        """The signal every rank stops for now, or None. Collective across ranks on `read` steps (the same
        steps on every rank); between them, with more than one process, None."""
        if not info.distributed:
            signum = self.received
        elif not read:
            return None
        else:
            # The largest number any rank received: every rank stops, and all report the same signal.
            flag = torch.tensor([self.received or 0], dtype=torch.long, device=info.device)
            signum = int(distributed.all_reduce_max(flag, info).item()) or None
        if signum:
            self._honoured = True  # checkpointing now: only a second request abandons it
        return signum

    # ------------------------------------------------------------ the steps, as the watchdog sees them
    def step_started(self, step: int) -> None:
        self._step = (step, time.monotonic())

    def step_ended(self) -> None:
        if self._step is not None:
            step, started = self._step
            self._longest = max(self._longest, time.monotonic() - started)
            self._step, self._step_done = None, step

    # ------------------------------------------------------------ the watchdog
    def _start_watchdog(self) -> None:
        pair = socket.socketpair()
        for sock in pair:
            sock.setblocking(False)
        try:
            old = signal.set_wakeup_fd(pair[1].fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):
            old = None
        if old is None or old != -1:  # taken (an asyncio loop's): put back, and hear signals from _remember
            if old is not None:
                signal.set_wakeup_fd(old)
            for sock in pair:
                sock.close()
        else:
            self._wakeup, self._old_wakeup = pair, old
        self._watchdog = threading.Thread(target=self._watch, name="mapnet-stop-watchdog", daemon=True)
        self._watchdog.start()

    def _watch(self) -> None:
        while not self._done.is_set():
            if self._wakeup is not None:
                ready, _, _ = select.select([self._wakeup[0]], [], [], 0.2)
                if ready:
                    try:
                        data = self._wakeup[0].recv(512)
                    except (BlockingIOError, OSError):
                        data = b""
                    for signum in data:
                        self._request(signum)
            else:
                self._done.wait(0.2)
            self._check_deadline()

    def _request(self, signum: int) -> None:
        if signum not in REQUESTS:
            return
        now = time.monotonic()
        if self._first is None:
            self._first = (signum, now)
        elif not (signum == self._first[0] and now - self._first[1] < REPEAT_WINDOW_S):
            self._abandon(signum, f"{signal_name(signum)} again")

    def _check_deadline(self) -> None:
        if self._first is None:
            return
        signum, at = self._first
        now = time.monotonic()
        if signum == signal.SIGINT:
            if now - at > SIGINT_GRACE_S:  # KeyboardInterrupt would have left the `with` by now
                self._abandon(signum, f"{signal_name(signum)} ({now - at:.0f} s ago)")
            return
        current = self._step
        if self._honoured or current is None:
            return
        step, started = current
        limit = max(self.step_grace, STEP_GRACE_FACTOR * self._longest)
        if now - max(at, started) > limit:
            self._abandon(
                signum,
                f"{signal_name(signum)}, step {step} still running {now - at:.0f} s after it "
                f"(longer than {limit:.0f} s)",
            )

    def _abandon(self, signum: int, why: str) -> None:
        with self._lock:
            if self._done.is_set():
                return  # the run ended meanwhile, on its own terms
            current = self._step
            where = f"step {current[0]}" if current is not None else f"the work after step {self._step_done}"
            message = f"stopped by {why}: abandoned {where} without a checkpoint; {self._resume_from()}"
            if int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))) == 0:
                tty = sys.stderr is not None and sys.stderr.isatty()
                # Over a progress bar's line, and its hidden cursor shown again.
                text = ("\r\x1b[2K" if tty else "\n") + f"error: {message}\n" + ("\x1b[?25h" if tty else "")
                try:
                    os.write(2, text.encode("utf-8", "replace"))
                except OSError:
                    pass
            self._done.set()
            self._exit(128 + signum)

    def _resume_from(self) -> str:
        from ..model import checkpoint

        latest = checkpoint.latest_checkpoint(self.out) if self.out is not None else None
        if latest is None:
            return "no checkpoint was written yet: the run starts again from its first step"
        return f"--resume continues from the newest checkpoint, {latest} (the steps after it are trained again)"


__all__ = ["STOP_SIGNALS", "Stopped", "StopSignals", "signal_name"]
