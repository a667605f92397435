"""Which HF Trainer checkpoint a killed run can resume from."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CheckpointChoice", "last_complete_checkpoint"]


@dataclass(frozen=True)
class CheckpointChoice:
    """The checkpoint to resume from (None: none is complete) and the newer ones skipped, with why."""

    path: Path | None
    skipped: tuple[tuple[str, str], ...] = ()


def last_complete_checkpoint(
    folder: str | Path, *, required: Sequence[str] = ("trainer_state.json",), prefix: str = "checkpoint-"
) -> CheckpointChoice:
    """The highest-numbered ``<prefix>N`` directory of ``folder`` that holds every ``required`` file.

    A process killed while it writes a checkpoint leaves a directory without its last file (the
    Trainer writes ``trainer_state.json`` after the model, optimizer, scheduler and RNG state), or with
    a ``.json`` cut short; resuming from the highest-numbered directory (what
    ``resume_from_checkpoint=True`` does) then fails. Required ``.json`` files must also parse.
    """
    folder = Path(folder)
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)$")
    found = []
    if folder.is_dir():
        for d in folder.iterdir():
            m = pattern.match(d.name)
            if m and d.is_dir():
                found.append((int(m.group(1)), d))
    skipped: list[tuple[str, str]] = []
    for _, d in sorted(found, reverse=True):
        why = _incomplete(d, required)
        if why is None:
            return CheckpointChoice(d, tuple(skipped))
        skipped.append((d.name, why))
    return CheckpointChoice(None, tuple(skipped))


def _incomplete(d: Path, required: Sequence[str]) -> str | None:
    for name in required:
        f = d / name
        if not f.is_file():
            return f"no {name}"
        if name.endswith(".json"):
            try:
                json.loads(f.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                return f"{name} unreadable ({type(exc).__name__})"
    return None
