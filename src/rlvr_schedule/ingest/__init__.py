"""Ingestion: framework metric names -> :class:`~rlvr_schedule.records.StepRecord`, logs -> :class:`Run`.

``aliases`` maps TRL / verl / OpenRLHF names onto canonical fields; :func:`canonicalize` turns one
metrics dict into a record (adapters, online). Readers for JSONL, CSV and TensorBoard files and the
in-memory :class:`RecordStream` validate order and derive samples/batch; :class:`JsonlWriter` appends.
Needs numpy alone; tensorboard is imported only when reading event files.
"""

from rlvr_schedule.ingest.aliases import ALIASES, FIELD_ALIASES, AliasTable, collect_aliases, merge_aliases
from rlvr_schedule.ingest.canonical import canonicalize, map_metrics

__all__ = [
    "ALIASES",
    "FIELD_ALIASES",
    "AliasTable",
    "collect_aliases",
    "merge_aliases",
    "canonicalize",
    "map_metrics",
]
