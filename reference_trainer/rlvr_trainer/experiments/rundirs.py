"""A run directory (``metrics.jsonl``, ``config.json``, ...) as the harness sees it: its records
read back through the core's reader, and whether it finished, so that a finished run is reused
instead of trained again. A torn last line of ``metrics.jsonl`` (a disk-full or power cut mid-write)
is cut, with a warning counting its bytes, before either reads the file: the run then resumes from
its checkpoint instead of failing on the line."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.records import Run
from rlvr_trainer.config import TrainConfig

__all__ = ["read_run", "finished"]


def read_run(out_dir: str | Path, name: str | None = None, *, schedule: bool = False) -> Run:
    """The canonical records of one run directory (through the core's JSONL reader); ``schedule``
    marks a live schedule's run, which never counts as a constant-batch sweep point."""
    import warnings

    from rlvr_schedule.errors import IngestWarning
    from rlvr_schedule.ingest import load_run
    from rlvr_trainer.checkpoint import repair_torn_tail

    out_dir = Path(out_dir)
    repair_torn_tail(out_dir / "metrics.jsonl")
    with warnings.catch_warnings():  # our timing extras are expected, not a sign of a mis-mapped log
        warnings.filterwarnings("ignore", message=".*unknown metrics kept in extra", category=IngestWarning)
        run = load_run(out_dir / "metrics.jsonl", name=name or out_dir.name)
    if schedule:
        run.meta["schedule"] = True
    return run


def finished(out_dir: Path, cfg: TrainConfig) -> bool:
    """The run in ``out_dir`` has this config and its last record reached ``cfg.max_samples``."""
    p = out_dir / "metrics.jsonl"
    if not p.exists() or not (out_dir / "config.json").exists():
        return False
    # a field added since the run was made reads as its default (which keeps the old behaviour)
    try:
        saved = TrainConfig.from_dict(json.loads((out_dir / "config.json").read_text()))
    except (ConfigError, TypeError, ValueError):
        return False
    if json.loads(saved.json()) != json.loads(cfg.json()):
        return False
    from rlvr_trainer.checkpoint import repair_torn_tail

    repair_torn_tail(p)
    lines = [ln for ln in p.read_text().splitlines() if ln.strip()]
    return bool(lines) and json.loads(lines[-1]).get("samples", 0) >= cfg.max_samples
