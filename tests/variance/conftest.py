"""Fixtures of the variance tests: saved tiny runs; one torch thread while they run."""

import pytest
import torch
from variance_fixtures import save_run, write_tiny_shards


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models gain nothing from threads, and on a shared, busy CPU extra threads spin-wait (20x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("variance")
    shards = write_tiny_shards(base / "shards", train=16, valid=24)
    return {"shards": shards, "uniform": save_run(base / "run-uniform", shards, "uniform"),
            "mapnet": save_run(base / "run-mapnet", shards, "mapnet")}
