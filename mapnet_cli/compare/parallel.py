"""A comparison's runs trained side by side: as tasks on a Dask cluster (`--engine dask`), or one GPU each (`--gpus`).

    todo = cmp.runs_to_train(plan, note)                      # what `run_all` would train, in its order
    cmp.train_in_parallel(todo, shards, engine, address, on_tick)

Each run is the run it would be alone: the same settings (seeds, data order, evaluation masks), its own folder,
log, metrics and lock. A task trains its run, or resumes it from its newest checkpoint: a task that a lost worker
left half done is rescheduled by Dask and goes on from there, so the final checkpoints equal an undisturbed run's.
A run that fails with a user error (bad data, a bad setting) stops the comparison with that run's line, untried
again (`data.engine`). The coordinator only waits, shows progress (each run's metrics.jsonl, as it trains) and,
after, writes results.json itself. Bit-identical to the serial comparison on the CPU with as many torch threads
per run (`engine.threads`); on GPUs nondeterministic kernels may differ in the last bits (docs/evaluation.md).
"""

from __future__ import annotations

import shutil
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import MapnetError
from ..spread import Spread, set_task_threads
from .plan import PlannedRun


@dataclass
class RunState:
    """What the progress display shows of one run."""

    label: str
    path: Path
    total: int | None  # its steps (None: a budget run's, unknown in advance)
    status: str = "waiting"  # waiting, running, done
    step: int = 0
    started: float | None = None
    finished: float | None = None

    def read_step(self) -> None:
        """The newest logged step of the run (its metrics.jsonl's last train line), read as the run writes it."""
        from ..metrics_file import read_lines

        path = self.path / "metrics.jsonl"
        if not path.is_file():
            return
        try:
            steps = [rec["step"] for _, rec in read_lines(path) if rec.get("kind") == "train"]
        except MapnetError:
            return  # a line being written: read again at the next tick
        if steps:
            if self.status == "waiting":
                self.status, self.started = "running", time.monotonic()
            self.step = max(steps)

    def eta(self) -> float | None:
        """Seconds left at the rate so far (None until it can be said)."""
        if self.status != "running" or not self.total or not self.step or self.started is None:
            return None
        return (time.monotonic() - self.started) / self.step * (self.total - self.step)


def train_task(spec: dict) -> str:
    """On a worker: train (or resume) one planned run; its label. A top-level function, as Dask pickles it."""
    from .. import settings as settings_mod
    from ..model import checkpoint
    from ..run_lock import output_lock
    from ..train import pretrain

    set_task_threads(spec["threads"])
    settings = settings_mod.from_dict(tomllib.loads(spec["settings"]), f"run {spec['label']}")
    path, shards = Path(spec["path"]), Path(spec["shards"])
    snapshot = None
    if settings.variance.every:
        from ..evaluation.variance.snapshot import variance_snapshot as snapshot
    with output_lock(path):
        resume = checkpoint.latest_checkpoint(path) is not None
        if not resume and path.exists():
            shutil.rmtree(path)  # a first attempt killed before its first checkpoint: nothing worth keeping
        if settings.distributed.gpus:  # --gpus-per-run K: the run itself on K GPUs, through torchrun
            from ..train.launch import launch

            launch(shards, path, settings, resume)
        else:
            pretrain(settings, shards, path, resume=resume, command_line=spec["argv"], variance_snapshot=snapshot)
    return spec["label"]


def run_specs(todo: list[tuple[PlannedRun, bool]], shards: Path, threads: int) -> list[dict]:
    """One task's input per run: plain values a worker can unpickle without the coordinator's objects."""
    return [
        {
            "label": pr.label,
            "settings": pr.settings.to_toml(),
            "path": str(pr.path),
            "shards": str(shards),
            "threads": threads,
            "argv": list(sys.argv),
        }
        for pr, _ in todo
    ]


def train_in_parallel(
    todo: list[tuple[PlannedRun, bool]],
    shards: Path,
    spread: Spread,
    on_tick: Callable[[list[RunState]], None] = lambda states: None,
) -> None:
    """Train every run of `todo` ({run, resume}) as tasks of `spread`'s engine, `on_tick` called with every run's
    state about once a second and when one finishes; returns when all are done (the first failure stops the rest,
    in one line)."""
    if not todo:
        return
    states = [
        RunState(pr.label, pr.path, None if pr.settings.train.time_budget else pr.settings.train.steps)
        for pr, _ in todo
    ]
    with spread.engine(len(todo)) as engine:
        specs = run_specs(todo, shards, spread.threads(len(todo)))
        for index, _ in engine.as_completed(train_task, specs, "compare"):
            for state in states:
                if state.status != "done":
                    state.read_step()
            if index is not None:
                done = states[index]
                done.status, done.finished = "done", time.monotonic()
                done.step = done.total or done.step
            on_tick(states)


__all__ = ["RunState", "train_task", "run_specs", "train_in_parallel"]
