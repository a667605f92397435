"""Ingestion: framework metric names -> :class:`~rlvr_schedule.records.StepRecord`, logs -> :class:`Run`.

:mod:`.aliases` maps TRL / verl / OpenRLHF names onto canonical fields; :func:`canonicalize` turns
one metrics dict into a record (adapters, online). Readers for JSONL/JSON, CSV (W&B exports),
TensorBoard, W&B run directories and console logs (verl, TRL/transformers; :data:`FORMATS`),
plain or .gz, and
the in-memory :class:`RecordStream` share one set of checks (order, samples/batch derivation,
non-finite values, missing reward); :class:`JsonlWriter` appends. Needs numpy alone; tensorboard
and wandb are imported only when reading their files.
"""

from rlvr_schedule.ingest.aliases import (
    ALIASES,
    FIELD_ALIASES,
    AliasTable,
    collect_aliases,
    default_aliases,
    merge_aliases,
)
from rlvr_schedule.ingest.canonical import canonicalize, map_metrics
from rlvr_schedule.ingest.console import (
    read_trl_console,
    read_trl_console_runs,
    read_verl_console,
    read_verl_console_runs,
)
from rlvr_schedule.ingest.csv_log import read_csv, read_wandb_chart_csv
from rlvr_schedule.ingest.jsonl import read_jsonl
from rlvr_schedule.ingest.load import FORMATS, detect_format, find_runs, load_run, load_runs
from rlvr_schedule.ingest.lr import LrInfo, training_lr
from rlvr_schedule.ingest.options import ReadOptions
from rlvr_schedule.ingest.stream import RecordStream
from rlvr_schedule.ingest.tb import read_tensorboard
from rlvr_schedule.ingest.wandb_run import read_wandb_run
from rlvr_schedule.ingest.writer import JsonlWriter, write_jsonl

__all__ = [
    "FORMATS",
    "LrInfo",
    "ReadOptions",
    "detect_format",
    "read_trl_console",
    "read_trl_console_runs",
    "read_verl_console",
    "read_verl_console_runs",
    "read_wandb_run",
    "read_wandb_chart_csv",
    "training_lr",
    "ALIASES",
    "FIELD_ALIASES",
    "AliasTable",
    "JsonlWriter",
    "RecordStream",
    "canonicalize",
    "collect_aliases",
    "default_aliases",
    "find_runs",
    "load_run",
    "load_runs",
    "map_metrics",
    "merge_aliases",
    "read_csv",
    "read_jsonl",
    "read_tensorboard",
    "write_jsonl",
]
