"""A run's bookkeeping: metrics.jsonl (and its TensorBoard / W&B sinks), run.json, versions, memory.

RUN/settings.toml    the resolved settings (rewritten on resume: flags may extend train.steps)
RUN/run.json         command, versions, seeds, model, shards and eval-set hashes; resumes appended;
                     with train.time_budget, the budget, the seconds spent and the steps they bought
RUN/metrics.jsonl    one JSON record per logged step / evaluation / variance snapshot
"""

from __future__ import annotations

import contextlib
import json
import platform
import resource
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import torch

from .. import __version__ as mapnet_version
from .. import atomic
from ..cpu_features import cpu_description
from ..metrics_file import read_lines
from ..model import checkpoint
from . import tracking


def memory_bytes(device: torch.device) -> int:
    """Peak CUDA memory allocated, or the process's peak resident set on CPU."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


class MetricsLog:
    """JSON lines in RUN/metrics.jsonl, appended and flushed line by line (rank 0 only); each record also
    goes to the TensorBoard / W&B sinks (`tracking.py`), so they show exactly what the file holds."""

    def __init__(self, path: Path, enabled: bool, resume_step: int | None, sinks: Sequence = ()):
        self.path, self.enabled, self.sinks = path, enabled, list(sinks)
        if enabled and path.exists():
            # Resumed: lines past the checkpoint were written by the interrupted run, which this one rewrites;
            # the one reader drops a torn last line and refuses a damaged one (it would be dropped unseen).
            # Fresh: every line is from an earlier run that never checkpointed, none of them this run's.
            lines = read_lines(path) if resume_step is not None else []
            keep = [ln for ln, record in lines if record["step"] <= resume_step]
            atomic.write_text(path, "".join(ln + "\n" for ln in keep))

    def write(self, record: dict) -> None:
        """An array value (a strategy's histogram samples) goes to the sinks only: in the JSON line it
        would be thousands of numbers per log step."""
        if self.enabled:
            histograms = {k: v for k, v in record.items() if isinstance(v, np.ndarray)}
            record = {k: v for k, v in record.items() if k not in histograms}
            # A full disk may leave a torn last line: read_lines drops it on resume.
            with atomic.full_disk_is_an_error(self.path), open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")
            if self.sinks:  # flattening the record is only for TensorBoard / W&B
                values = list(tracking.scalars(record))
                for sink in self.sinks:
                    sink.write(int(record["step"]), values, histograms)

    def close(self, failed: bool = False) -> None:
        """Close every sink. After a failed run a sink's own close error (a full disk, a dead W&B service) is
        swallowed, so the error that stopped the run is the one the user sees."""
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            if failed:
                with contextlib.suppress(Exception):
                    sink.close(True)
            else:
                sink.close(False)


def versions() -> dict[str, str]:
    import safetensors

    return {
        "python": platform.python_version(),
        "mapnet": mapnet_version,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "safetensors": safetensors.__version__,
    }


def write_run_files(run, shards: Path, argv: list[str]) -> None:
    """settings.toml and run.json of `run` (a `loop.Run`, rank 0): a fresh run writes run.json whole,
    a resumed one appends to its `resumes` list so the first start's record stays as it was."""
    t = run.settings.train
    atomic.make_dirs(run.out)
    checkpoint.clean_leftovers(run.out)
    atomic.write_text(run.out / "settings.toml", run.settings.to_toml())
    now = datetime.now(UTC).isoformat(timespec="seconds")
    # How the step ran (train.compile / precision / prefetch / attention_kernel resolved on this device): throughput
    # figures depend on it, and a resume on another machine may resolve them otherwise (so each start records its own).
    this = {
        "command": argv,
        "started": now,
        "world_size": run.info.world_size,
        "device": str(run.info.device),
        "compiled": t.compiles(run.info.device),
        "precision": "bf16" if t.autocasts_bf16(run.info.device) else "fp32",
        "prefetch": t.prefetch,
        "attention_kernel": t.attention_kernel_on(run.info.device),
        # The machine: a wall-clock budget buys what this CPU and thread count give (the hour recipe buys far fewer
        # steps on an AMD EPYC in fp32 than on a Xeon with AMX in bf16), so each start names both.
        "cpu": cpu_description(),
        "threads": torch.get_num_threads(),
    }
    path = run.out / "run.json"
    if run.resumed_from is not None and path.exists():
        info = json.loads(path.read_text(encoding="utf-8"))
        info.setdefault("resumes", []).append({**this, "from": str(run.resumed_from), "step": run.step})
    else:
        info = {
            **this,
            "versions": versions(),
            "seeds": {"train": t.seed, "eval": t.eval_seed},
            "model": run.cfg.to_dict(),
            "parameters": run.model.num_parameters(),
            "init_from": run.init_record,
            "shards": {
                "path": str(shards.resolve()),
                "manifest_sha256": atomic.sha256_file(run.data.dir / "manifest.json"),
                "train_sequences": len(run.data),
                "max_seq_len": run.data.max_seq_len,
            },
            "eval_set": {"sequences": len(run.eval_set.ids), "sha256": run.eval_set.sha256} if run.eval_set else None,
            "extra_eval": {
                name: {"sequences": len(d.ids), "sha256": d.sha256, **d.source} for name, d in run.extra_eval.items()
            },
            **getattr(run.strategy, "run_info", dict)(),
        }  # e.g. the PMI vocabulary's path and sha256
    atomic.write_json(path, info)


def record_budget(out: Path, budget: dict) -> None:
    """run.json's `budget` (train.time_budget: asked, spent, the steps it bought), rewritten each time the run
    stops, so after a --resume it covers every start."""
    path = out / "run.json"
    info = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    atomic.write_json(path, {**info, "budget": budget})


__all__ = ["memory_bytes", "MetricsLog", "versions", "write_run_files", "record_budget"]
