"""Scheduler state beside verl's checkpoints: ``global_step_<N>/rlvr_schedule_state.json``.

verl saves a checkpoint inside step N, before that step's metrics are logged, so the file is
written twice: provisionally at save time (``complete: false``, with the rollouts of step N
that the schedule has not seen yet) and again, complete, once step N's record went through the
schedule. Every write is atomic (temporary file in the same directory, fsync, ``os.replace``),
so a crash leaves the previous version or the new one, never half a file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import ConfigError

__all__ = ["STATE_FILE", "save_state", "load_state", "checkpoint_folder"]

STATE_FILE = "rlvr_schedule_state.json"


def save_state(folder: str | os.PathLike[str], state: Mapping[str, Any], *, name: str = STATE_FILE) -> Path:
    """Write ``state`` as JSON into ``folder/name`` atomically; returns the path."""
    d = Path(folder)
    d.mkdir(parents=True, exist_ok=True)
    path = d / name
    text = json.dumps(state, indent=1, sort_keys=True, allow_nan=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def load_state(folder: str | os.PathLike[str], *, name: str = STATE_FILE) -> dict[str, Any] | None:
    """The state saved in ``folder`` (None when there is none); ConfigError names a corrupt file."""
    path = Path(folder) / name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        state = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"corrupt scheduler state: {exc.msg} (column {exc.colno})", source=f"{path}:{exc.lineno}"
        ) from exc
    if not isinstance(state, dict):
        raise ConfigError(
            f"scheduler state must be a JSON object, got {type(state).__name__}", source=str(path)
        )
    return state


def checkpoint_folder(config: Any, global_steps: int) -> str | None:
    """The ``global_step_<N>`` folder verl resumed from (its own ``_load_checkpoint`` rules)."""
    if global_steps <= 0:
        return None
    trainer = config.trainer
    mode = trainer.get("resume_mode", "auto")
    if mode == "resume_path" and trainer.get("resume_from_path"):
        folder = str(trainer.resume_from_path)
    elif mode == "auto":
        folder = os.path.join(str(trainer.default_local_dir), f"global_step_{global_steps}")
    else:
        return None
    return folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder)
