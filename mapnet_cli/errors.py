"""The one error type for failures a user can fix, and the one warning line.

Library code raises `MapnetError` with a one-line message; the CLI layer
(`mapnet_cli.cli`) prints it once, in red, and exits non-zero. Anything else
that escapes is a bug and keeps its traceback. `warn` is for what is harmless
but would otherwise go unnoticed (a run that never leaves its warm-up).
"""

import os
import sys


class MapnetError(Exception):
    """A user-facing failure: bad input, bad settings, a corrupt file."""

    exit_code = 2
    # True: every process of a job raises it alike, and one line says it (`cli.fail`): the launcher's where
    # `mapnet ... --gpus/--nproc` started the job (`LAUNCHED_ENV`), else rank 0's.
    once_per_job = False

    def __init__(self, message: str):
        # Collapse to one line: the CLI promises one-line errors.
        super().__init__(" ".join(str(message).split()))


LAUNCHED_ENV = "MAPNET_LAUNCHED"  # set by `distributed.launch` for its workers
ARGV_ENV = "MAPNET_LAUNCH_ARGV"  # the command line a torchrun worker records: the one the user typed (train/launch.py)


def warn(message: str) -> None:
    """One yellow `warning:` line on stderr, from rank 0 only (every process of a job shares the terminal)."""
    if int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0"))) != 0:
        return
    from rich.console import Console
    from rich.markup import escape

    # escape: a path such as runs/[exp1]/... is text, not rich markup (it would vanish from the line)
    Console(file=sys.stderr).print(
        f"[bold yellow]warning:[/] {escape(' '.join(str(message).split()))}",
        highlight=False,
        markup=True,
        soft_wrap=True,
    )
