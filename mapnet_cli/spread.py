"""Where a command's independent runs go: tasks of a Dask cluster, or one per GPU of this node.

    spread = Spread(settings.engine, address)                  # --engine dask [--engine-address A]
    spread = Spread(settings.engine, None, gpus=8, per_run=1)  # --gpus 8 [--gpus-per-run 1]
    with spread.engine(len(specs)) as engine:
        for index, answer in engine.as_completed(task, spread.specs(specs), "glue"):
            ...

`compare`'s pretraining runs, `finetune-glue`'s grid and BLiMP's checkpoints use the one engine the data stages use
(`data/engine.py`). A local cluster gets one worker per run up to the cores, each with the torch threads a serial run
would use (`engine.threads`), which is what makes a run on a worker bit-identical to the serial run on the CPU.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import MapnetError


@dataclass(frozen=True)
class Spread:
    settings: object  # EngineSettings: workers, threads, retries
    address: str | None = None
    gpus: int = 0  # > 0: a local cluster on this node's GPUs, gpus // per_run workers
    per_run: int = 1

    def shape(self, tasks: int) -> tuple[int, int, list[dict[str, str]] | None]:
        """(worker processes, torch threads per task, each worker's environment or None) for `tasks` tasks."""
        from .data.engine import scheduler_address

        if self.gpus:
            envs = [
                {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in range(i * self.per_run, (i + 1) * self.per_run))}
                for i in range(self.gpus // self.per_run)
            ]
            return len(envs), self.settings.threads, envs
        if scheduler_address(self.address) is not None:
            return 0, self.settings.threads, None  # a cluster's workers: torch's own default unless asked
        workers, threads = local_shape(tasks, self.settings.workers, self.settings.threads)
        return workers, threads, None

    @contextlib.contextmanager
    def engine(self, tasks: int) -> Iterator:
        """The Dask engine for `tasks` tasks (data.engine.DaskEngine: run, as_completed)."""
        from .data.engine import dask_engine

        workers, _, envs = self.shape(tasks)
        with dask_engine(self.settings, self.address, workers, worker_envs=envs) as engine:
            yield engine

    def threads(self, tasks: int) -> int:
        """The torch threads each task sets on its worker (0: the worker's default)."""
        return self.shape(tasks)[1]

    def where(self) -> str:
        """How the progress line names it: "4 GPUs" or "Dask"."""
        return f"{self.gpus} GPUs" if self.gpus else "Dask"


def local_shape(tasks: int, workers: int, threads: int) -> tuple[int, int]:
    """(worker processes, torch threads per task) of a local cluster for `tasks` tasks: what engine.workers and
    engine.threads ask, 0 meaning the machine's cores shared out (one task per worker, at most one per core)."""
    cores = os.cpu_count() or 1
    if not workers:
        workers = max(1, min(tasks, cores // max(threads, 1)))
    return workers, threads or max(1, cores // workers)


def check_gpus(gpus: int, per_run: int) -> None:
    """`--gpus N [--gpus-per-run K]`: N no more than the GPUs this machine has, K dividing N; one line otherwise,
    before any work."""
    if gpus < 1 or per_run < 1 or gpus % per_run:
        raise MapnetError(f"--gpus ({gpus}) must be a positive multiple of --gpus-per-run ({per_run})")
    import torch

    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have == 0:
        raise MapnetError(
            f"--gpus {gpus}: this machine has no CUDA device; run on the CPU without --gpus, or with --engine dask"
        )
    if gpus > have:
        raise MapnetError(f"--gpus {gpus}: this machine has {have} CUDA device(s)")


def from_options(engine_settings, address: str | None, gpus: int, per_run: int) -> Spread | None:
    """The Spread that `--engine dask [--engine-address A]` or `--gpus N [--gpus-per-run K]` ask for (None: one run
    after another in this process); a contradiction or a GPU count this machine lacks is one line, before any work."""
    check_options(engine_settings, gpus, per_run)
    if gpus:
        check_gpus(gpus, per_run)
        return Spread(engine_settings, None, gpus, per_run)
    return Spread(engine_settings, address) if engine_settings.name == "dask" else None


def check_options(engine_settings, gpus: int, per_run: int) -> None:
    """--gpus with --engine dask, or --gpus-per-run without --gpus: one line."""
    if gpus and engine_settings.name == "dask":
        raise MapnetError(
            "--gpus runs on this node's GPUs (a local cluster of its own); with --engine dask the "
            "cluster's workers bring theirs: give one of them"
        )
    if per_run != 1 and not gpus:
        raise MapnetError("--gpus-per-run needs --gpus")


def set_task_threads(threads: int) -> None:
    """On a worker, before a task's work: the torch threads the coordinator gave it (0: leave the default)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


__all__ = ["Spread", "local_shape", "check_gpus", "from_options", "check_options", "set_task_threads"]
