"""`mapnet pretrain --gpus N` / `--nproc N`: the command run again under torchrun with the settings resolved here.

    launch(shards, out, settings, resume=False, stop_at=None)   # after run_settings; blocks until the job ends

What every worker would refuse alike is said once here, before torchrun starts (`inputs.check_launch`). The
launcher holds the run's lock for the job and passes it to its workers (run_lock.py); its settings travel as a
frozen settings file inside the run folder, so the workers train exactly what was resolved here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .. import distributed
from ..atomic import make_dirs
from ..errors import ARGV_ENV, MapnetError


def launch(shards: Path, out: Path, settings, resume: bool = False, stop_at: int | None = None) -> None:
    """Train `out` on `shards` in the processes `settings.distributed` asks for, through torchrun."""
    from ..run_lock import held_fds, output_lock
    from .inputs import check_launch

    d = settings.distributed
    check_launch(settings, shards, (d.gpus or d.nproc) * d.nnodes)  # once here, not once per worker
    # The launcher holds the lock for the job (its workers accept it); other nodes' launchers do not lock.
    with output_lock(out, active=d.node_rank == 0):
        make_dirs(out)
        frozen = out / f".launch-settings-{os.getpid()}.toml"
        frozen.write_text(settings.to_toml(), encoding="utf-8")
        args = ["pretrain", str(shards), "--out", str(out), "--config", str(frozen)]
        args += ["--resume"] if resume else []
        args += ["--stop-at", str(stop_at)] if stop_at is not None else []
        try:
            env = {**os.environ, ARGV_ENV: json.dumps(sys.argv)}
            code, signum = distributed.launch(args, d, env=env, pass_fds=held_fds())
        finally:
            frozen.unlink(missing_ok=True)
    if signum:  # passed on to the workers, which checkpoint the step they are in (stop_signals.py)
        from ..model import checkpoint
        from .stop_signals import Stopped, signal_name

        last = checkpoint.latest_checkpoint(out)
        if last is None:
            raise MapnetError(f"stopped by {signal_name(signum)} before the first checkpoint; nothing to resume")
        raise Stopped(signum, checkpoint.read_config(last)["step"], last)
    if code:
        raise MapnetError(f"training processes failed (torchrun exit code {code}); their messages are above")


__all__ = ["launch"]
