"""Built-in observer plugins: write every record and decision to JSONL or TensorBoard.

Register one on a :class:`~rlvr_schedule.plugins.PluginHost` (``host.register(JsonlSink(path))``);
the host's :class:`~rlvr_schedule.driver.ScheduleDriver` then calls them through ``rlvr_schedule_on_record`` /
``rlvr_schedule_on_decision``.
"""

from __future__ import annotations

import importlib
import json
import math
import os
from pathlib import Path
from typing import Any

from rlvr_schedule.plugins import hookimpl
from rlvr_schedule.records import METRIC_FIELDS, Decision, StepRecord

__all__ = ["JsonlSink", "TensorBoardSink"]


def _json_safe(d: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


class JsonlSink:
    """Append-safe JSON lines: ``{"kind": "record", ...}`` and ``{"kind": "decision", ...}``.

    Each line is written whole and flushed, so a killed run leaves at most one truncated last
    line, which the readers skip with a warning. ``fsync=True`` also survives a power loss.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._fh = open(self.path, "a", encoding="utf-8")

    def _write(self, obj: dict[str, Any]) -> None:
        self._fh.write(json.dumps(_json_safe(obj)) + "\n")
        self._fh.flush()
        if self.fsync:
            os.fsync(self._fh.fileno())

    @hookimpl
    def rlvr_schedule_on_record(self, record: StepRecord) -> None:
        self._write({"kind": "record", **record.to_dict()})

    @hookimpl
    def rlvr_schedule_on_decision(self, decision: Decision, record: StepRecord) -> None:
        self._write({"kind": "decision", **decision.to_dict()})

    def close(self) -> None:
        self._fh.close()


class TensorBoardSink:
    """Real TensorBoard event files, one scalar per canonical metric under ``rlvr/``.

    Uses ``torch.utils.tensorboard`` when torch is installed, else ``tensorboardX``; both
    are imported here, not by the core. The x axis is the optimizer step; the sample clock is
    logged as ``rlvr/samples`` so plots against samples stay possible.
    """

    def __init__(self, logdir: str | os.PathLike[str], *, prefix: str = "rlvr") -> None:
        self.logdir = Path(logdir)
        self.prefix = prefix
        writer: Any = None
        for module in ("torch.utils.tensorboard", "tensorboardX"):  # the first one installed
            try:
                writer = importlib.import_module(module).SummaryWriter
                break
            except ImportError:
                continue
        if writer is None:  # pragma: no cover - depends on the environment
            raise ImportError("TensorBoardSink needs torch (with tensorboard) or tensorboardX")
        self._writer = writer(log_dir=str(self.logdir))

    @hookimpl
    def rlvr_schedule_on_record(self, record: StepRecord) -> None:
        w, p, s = self._writer, self.prefix, record.step
        w.add_scalar(f"{p}/samples", record.samples, s)
        w.add_scalar(f"{p}/batch", record.batch, s)
        w.add_scalar(f"{p}/lr", record.lr, s)
        for name in METRIC_FIELDS:
            v = getattr(record, name)
            if math.isfinite(v):
                w.add_scalar(f"{p}/{name}", v, s)

    @hookimpl
    def rlvr_schedule_on_decision(self, decision: Decision, record: StepRecord) -> None:
        w, p, s = self._writer, self.prefix, decision.step
        w.add_scalar(f"{p}/decision/batch", decision.batch, s)
        w.add_scalar(f"{p}/decision/lr", decision.lr, s)
        w.add_scalar(f"{p}/decision/stage", decision.stage, s)
        if decision.switched:
            w.flush()

    def add_scalars(self, values: dict[str, float], step: int) -> None:
        """Write ``values`` as ``<prefix>/<name>`` scalars at ``step`` (a host's schedule state,
        :meth:`~rlvr_schedule.driver.ScheduleDriver.scalars`), flushed for a live dashboard."""
        for name, v in values.items():
            if math.isfinite(v):
                self._writer.add_scalar(f"{self.prefix}/{name}", v, step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.flush()
        self._writer.close()
