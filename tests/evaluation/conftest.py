"""GLUE fixtures for the evaluation tests (glue/, the probe); the helpers live in glue_fixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from glue_fixtures import make_checkpoint, make_glue_dir


@pytest.fixture
def glue_dir(tmp_path) -> Path:
    return make_glue_dir(tmp_path / "glue")


@pytest.fixture(scope="session")
def fake_run(tmp_path_factory) -> Path:
    """One run folder, two random-weight checkpoints (steps 100 and 200)."""
    run = tmp_path_factory.mktemp("runs") / "fake-bert"
    make_checkpoint(run, steps=(100, 200))
    return run
