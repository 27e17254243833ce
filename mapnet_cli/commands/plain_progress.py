"""Progress as plain lines, for output that is not a terminal (SLURM logs, `nohup`, CI, `2> log`).

    step 120/2000 (6%)  loss 4.1234  lr 1.00e-04  12,345 tok/s  elapsed 0:01:23  eta 0:21:40

A line at every `logging.log_every` step (the steps metrics.jsonl gets), or
with `logging.plain_every_s = N` at most one per N seconds; the first logged
step and the last step always get one. No escape codes, no carriage returns:
each line is complete when written, so `tail -f` and `grep` work. Elapsed and
ETA are wall-clock time in this process (evaluation and checkpoints included),
counted from the end of its first step (or the resume), so a resumed run's
ETA covers only what is left.
"""

from __future__ import annotations

import time
from typing import Callable


def clock(seconds: float) -> str:
    """H:MM:SS (hours grow past 99 rather than wrap)."""
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class PlainProgress:
    """Decides when to print and formats the line; `emit` writes it (the CLI's console)."""

    def __init__(self, emit: Callable[[str], None], log_every: int, every_s: float = 0.0,
                 now: Callable[[], float] = time.monotonic):
        self.emit, self.log_every, self.every_s, self.now = emit, log_every, every_s, now
        self.start: tuple[float, int] | None = None  # (time, step) this process began at
        self.last_line: float | None = None

    def resumed(self, step: int) -> None:
        self.start = (self.now(), step)

    def step(self, data: dict) -> None:
        step, total = data["step"], data["total"]
        t = self.now()
        if self.start is None:  # from the end of the first step: its warm-up (allocation, compilation) is no rate
            self.start = (t, step)
        final = step == total
        if not final and step % self.log_every:
            return
        if not final and self.every_s and self.last_line is not None and t - self.last_line < self.every_s:
            return
        self.last_line = t
        self.emit(self.line(data, t))

    def line(self, data: dict, t: float) -> str:
        step, total = data["step"], data["total"]
        t0, step0 = self.start
        elapsed = t - t0
        done = step - step0
        eta = elapsed / done * (total - step) if done > 0 else float("nan")
        pct = 100 * step // max(total, 1)
        eta_text = clock(eta) if eta == eta else "?"
        return (f"step {step}/{total} ({pct}%)  loss {data['loss']:.4f}  lr {data['lr']:.2e}  "
                f"{data['tokens_per_s']:,.0f} tok/s  elapsed {clock(elapsed)}  eta {eta_text}")


__all__ = ["PlainProgress", "clock"]
