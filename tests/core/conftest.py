"""Shared fixtures of the core tests."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

DATA_DIR = Path(__file__).parent / "data"


@pytest.fixture
def ingest_data() -> Path:
    """Directory of small framework-style log files (TRL, verl, OpenRLHF key names)."""
    return DATA_DIR


@pytest.fixture
def load_benchmark() -> Callable[[str], ModuleType]:
    """Loads a script of benchmarks/evidence by name (it is not a package), for tests of its logic."""
    root = Path(__file__).resolve().parents[2] / "benchmarks" / "evidence"

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, root / f"{name}.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod

    return load
