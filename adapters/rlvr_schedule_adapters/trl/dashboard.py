"""The schedule's state in the TRL user's own dashboard (``report_to``): TensorBoard and W&B.

Transformers registers its reporting callbacks before user callbacks, so the state of an update
cannot join the Trainer's ``logs`` of that update (``on_log`` of the reporters has run): it is
written beside them, at the same global step, under ``rlvr/``: into the Trainer's own TensorBoard
directory, and into the live W&B run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["Dashboard", "tensorboard_dir"]


def _targets(args: Any) -> list[str]:
    report = getattr(args, "report_to", None) or []
    return [report] if isinstance(report, str) else list(report)


def tensorboard_dir(args: Any) -> str:
    """The Trainer's TensorBoard directory: ``TENSORBOARD_LOGGING_DIR``, else the newest
    ``<output_dir>/runs/*`` holding an event file of this process (transformers names it by time
    and host; torch's event file names end with the writer's pid), else ``<output_dir>/runs/rlvr``."""
    env = os.environ.get("TENSORBOARD_LOGGING_DIR")
    if env:
        return os.path.expanduser(env)
    runs = os.path.join(str(args.output_dir), "runs")
    mine = []
    if os.path.isdir(runs):
        for d in os.scandir(runs):
            if d.is_dir():
                for f in os.scandir(d.path):
                    if "tfevents" in f.name and f".{os.getpid()}." in f.name:
                        mine.append((f.stat().st_mtime, d.path))
    return max(mine)[1] if mine else os.path.join(runs, "rlvr")


class Dashboard:
    """Writes a mapping of the schedule's scalars at a global step to the trackers ``report_to``
    names (one process: the world's first)."""

    def __init__(self) -> None:
        self.board: Any = None  # the TensorBoard writer
        self.wandb = False
        self.active = False

    def open(self, args: Any, state: Any) -> None:
        """Bind to the run's trackers at train begin."""
        targets = _targets(args)
        every = "all" in targets
        first = bool(getattr(state, "is_world_process_zero", True))
        self.wandb = first and (every or "wandb" in targets)
        if self.board is None and first and (every or "tensorboard" in targets):
            from rlvr_schedule.plugins.sinks import TensorBoardSink

            self.board = TensorBoardSink(tensorboard_dir(args))
        self.active = self.board is not None or self.wandb

    def write(self, values: Mapping[str, float], step: int) -> None:
        if self.board is not None:
            self.board.add_scalars(values, step)
        if self.wandb:
            run = getattr(sys.modules.get("wandb"), "run", None)
            if run is not None:
                run.log({**{f"rlvr/{k}": v for k, v in values.items()}, "train/global_step": step})

    def close(self) -> None:
        if self.board is not None:
            self.board.close()
            self.board = None
        self.active = False
