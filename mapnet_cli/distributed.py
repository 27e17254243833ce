"""All process-group handling: detect, init, wrap, reduce, clean up, launch.

    mapnet pretrain SHARDS --out RUN --gpus 8          # starts torchrun itself
    torchrun --nproc-per-node 8 -m mapnet_cli.cli pretrain SHARDS --out RUN
    srun --ntasks-per-node 8 mapnet pretrain SHARDS --out RUN   # MASTER_ADDR/PORT exported
    mapnet pretrain SHARDS --out RUN --nproc 2         # CPU, gloo (tests, debugging)

A process is part of a job when torchrun's RANK/WORLD_SIZE/LOCAL_RANK are set,
or, failing that, when SLURM started several tasks (SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID) and MASTER_ADDR/MASTER_PORT say where to meet. Otherwise it is a
single process — unless `--gpus`/`--nproc` ask for a launch, in which case
`launch` re-runs the same command under `torch.distributed.run` (via `mapnet_cli.torchrun`).

Nothing else in mapnet imports `torch.distributed`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from .errors import LAUNCHED_ENV, MapnetError


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands in the job."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")
    backend: str | None = None  # None: no process group
    owns_group: bool = True  # False: the caller made the process group, and tears it down

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.backend is not None


def job_env(environ: dict[str, str] | None = None) -> dict[str, int] | None:
    """{rank, local_rank, world_size} of a job someone else started, else None."""
    env = os.environ if environ is None else environ
    if "RANK" in env and "WORLD_SIZE" in env:
        return {
            "rank": int(env["RANK"]),
            "world_size": int(env["WORLD_SIZE"]),
            "local_rank": int(env.get("LOCAL_RANK", 0)),
        }
    if int(env.get("SLURM_NTASKS", "1")) > 1 and "SLURM_PROCID" in env:
        if not env.get("MASTER_ADDR") or not env.get("MASTER_PORT"):
            raise MapnetError(
                "SLURM started several tasks but MASTER_ADDR/MASTER_PORT are not set; export them in the "
                "batch script (e.g. MASTER_ADDR=$(scontrol show hostnames | head -n1), MASTER_PORT=29500)"
            )
        return {
            "rank": int(env["SLURM_PROCID"]),
            "world_size": int(env["SLURM_NTASKS"]),
            "local_rank": int(env.get("SLURM_LOCALID", 0)),
        }
    return None


def pick_device(preference: str = "auto", local_rank: int = 0) -> torch.device:
    if preference == "cuda" or (preference == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise MapnetError("train.device is 'cuda' but no CUDA device is available")
        if local_rank >= torch.cuda.device_count():
            raise MapnetError(f"local rank {local_rank} has no GPU ({torch.cuda.device_count()} visible)")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def init(device_preference: str = "auto", backend: str = "auto") -> DistInfo:
    """Join the job's process group if there is one; pick this process's device.

    A process group the caller already made (a script that runs several trainings in one torchrun job, a
    notebook) is joined as it is and left up by `cleanup`: destroying it would break the caller's next use."""
    if dist.is_available() and dist.is_initialized():
        return _join_callers_group(device_preference, backend)
    env = job_env()
    if env is None or env["world_size"] == 1:
        return DistInfo(device=pick_device(device_preference, 0))
    device = pick_device(device_preference, env["local_rank"])
    chosen = ("nccl" if device.type == "cuda" else "gloo") if backend == "auto" else backend
    # SLURM does not export torchrun's variables; env:// reads them.
    os.environ.setdefault("RANK", str(env["rank"]))
    os.environ.setdefault("WORLD_SIZE", str(env["world_size"]))
    os.environ.setdefault("LOCAL_RANK", str(env["local_rank"]))
    dist.init_process_group(
        chosen,
        init_method="env://",
        rank=env["rank"],
        world_size=env["world_size"],
        device_id=device if device.type == "cuda" else None,
    )
    return DistInfo(env["rank"], env["local_rank"], env["world_size"], device, chosen)


def _join_callers_group(device_preference: str, backend: str) -> DistInfo:
    # torchrun's local rank, else SLURM's (a script under plain srun; the caller met its peers its own way, so
    # MASTER_ADDR, which job_env asks of SLURM jobs, need not be set).
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", 0)))
    device = pick_device(device_preference, local_rank)
    # Which backend reduces which device's tensors ("cpu:gloo,cuda:nccl"); a group made without naming a backend
    # reports get_backend() == "undefined", so the per-device map is what says whether this device can train in it.
    config = dist.get_backend_config()
    by_device = dict(part.split(":", 1) for part in config.split(",") if ":" in part)
    chosen = by_device.get(device.type)
    if chosen is None:
        raise MapnetError(
            f"this process already joined a process group of {config!r}, which cannot reduce "
            f"{device.type} tensors; set train.device to match it"
        )
    if backend not in ("auto", chosen):
        raise MapnetError(
            f"distributed.backend is {backend!r} but this process already joined a process group "
            f"that reduces {device.type} tensors with {chosen!r}; leave distributed.backend at 'auto'"
        )
    return DistInfo(dist.get_rank(), local_rank, dist.get_world_size(), device, chosen, owns_group=False)


def cleanup(info: DistInfo) -> None:
    if info.distributed and info.owns_group and dist.is_initialized():
        dist.destroy_process_group()


