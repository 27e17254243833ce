"""GLUE fixtures for the evaluation tests (glue/, the probe); the helpers live in glue_fixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from glue_fixtures import make_checkpoint, make_glue_dir, pretrain_tiny


@pytest.fixture
def glue_dir(tmp_path) -> Path:
    return make_glue_dir(tmp_path / "glue")


@pytest.fixture(scope="session")
def fake_run(tmp_path_factory) -> Path:
    """One run folder, two random-weight checkpoints (steps 100 and 200)."""
    run = tmp_path_factory.mktemp("runs") / "fake-bert"
    make_checkpoint(run, steps=(100, 200))
    return run


@pytest.fixture(scope="session")
def pretrained_tiny(tmp_path_factory, shared_data) -> Path:
    """A `tiny` run pretrained on real text (books) through preprocess -> shard -> pretrain."""
    return pretrain_tiny(tmp_path_factory.mktemp("pretrained"), shared_data)
