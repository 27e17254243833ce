"""Every two-process (gloo) run that an equivalence test compares with one process, trained in one torchrun job.

One job for the whole session (`conftest.gloo_runs`, built once across the xdist workers): a job starts torch three
times (torchrun and two workers, ~15-20 s of CPU before the first step on a 2-core machine), so the runs of
tests/test_distributed.py and tests/train/test_train_mapnet.py go one after another in the same job
(`gloo.pretrain_in_one_job`). Their settings stay in those modules, beside the tests that train the one-process
reference from the same settings. `mapnet pretrain --nproc 2` as a user types it (the launcher) has its own tests:
tests/train/test_init_from.py (a run that matches one process), tests/test_distributed.py (a stop signal) and
tests/test_run_lock.py (the lock).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from gloo import pretrain_in_one_job
from tiny_shards import write_tiny_shards


def _test_module(path: str):
    """The test module at tests/PATH: the one pytest imported, or (when this session did not collect it) its file."""
    name = Path(path).stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(root: Path) -> dict[str, Path]:
    """{"shards", "shards-64", NAME...}, each NAME trained by 2 gloo processes in one torchrun job:

    - each masking of test_distributed.MASKINGS, "budget" (its BUDGET_RUN) and "stopped" (frequency's run again,
      logged every other step, its rank 1 alone sent SIGTERM after step 1, a step no rank reads back, then
      resumed), on "shards" (64 + 8 sequences of 32 tokens);
    - "mapnet-NAME" for each of test_train_mapnet.TWO_PROCESS_RUNS, on "shards-64" (64 + 8 of 64 tokens).
    """
    dist, mapnet = _test_module("test_distributed.py"), _test_module("train/test_train_mapnet.py")
    MASKINGS, _settings, BUDGET_RUN, TWO_PROCESS_RUNS = (
        dist.MASKINGS,
        dist._settings,
        dist.BUDGET_RUN,
        mapnet.TWO_PROCESS_RUNS,
    )
    shards = write_tiny_shards(root / "shards", train=64, valid=8)
    shards_64 = write_tiny_shards(root / "shards-64", train=64, valid=8, seq_len=64)
    plan = {m: (shards, _settings(m)) for m in MASKINGS}
    plan["budget"] = (shards, BUDGET_RUN)
    plan["stopped"] = (shards, [*_settings("frequency"), "logging.log_every=2"])
    plan.update({f"mapnet-{name}": (shards_64, sets) for name, sets in TWO_PROCESS_RUNS.items()})
    runs = pretrain_in_one_job(root, plan, stops={"stopped": 1})
    return {"shards": shards, "shards-64": shards_64, **runs}
