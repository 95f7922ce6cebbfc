"""Shared fixtures. Real data sets outside the repository are reached only through the explicit
``GPEXPLAIN_DATA_DIR`` setting (``make test`` points it at the project's shared data folder);
tests that need one are skipped, with the reason, when it is unset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The folder named by ``GPEXPLAIN_DATA_DIR`` (laid out like the shared data folder)."""
    root = os.environ.get("GPEXPLAIN_DATA_DIR")
    if not root:
        pytest.skip("GPEXPLAIN_DATA_DIR is not set: no external real data sets for this test")
    path = Path(root)
    if not path.is_dir():
        pytest.fail(f"GPEXPLAIN_DATA_DIR={root} is not a directory")
    return path
