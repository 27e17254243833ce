"""TensorBoard and Weights & Biases sinks fed from the metrics lines (`logging.tensorboard`, `logging.wandb`).

    mapnet pretrain shards/ --out runs/x --set logging.tensorboard=true     # then: tensorboard --logdir runs/x/tb
    WANDB_MODE=offline mapnet pretrain shards/ --out runs/x --set logging.wandb=true --set logging.wandb_project=bert

Every record `train.MetricsLog` appends to metrics.jsonl is handed to each open sink as well (main process only), so
the three never disagree: every number in the record becomes a scalar under the same name (`loss`,
`eval_loss@books`, `mapnet/entropy`, ...) at the record's step; a nested number (the `variance` records) is named by
its path joined with "/"; strings, booleans and nulls (`eval_sha256`, a `mapnet/log_ratio` with nothing to average)
are skipped. MAP-Net's histograms go to the sinks only (docs/pretraining.md#watching-a-run).

Resuming: TensorBoard's writer starts with `purge_step = checkpoint step + 1` (0 for a fresh start in a folder whose
earlier run never checkpointed, as metrics.jsonl is emptied), so the resumed run's values replace what the
interrupted run logged past its checkpoint. W&B cannot rewrite history: the run keeps its id (RUN/wandb-run.json);
steps already logged keep their first values (W&B drops the new with a warning), which an exact resume reproduces.
"""

from __future__ import annotations

import importlib.util
import json
import math
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .. import atomic
from ..errors import MapnetError

TB_DIR = "tb"
WANDB_ID_FILE = "wandb-run.json"
EXTRAS = {"tensorboard": "tensorboard", "wandb": "wandb"}  # setting -> (module, extra) share the name


def require(logging_settings) -> None:
    """One line naming the extra to install for every sink switched on whose package is missing.

    Called on every rank before any work, so a missing package never leaves other ranks waiting."""
    missing = [name for name in EXTRAS if getattr(logging_settings, name) and importlib.util.find_spec(name) is None]
    if missing:
        installs = " and ".join(f"pip install 'mapnet[{name}]'" for name in missing)
        raise MapnetError(
            f"logging.{' and logging.'.join(missing)} = true needs {' and '.join(missing)}: {installs} "
            "(or set it to false)"
        )


def scalars(record: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """(name, value) for every finite number in a metrics record, nested dicts named by their path."""
    for key, value in record.items():
        name = f"{prefix}{key}"
        if key in ("kind", "step") and not prefix:
            continue
        if isinstance(value, dict):
            yield from scalars(value, f"{name}/")
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            yield name, float(value)


class TensorBoardSink:
    """Scalars in RUN/tb through torch's SummaryWriter (event files `tensorboard --logdir` reads)."""

    def __init__(self, out: Path, resume_step: int | None):
        from torch.utils.tensorboard import SummaryWriter

        # None would keep what an earlier, never-checkpointed run left there; 0 hides it, N+1 keeps steps <= N.
        self.writer = SummaryWriter(str(out / TB_DIR), purge_step=0 if resume_step is None else resume_step + 1)

    def write(self, step: int, values: list[tuple[str, float]], histograms: dict[str, np.ndarray]) -> None:
        for name, value in values:
            self.writer.add_scalar(name, value, global_step=step)
        for name, samples in histograms.items():
            self.writer.add_histogram(name, samples, global_step=step)

    def close(self, failed: bool) -> None:
        self.writer.close()


class WandbSink:
    """A W&B run (logging.wandb_project / wandb_name / wandb_mode) with the run's settings as its config."""

    def __init__(self, settings, out: Path, resume_step: int | None):
        import wandb

        lg = settings.logging
        id_file = out / WANDB_ID_FILE
        run_id = None
        if resume_step is not None and id_file.is_file():
            try:
                run_id = json.loads(id_file.read_text(encoding="utf-8"))["id"]
                if not isinstance(run_id, str):
                    raise TypeError("id is not a string")
            except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
                raise MapnetError(
                    f"{id_file} is not readable ({type(exc).__name__}: {exc}): delete it to log the "
                    'resumed run as a new W&B run, or write {"id": "<the W&B run id>"} into it'
                ) from None
        run_id = run_id or secrets.token_hex(4)  # W&B's own id format: 8 lower-case characters
        # Default name: the folder and its parent, so `compare`'s runs (RUN/<arm>/seed-N) are not all "seed-0".
        default_name = f"{out.resolve().parent.name}/{out.resolve().name}"
        self.run = wandb.init(
            project=lg.wandb_project,
            name=lg.wandb_name or default_name,
            id=run_id,
            resume="allow",
            dir=str(out),
            config=settings.to_dict(),
            mode=None if lg.wandb_mode == "auto" else lg.wandb_mode,
            # No console capture (it would interleave with the progress bar) and no system-stats sampler thread.
            settings=wandb.Settings(console="off", x_disable_stats=True, silent=True),
        )
        atomic.write_json(id_file, {"id": run_id, "project": lg.wandb_project})

    def write(self, step: int, values: list[tuple[str, float]], histograms: dict[str, np.ndarray]) -> None:
        import wandb

        self.run.log(
            {**dict(values), **{name: wandb.Histogram(samples) for name, samples in histograms.items()}}, step=step
        )

    def close(self, failed: bool) -> None:
        self.run.finish(exit_code=1 if failed else 0)


def open_sinks(settings, out: Path, resume_step: int | None) -> list:
    """The sinks the logging settings ask for (main process only); `require` has checked the packages."""
    sinks: list = []
    if settings.logging.tensorboard:
        sinks.append(TensorBoardSink(out, resume_step))
    if settings.logging.wandb:
        sinks.append(WandbSink(settings, out, resume_step))
    return sinks


__all__ = ["TB_DIR", "WANDB_ID_FILE", "require", "scalars", "open_sinks", "TensorBoardSink", "WandbSink"]
