"""Fixtures of the TRL adapter tests (helpers live in ``trl_harness``, a uniquely named module)."""

from __future__ import annotations

from typing import Any

import pytest
from trl_harness import make_tiny_model


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Any]:
    """A 1-layer Qwen2 (hidden 64) and a word-level tokenizer saved locally once per session."""
    path = tmp_path_factory.mktemp("tiny-qwen2")
    return str(path), make_tiny_model(path)
