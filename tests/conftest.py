"""Shared fixtures: where the real test data lives, and small slices of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from built_once import built_once

REPO = Path(__file__).resolve().parents[1]
# The brief's layout: shared/ sits beside the checkout (../shared/data); MAPNET_SHARED_DATA overrides.
SHARED_DATA = Path(os.environ.get("MAPNET_SHARED_DATA", REPO.parent / "shared" / "data"))
# The experiment scripts some tests run call `uv run ...`. The environment is this session's, already synced (by the
# README's `uv run pytest`), so theirs need not sync it again: each sync also checks every installed file's bytecode
# (pyproject's [tool.uv] compile-bytecode), ~0.5 s a call.
os.environ.setdefault("UV_NO_SYNC", "1")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"real test data not found at {SHARED_DATA} (set MAPNET_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Every test uses tiny models, for which one intra-op thread is fastest.

    With tensors this small each op is dominated by thread hand-off, and on a
    busy 2-core machine (CI, or other test sessions) extra threads spin-wait:
    a 1-layer forward pass was measured 20-500x slower with a 2-thread pool.
    Session scope, so session- and module-scoped training fixtures get it too.
    Subprocess tests set OMP_NUM_THREADS themselves.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _synthetic_shards(root: Path) -> Path:
    from mapnet_cli.data.preprocess import run_preprocess
    from mapnet_cli.data.shard_writer import run_shard
    from mapnet_cli.settings import resolve

    s = resolve(
        None,
        None,
        [
            "synthetic.documents=300",
            "preprocess.vocab_size=1024",
            "preprocess.workers=1",
            "shard.max_seq_len=64",
            "shard.valid_fraction=0.1",
            "shard.workers=1",
        ],
    )
    run_preprocess(["synthetic:"], root / "prep", s)
    run_shard(root / "prep", root / "shards", s)
    assert (root / "shards" / "token_kinds.json").is_file()
    return root / "shards"


@pytest.fixture(scope="session")
def synthetic_shards(tmp_path_factory) -> Path:
    """The embedded synthetic language, small: ~580 training sequences of 64 tokens, with token kinds.
    Read-only (shared by every test of the session)."""
    return built_once(tmp_path_factory, "synthetic", _synthetic_shards)


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory) -> dict[str, Path]:
    """Real tiny runs ({"shards", "uniform", "mapnet"}, see trained_runs.py): for tests that read a checkpoint.
    Read-only: a test that damages or extends one works on a copy."""
    from trained_runs import trained_runs as build

    return built_once(tmp_path_factory, "trained", build)


@pytest.fixture(scope="session")
def pretrained_tiny(tmp_path_factory, shared_data) -> Path:
    """A `tiny` run pretrained on real text (books) through preprocess -> shard -> pretrain (100 steps; its shards
    are the sibling folder "shards"). For finetune-glue's and export's real-text tests. Read-only."""
    from trained_runs import pretrain_tiny

    return built_once(tmp_path_factory, "pretrained", lambda root: pretrain_tiny(root, shared_data))


@pytest.fixture(scope="session")
def gloo_runs(tmp_path_factory) -> dict[str, Path]:
    """Every two-process run that the equivalence tests compare with one process, from one torchrun job
    (gloo_runs.py): {"shards", "shards-64", NAME...}. Read-only."""
    from gloo_runs import build

    return built_once(tmp_path_factory, "gloo", build)


@pytest.fixture(scope="session")
def dask_scheduler() -> str:
    """The address of a local Dask cluster of 2 single-threaded worker processes (nannies restart a killed one),
    shared by the tests that send runs to a cluster (--engine dask --engine-address). Each worker starts torch once,
    on its first task; a test that has mapnet start a cluster of its own (engine.workers) does not need this."""
    pytest.importorskip("distributed")
    import logging

    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0", silence_logs=logging.ERROR
    ) as cluster:
        yield cluster.scheduler_address
