"""One command at a time per output: an exclusive OS lock held while a command writes its --out.

    with output_lock(out):       # in a command module, around everything that writes `out`
        ...

Two runs writing one folder at once interleave checkpoints, metrics lines and results.json into something no single
run produced. The second one is refused at once, in one line naming the folder and the holder (pid, host, command).

Why `fcntl.flock` on a file of our own (`PARENT/.NAME.lock`, beside the output), not the `filelock` package: the
refusal must say who holds the lock, which filelock does not record; we never wait, so its timeouts and polling buy
nothing; and it would be one more dependency for ~60 lines. The kernel drops a flock when its process dies (exit,
Ctrl-C, SIGKILL, the OOM killer), so a killed run never blocks the next one; on Linux, flock on NFS is mapped to NFS
byte-range locks (kernel >= 2.6.12), so it holds across nodes. Why beside the output, and how a distributed job
locks once (its launcher, node rank 0): docs/reliability.md#concurrent-runs-into-one-output.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from .atomic import make_dirs
from .errors import MapnetError

HELD_ENV = "MAPNET_HELD_LOCKS"  # {lock file: pid of the holder} for the holder's child processes
_HELD: dict[str, int] = {}  # lock file -> nesting depth in this process (flock would refuse our own second fd)
_FDS: dict[str, int] = {}  # lock file -> its locked descriptor


def held_fds() -> tuple[int, ...]:
    """The locked descriptors of this process, for a launcher to pass to torchrun: a flock lasts while any
    process holds its descriptor, so a launcher killed with SIGKILL leaves the lock with its surviving job."""
    return tuple(_FDS.values())


def lock_path(output: str | os.PathLike) -> Path:
    """`PARENT/.NAME.lock` for the output's real path (two spellings of one folder share one lock)."""
    real = Path(output).resolve()  # follows symlinks, also in the last component: where the writes land
    return real.parent / f".{real.name or 'root'}.lock"


def process_rank() -> int:
    """This process's rank in a job (0 outside one), from the variables torchrun or SLURM set."""
    if "RANK" in os.environ:
        return int(os.environ["RANK"])
    if int(os.environ.get("SLURM_NTASKS", "1")) > 1:
        return int(os.environ.get("SLURM_PROCID", "0"))
    return 0


@contextlib.contextmanager
def output_lock(output: str | os.PathLike, active: bool = True) -> Iterator[None]:
    """Hold the exclusive lock on `output` for the block; refuse in one line if another process holds it.

    `active=False` (a launcher on node rank > 0) and ranks other than 0 do not lock.
    """
    if not active or process_rank() != 0:
        yield
        return
    path = lock_path(output)
    key = str(path)
    if key in _HELD:  # a command run inside another that already holds this output
        _HELD[key] += 1
        try:
            yield
        finally:
            _HELD[key] -= 1
        return
    fd = _acquire(path, Path(output))
    if fd is None:  # held on our behalf by the launcher that started this worker
        yield
        return
    _HELD[key], _FDS[key] = 1, fd
    before = os.environ.get(HELD_ENV)
    os.environ[HELD_ENV] = json.dumps({**_inherited(), key: os.getpid()})
    try:
        yield
    finally:
        del _HELD[key], _FDS[key]
        if before is None:
            os.environ.pop(HELD_ENV, None)
        else:
            os.environ[HELD_ENV] = before
        _release(path, fd)


def _inherited() -> dict[str, int]:
    try:
        held = json.loads(os.environ.get(HELD_ENV, "{}"))
    except ValueError:
        return {}
    return held if isinstance(held, dict) else {}


def _acquire(path: Path, output: Path) -> int | None:
    """The locked fd, or None when the holder is the process MAPNET_HELD_LOCKS names for this file."""
    make_dirs(path.parent)
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise MapnetError(f"cannot lock {output}: cannot write {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise MapnetError(f"cannot lock {output} ({path}): {exc.strerror or exc}") from None
            if holder.get("pid") is not None and _inherited().get(str(path)) == holder.get("pid"):
                return None
            raise MapnetError(
                f"{output} is in use by another mapnet process ({_describe(holder)}); wait for it to "
                "finish or stop it, or choose another output"
            ) from None
        # A holder that released and removed the file between our open and our flock leaves us
        # locking a deleted inode: only a lock on the file that is still at `path` counts.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _write_holder(fd)
    return fd


def _release(path: Path, fd: int) -> None:
    # Unlink while still holding the lock, then close: a process that opened the old file
    # meanwhile sees it replaced (the samestat check above) and starts again.
    with contextlib.suppress(OSError):
        os.unlink(path)
    os.close(fd)


def _write_holder(fd: int) -> None:
    """Who holds the lock, for the refusal line. Written in place into the locked file, never by
    rename: a new inode would carry no lock."""
    info = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "command": " ".join(["mapnet", *sys.argv[1:]]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    with contextlib.suppress(OSError):  # best effort: the lock itself is what protects the folder
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode("utf-8"), 0)


def _read_holder(fd: int) -> dict:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _describe(holder: dict) -> str:
    if not holder.get("pid"):
        return "holder unknown: it is just starting"
    text = f"pid {holder['pid']} on {holder.get('host', '?')}"
    if holder.get("started"):
        text += f", since {holder['started']}"
    command = str(holder.get("command", ""))
    if command:
        text += f": {command if len(command) <= 120 else command[:117] + '...'}"
    return text


__all__ = ["HELD_ENV", "held_fds", "lock_path", "output_lock", "process_rank"]
