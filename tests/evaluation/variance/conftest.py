"""Fixtures of the variance tests: saved tiny runs."""

import pytest
from variance_fixtures import save_run, write_tiny_shards


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("variance")
    shards = write_tiny_shards(base / "shards", train=16, valid=24)
    return {
        "shards": shards,
        "uniform": save_run(base / "run-uniform", shards, "uniform"),
        "mapnet": save_run(base / "run-mapnet", shards, "mapnet"),
    }
