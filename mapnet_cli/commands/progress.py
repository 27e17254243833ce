"""Progress display shared by the commands that train: `pretrain`, `quickstart`, `finetune-glue`, `compare`.

`train_with_progress` trains in this process with a rich bar on a terminal and plain lines
otherwise; `SweepProgress` is one bar over a whole GLUE sweep.

Plain lines are for output that is not a terminal (SLURM logs, `nohup`, CI, `2> log`):

    step 120/2000 (6%)  loss 4.1234  lr 1.00e-04  12,345 tok/s  elapsed 0:01:23  eta 0:21:40

A line at every `logging.log_every` step (the steps metrics.jsonl gets), or with `logging.plain_every_s = N` at
most one per N seconds; the first logged step and the last step always get one. No escape codes, no carriage
returns: each line is complete when written, so `tail -f` and `grep` work. Elapsed and ETA are wall-clock time in
this process (evaluation and checkpoints included), counted from the end of its first step (or the resume), so a
resumed run's ETA covers only what is left.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from ..errors import ARGV_ENV, warn
from .phases_shown import PhaseNotes
from .shown import shown


def clock(seconds: float) -> str:
    """H:MM:SS (hours grow past 99 rather than wrap)."""
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class PlainProgress:
    """Decides when to print and formats the line; `emit` writes it (the CLI's console)."""

    def __init__(
        self,
        emit: Callable[[str], None],
        log_every: int,
        every_s: float = 0.0,
        now: Callable[[], float] = time.monotonic,
    ):
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
        if data["tokens_per_s"] is None or (not final and step % self.log_every):  # None: a step not read back
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
        return (
            f"step {step}/{total} ({pct}%)  loss {data['loss']:.4f}  lr {data['lr']:.2e}  "
            f"{data['tokens_per_s']:,.0f} tok/s  elapsed {clock(elapsed)}  eta {eta_text}"
        )


def below(level: float | None, loss: float) -> str:
    """' (unigram -0.42)': how far a held-out loss is under its set's unigram level (the plateau)."""
    return "" if level is None else f" (vs unigram {loss - level:+.3f})"


def warn_long_warmup(settings) -> None:
    """A warm-up as long as the run keeps the learning rate below optim.lr throughout (the paper's 10k
    steps on a 50-step run: lr <= 5e-7, nothing learned): worth one line, naming the fix."""
    o, steps = settings.optim, settings.train.steps
    if o.warmup.steps and o.warmup.steps >= steps:
        warn(
            f"optim.warmup.steps ({o.warmup.steps}) >= train.steps ({steps}): the learning rate never leaves its "
            f"warm-up (at most {o.lr * steps / o.warmup.steps:.2g}, optim.lr is {o.lr:g}); pass --set "
            f"optim.warmup.steps=N with N < {steps}, e.g. {max(1, steps // 10)}"
        )
    t = settings.train
    if t.short_seq.len and t.short_seq.steps >= steps:
        warn(
            f"train.short_seq.steps ({t.short_seq.steps}) >= train.steps ({steps}): the whole run trains on "
            f"{t.short_seq.len}-token pieces and never on whole sequences, which its held-out sets are; pass --set "
            f"train.short_seq.steps=N with N < {steps}, e.g. {max(1, steps // 4)}"
        )


def warn_emulated_bf16(settings) -> None:
    """bf16 autocast asked for on a CPU that emulates it (cpu_features.py): usually slower than fp32, worth one line."""
    import torch

    from ..cpu_features import cpu_native_bf16

    t = settings.train
    on_cpu = t.device == "cpu" or (t.device == "auto" and not torch.cuda.is_available())
    if t.precision == "bf16" and on_cpu and cpu_native_bf16() is False:
        warn(
            "train.precision is bf16 but this CPU has no bf16 instructions (no avx512_bf16, amx_bf16 or bf16 among "
            "its /proc/cpuinfo flags): bf16 is emulated here, slower than fp32 (18x for the hour recipe's step on an "
            "AMD EPYC); pass --set train.precision=fp32 (or bf16-native) unless you have measured otherwise"
        )


def train_with_progress(shards: Path, out: Path, settings, resume: bool, stop_at: int | None) -> None:
    """Train in this process with a rich progress bar (`pretrain`, `quickstart`, `compare`)."""
    from .. import distributed
    from ..train import pretrain as run_pretrain

    snapshot = None
    if settings.variance.every:  # lazily: only runs that ask for it pay the import
        from ..evaluation.variance.snapshot import variance_snapshot as snapshot

    warn_long_warmup(settings)
    warn_emulated_bf16(settings)

    console = Console(stderr=True)
    console.soft_wrap = not console.is_terminal  # a log line stays one line, however long (rich would wrap at 80)
    show_bar = settings.logging.progress and console.is_terminal
    # Not a terminal (SLURM, nohup, CI, `2> log`): complete plain lines, no escape codes, no redraws.
    plain = PlainProgress(
        lambda line: console.print(line, highlight=False, markup=False),
        settings.logging.log_every,
        settings.logging.plain_every_s,
    )
    columns = (
        TextColumn("[bold]pretrain"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    command_line = json.loads(os.environ[ARGV_ENV]) if ARGV_ENV in os.environ else sys.argv
    levels: dict = {}  # the unigram plateau of each held-out set, from the run's first report
    phases = PhaseNotes(settings)  # the warm-ups named where they start and end
    with Progress(*columns, console=console, disable=not show_bar) as bar:
        task = bar.add_task("pretrain", total=settings.train.steps, stats="")

        def report(kind: str, data: dict) -> None:  # markup=False: paths, set names and notes are the user's text
            if kind == "step":
                for line in phases.on_step(data):
                    console.print(line, highlight=False, markup=False)
                # total: a time-budget run's projected steps (the loop's estimate from the fraction spent)
                if data["tokens_per_s"] is None:  # a step the loop did not read back (between logging steps)
                    bar.update(task, completed=data["step"], total=data["total"])
                else:
                    stats = f"loss {data['loss']:.4f}  lr {data['lr']:.2e}  {data['tokens_per_s']:,.0f} tok/s"
                    bar.update(task, completed=data["step"], total=data["total"], stats=stats)
                if not show_bar:
                    plain.step(data)
            elif kind == "unigram":
                levels.update(data)
                sets = ", ".join(
                    f"{k.partition('@')[2] or 'main'} {v:.3f}" for k, v in data.items() if k.startswith("eval_unigram")
                )
                console.print(
                    f"unigram plateau: training tokens' entropy {data['train_entropy']:.3f} nats; held-out "
                    f"sets' unigram level {sets or '-'} (a model that ignores context scores about this)",
                    highlight=False,
                    markup=False,
                )
            elif kind == "eval":
                console.print(
                    f"eval @ {data['step']}: loss "
                    f"{data['eval_loss']:.4f}{below(levels.get('eval_unigram'), data['eval_loss'])}"
                    f"  accuracy {data['eval_accuracy']:.4f}"
                    f"  ({data['eval_masked_tokens']} masked tokens, set {data['eval_sha256'][:12]})"
                    f"{phases.eval_note()}",
                    highlight=False,
                    markup=False,
                )
                for key in (k for k in data if k.startswith("eval_loss@")):
                    name = key.partition("@")[2]
                    console.print(
                        f"  {name}: loss {data[key]:.4f}{below(levels.get('eval_unigram@' + name), data[key])}"
                        f"  accuracy {data['eval_accuracy@' + name]:.4f}",
                        highlight=False,
                        markup=False,
                    )
            elif kind == "checkpoint":
                console.print(f"checkpoint {data['path']}", highlight=False, markup=False)
            elif kind == "init_from":
                console.print(
                    f"starting from {data['kind']} weights {data['path']} (sha256 {data['weights_sha256'][:12]})",
                    highlight=False,
                    markup=False,
                )
                for note in data["notes"]:
                    console.print(f"  note: {note}", highlight=False, markup=False)
            elif kind == "budget":
                state = "spent" if data["finished"] else "not yet spent"
                steps = f"{data['steps']:,} step{'s' if data['steps'] != 1 else ''}"
                console.print(
                    f"time budget {data['time_budget']} {state}: {steps} in "
                    f"{data['spent_seconds']:,.1f} s of training (evaluation and checkpoints not counted)",
                    highlight=False,
                    markup=False,
                )
            elif kind == "resume":
                bar.update(task, completed=data["step"])
                plain.resumed(data["step"])
                console.print(f"resumed from {data['path']} (step {data['step']})", highlight=False, markup=False)

        last = run_pretrain(
            settings,
            shards,
            out,
            resume=resume,
            stop_at=stop_at,
            command_line=command_line,
            on_report=report,
            variance_snapshot=snapshot,
        )
    distributed.print0(f"done: {last}")


class RunsProgress:
    """One display for a comparison whose runs train side by side (`compare --engine dask`, `--gpus`): how many are
    done, running and left, each running run's step and ETA, the comparison's ETA. Redrawn in a terminal; elsewhere a
    plain line when a run finishes, and one a minute."""

    def __init__(self, console: Console, enabled: bool):
        from rich.live import Live

        self.console, self.started, self.last_line = console, None, 0.0
        self.live = (
            Live(console=console, transient=False, auto_refresh=False) if enabled and console.is_terminal else None
        )
        self.finished: set[str] = set()

    def __enter__(self):
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)

    def tick(self, states) -> None:
        import time

        from rich.table import Table

        now = time.monotonic()
        self.started = self.started or now
        done = [s for s in states if s.status == "done"]
        running = [s for s in states if s.status == "running"]
        steps = sum(s.step for s in states)
        left = sum((s.total or s.step) - s.step for s in states if s.total)
        eta = left / steps * (now - self.started) if steps and left else None
        head = (
            f"runs: {len(done)} done, {len(running)} running, {len(states) - len(done) - len(running)} waiting; "
            f"comparison ETA {clock(eta) if eta is not None else '?'}"
        )
        if self.live is not None:
            table = Table(title=head, title_justify="left")
            for column in ("run", "step", "ETA"):
                table.add_column(column, justify="left" if column == "run" else "right")
            for s in running:
                table.add_row(
                    shown(s.label),
                    f"{s.step:,}/{s.total:,}" if s.total else f"{s.step:,}",
                    clock(s.eta()) if s.eta() is not None else "?",
                )
            self.live.update(table, refresh=True)
        new = [s for s in done if s.label not in self.finished]
        self.finished |= {s.label for s in new}
        if self.live is None and (new or now - self.last_line >= 60):
            self.last_line = now
            for s in new:
                self.console.print(f"finished {s.label}", highlight=False, markup=False)
            self.console.print(head, highlight=False, markup=False)


class SweepProgress:
    """One progress bar over every training step of the whole sweep; notes printed above it."""

    def __init__(self, console: Console, enabled: bool):
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("steps"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
        )
        self.task = None

    def start(self, total_steps: int, runs: int, done: int) -> None:
        if done:
            self.console.print(
                f"resuming: {done} runs already in results.json, {runs} to go", highlight=False, markup=False
            )
        self.task = self.progress.add_task(
            "fine-tuning", total=max(total_steps, 1) if runs else 1, completed=0 if runs else 1
        )

    def run_started(self, description: str) -> None:
        self.progress.update(self.task, description=shown(description))  # a run's label: a path, a task name

    def advance(self, steps: int) -> None:
        self.progress.advance(self.task, steps)

    def run_finished(self, key: str, record: dict) -> None:
        pass

    def note(self, text: str) -> None:
        self.console.print(f"note: {text}", highlight=False, markup=False)


__all__ = [
    "ARGV_ENV",
    "PlainProgress",
    "RunsProgress",
    "SweepProgress",
    "clock",
    "train_with_progress",
    "warn_emulated_bf16",
    "warn_long_warmup",
]
