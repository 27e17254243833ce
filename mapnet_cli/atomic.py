"""Crash-safe writes: temp file or temp folder first, then one `os.replace`.

A reader never sees a half-written file: either the old content, the new
content, or nothing. Folders count as complete only when their marker file
(written last by the caller) exists. A full disk (or an exhausted quota)
part-way through a write is one line naming the file or folder being written;
the temp file or staging folder is removed and the previous output stays.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import MapnetError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# mkstemp/mkdtemp create private (0600/0700) entries; published outputs should get
# the permissions any ordinary file or folder gets under the user's umask.
_FILE_MODE = 0o666 & ~_umask()
_DIR_MODE = 0o777 & ~_umask()
FILE_MODE = _FILE_MODE  # for files a library writes itself (safetensors) before publishing


def fsync_dir(path: Path) -> None:
    """Make a rename inside `path` durable (no-op where unsupported)."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def make_dirs(path: str | Path) -> Path:
    """`mkdir -p` with a one-line error naming what is in the way: a file where a folder
    should be (the output path itself or a parent), or a folder the user cannot write."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
        if blocker is not None:
            raise MapnetError(f"cannot create folder {path}: {blocker} is a file, not a folder") from None
        raise MapnetError(f"cannot create folder {path}: {exc.strerror or exc}") from None
    return path


def _unwritable(path: Path, exc: OSError) -> MapnetError:
    return MapnetError(f"cannot write {path}: {exc.strerror or exc}")


_NO_SPACE = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


def out_of_space(exc: BaseException | None) -> str | None:
    """ "no space left on device" / "disk quota exceeded" when `exc` comes from a full disk, else None.

    Libraries wrap the OSError: safetensors keeps only its text ("... (os error 28)"), torch.save
    into a Python file object raises a RuntimeError whose __context__ is the OSError.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
            return _NO_SPACE[exc.errno]
        for code, reason in _NO_SPACE.items():
            if f"os error {code})" in str(exc) or os.strerror(code) in str(exc):
                return reason
        exc = exc.__cause__ or exc.__context__
    return None


class DiskFull(MapnetError):
    """A write failed for want of space: `reason` while writing `path` (the path the output would have had)."""

    def __init__(self, reason: str, path: str | Path):
        self.reason, self.path = reason, Path(path)
        super().__init__(f"{reason} while writing {path}")


@contextlib.contextmanager
def full_disk_is_an_error(path: str | Path, staging: Path | None = None) -> Iterator[None]:
    """Turn a full disk inside the block into one line naming `path`; anything else passes through.

    A file of the staging folder of `path` is named where it would have been published, not by
    its hidden temp path.
    """
    try:
        yield
    except DiskFull as exc:
        if staging is not None and exc.path.is_relative_to(staging):
            raise DiskFull(exc.reason, Path(path) / exc.path.relative_to(staging)) from None
        raise
    except MapnetError:
        raise
    except Exception as exc:
        reason = out_of_space(exc)
        if reason is None:
            raise
        raise DiskFull(reason, path) from None


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator:
    """Open a temp file beside `path`; on clean exit fsync and rename it over `path`."""
    path = Path(path)
    make_dirs(path.parent)
    if path.is_dir():
        raise MapnetError(f"cannot write {path}: it is a folder, not a file")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # a read-only folder
        raise _unwritable(path, exc) from None
    try:
        with full_disk_is_an_error(path):
            os.fchmod(fd, _FILE_MODE)
            with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as fh:
                yield fh
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str) -> None:
    with atomic_file(path, "w") as fh:
        fh.write(text)


def json_safe(obj):
    """NaN and infinities become null, so the document stays strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_json(path: str | Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def staging_dir(final: Path) -> Path:
    """A fresh temp folder beside `final`, to be published with `publish_dir`.

    Its name starts with `.` and ends in `.tmp-<pid>` so it never looks like
    finished output; stale ones from killed runs are removed by `clean_stale`.
    """
    make_dirs(final.parent)
    if final.exists() and not final.is_dir():  # --overwrite replaces an output folder, never a user's file
        raise MapnetError(f"{final} is a file, not an output folder; choose another output path")
    clean_stale(final)
    try:
        path = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=f".tmp-{os.getpid()}", dir=final.parent))
    except OSError as exc:  # a read-only folder
        raise _unwritable(final, exc) from None
    path.chmod(_DIR_MODE)
    return path


def clean_stale(final: Path) -> None:
    """Remove staging folders of earlier runs of `final` whose process is gone."""
    for cand in final.parent.glob(f".{final.name}.*.tmp-*"):
        pid = cand.name.rsplit("-", 1)[-1]
        if pid.isdigit() and _alive(int(pid)) and int(pid) != os.getpid():
            continue
        shutil.rmtree(cand, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def staged_output(final: Path, overwrite: bool = False) -> Iterator[Path]:
    """Build an output folder in a staging folder; publish it on clean exit, delete it on any failure.

    The caller writes the folder's marker (manifest, COMPLETE) last, inside the
    block. If `final` appeared meanwhile and `overwrite` is false, nothing is
    published and the user is told in one line.
    """
    staging = staging_dir(final)
    try:
        with full_disk_is_an_error(final, staging):
            yield staging
            try:
                publish_dir(staging, final, overwrite=overwrite)
            except FileExistsError:
                raise MapnetError(
                    f"{final} appeared while it was being written; pass --overwrite to replace it"
                ) from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def publish_dir(staging: Path, final: Path, overwrite: bool = False) -> None:
    """Move a finished staging folder to `final` (replacing an old one if allowed)."""
    fsync_dir(staging)
    if final.exists():
        if not overwrite:
            raise FileExistsError(final)
        trash = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, trash)
        os.replace(staging, final)
        if trash.is_symlink():  # rmtree refuses a link: it would be left behind, hidden
            trash.unlink()
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(staging, final)
    fsync_dir(final.parent)
