"""Shared fixtures of the core tests."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA_DIR = Path(__file__).parent / "data"


@pytest.fixture
def ingest_data() -> Path:
    """Directory of small framework-style log files (TRL, verl, OpenRLHF key names)."""
    return DATA_DIR
