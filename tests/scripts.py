"""A benchmark script run as `python SCRIPT ARGS` runs it, but in the test's own process.

benchmarks/*.py are scripts (argparse, `if __name__ == "__main__"`). A subprocess of one starts torch again, ~3-7 s
of CPU on a 2-core machine before the script's first line of work; `run_script` runs the same file as __main__ with
its argv, in its folder's sys.path entry and the caller's working folder, and returns what it printed. What a
script changes in the process is put back after it (sys.argv, sys.path, the working folder, torch's thread count).
"""

from __future__ import annotations

import contextlib
import io
import os
import runpy
import sys
from pathlib import Path

import torch


def run_script(script: Path, *args: str, cwd: Path | None = None) -> str:
    """`python SCRIPT ARGS` (in `cwd`), in this process; returns its stdout. A non-zero exit fails with its message."""
    argv, path, here, threads = sys.argv[:], sys.path[:], os.getcwd(), torch.get_num_threads()
    out, err = io.StringIO(), io.StringIO()
    try:
        sys.argv = [str(script), *args]
        sys.path.insert(0, str(Path(script).parent))  # as `python SCRIPT` puts the script's folder first
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise AssertionError(
                        f"{Path(script).name} exited with {exc.code!r}: {err.getvalue()[-3000:]}"
                    ) from None
    finally:
        sys.argv, sys.path[:] = argv, path
        os.chdir(here)
        torch.set_num_threads(threads)
    return out.getvalue()
