"""Shared fixtures: the embedded tiny model (built once per machine and cached) and CPU engine env."""

from __future__ import annotations

import pytest

from rlvr_trainer.rollout import set_cpu_env


@pytest.fixture(scope="session")
def tiny_model_dir():
    """The warm-started tiny Qwen2 (``~/.cache/rlvr-schedule`` or ``$RLVR_SCHEDULE_CACHE``)."""
    set_cpu_env()
    from rlvr_trainer.model import ensure_tiny_model

    return ensure_tiny_model()