@contextlib.contextmanager
def process_group(device_preference: str = "auto", backend: str = "auto") -> Iterator[DistInfo]:
    """`init` on entry, `cleanup` on the way out, whatever happens in between."""
    info = init(device_preference, backend)
    try:
        yield info
    finally:
        cleanup(info)


def print0(*args: Any, **kwargs: Any) -> None:
    """print on rank 0 only (every process of a job shares the terminal)."""
    if int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))) == 0:
        print(*args, **kwargs)


# ---------------------------------------------------------------- collectives used by training
def wrap_model(model: nn.Module, info: DistInfo, bucket_cap_mb: float = 25.0, static_graph: bool = False) -> nn.Module:
    """DistributedDataParallel when in a job, the model itself otherwise. `bucket_cap_mb` and `static_graph`:
    `distributed.bucket_cap_mb` / `distributed.static_graph` (how gradients are all-reduced, not what they are)."""
    if not info.distributed:
        return model
    ids = [info.device.index] if info.device.type == "cuda" else None
    # None at torch's default: torch treats any bucket_cap_mb it is given as not the default and drops its small
    # first bucket (1 MiB), so passing 25 would change how every default run groups its all-reduces.
    return nn.parallel.DistributedDataParallel(
        model, device_ids=ids, bucket_cap_mb=bucket_cap_mb if bucket_cap_mb != 25.0 else None, static_graph=static_graph
    )


def no_sync(model: nn.Module, sync: bool):
    """Skip DDP's gradient all-reduce on all but the last micro-batch of a step."""
    if sync or not isinstance(model, nn.parallel.DistributedDataParallel):
        return contextlib.nullcontext()
    return model.no_sync()


def all_reduce_sum(tensor: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Sum over ranks, in place; returns the tensor (a no-op for one process)."""
    if info.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_reduce_max(tensor: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Maximum over ranks, in place; returns the tensor (a no-op for one process)."""
    if info.distributed:
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor


def barrier(info: DistInfo) -> None:
    if info.distributed:
        dist.barrier()


def broadcast_object(obj: Any, info: DistInfo) -> Any:
    """Rank 0's `obj` on every rank (e.g. a decision only rank 0 can make)."""
    if not info.distributed:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


# ---------------------------------------------------------------- launching
def should_launch(gpus: int, nproc: int) -> bool:
    """True when asked for several processes and not already inside a job."""
    return (gpus > 0 or nproc > 0) and job_env() is None


def torchrun_command(
    module_args: Sequence[str], nproc_per_node: int, nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: str = ""
) -> list[str]:
    """`python -m torch.distributed.run ... -m mapnet_cli.cli <module_args>` (through `mapnet_cli.torchrun`: a stop
    signal then ends torchrun with a status, not a traceback)."""
    cmd = [sys.executable, "-m", "mapnet_cli.torchrun", f"--nproc-per-node={nproc_per_node}", f"--nnodes={nnodes}"]
    if nnodes > 1:
        cmd += ["--rdzv-backend=c10d", f"--rdzv-endpoint={rdzv_endpoint}", f"--node-rank={node_rank}"]
    else:
        cmd += ["--standalone"]  # a free port on localhost, no endpoint to pick
    return cmd + ["-m", "mapnet_cli.cli", *module_args]


# Signals the launcher passes on to torchrun, which passes them to its workers: the stop signals a training run
# checkpoints on (train/stop_signals.py). torchrun handles SIGUSR1 only when told to.
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
TORCHRUN_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"


def launch(
    module_args: Sequence[str], dist_settings, env: dict[str, str] | None = None, pass_fds: Sequence[int] = ()
) -> tuple[int, int | None]:
    """Run `mapnet <module_args>` in one process per GPU (`distributed.gpus`) or CPU worker (`distributed.nproc`,
    gloo); return torchrun's exit code and the stop signal passed on to it, if one came (else None).
    `pass_fds`: descriptors torchrun inherits (the output lock, held while it lives)."""
    d = dist_settings
    count = d.gpus or d.nproc
    if d.gpus and d.gpus > torch.cuda.device_count():
        raise MapnetError(f"--gpus {d.gpus} asked for, but {torch.cuda.device_count()} CUDA devices are visible")
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // count)))
    child_env.setdefault("TORCHELASTIC_SIGNALS_TO_HANDLE", TORCHRUN_SIGNALS)
    child_env[LAUNCHED_ENV] = "1"  # an error every worker raises alike is then said once, by the launcher
    cmd = torchrun_command(module_args, count, d.nnodes, d.node_rank, d.rdzv_endpoint)
    received: list[int] = []
    with subprocess.Popen(cmd, env=child_env, pass_fds=tuple(pass_fds)) as proc:

        def forward(signum: int, frame) -> None:
            received.append(signum)
            proc.send_signal(signum)

        on_main = threading.current_thread() is threading.main_thread()
        previous = {s: signal.signal(s, forward) for s in FORWARDED_SIGNALS} if on_main else {}
        try:
            code = proc.wait()
        except BaseException:  # as subprocess.call: Ctrl-C here (torchrun got its own SIGINT) ends the child too
            proc.kill()
            raise
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    return code, (received[0] if received else None)


__all__ = [
    "DistInfo",
    "job_env",
    "pick_device",
    "init",
    "cleanup",
    "process_group",
    "print0",
    "wrap_model",
    "no_sync",
    "all_reduce_sum",
    "all_reduce_max",
    "barrier",
    "broadcast_object",
    "should_launch",
    "torchrun_command",
    "launch",
]
