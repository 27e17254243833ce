"""Shared fixtures: where the real test data lives, and small slices of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The brief's layout: shared/ sits beside the checkout (../shared/data); MAPNET_SHARED_DATA overrides.
SHARED_DATA = Path(os.environ.get("MAPNET_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"real test data not found at {SHARED_DATA} (set MAPNET_SHARED_DATA)")
    return SHARED_DATA
