"""Synthetic sweeps with known clocks, and writers that log them the way TRL or verl would.

``make_sweep`` gives one constant-batch run per batch size from the same task, so a sweep fit
should recover ``critical_batch`` (per-sample progress ``p(B) = p0 (1 - B / (2 B*))``) and
``failure_samples`` (collapse after the same rollouts at any batch when ``failure_exponent`` is 0).
``names`` says whose vocabulary the runs mimic: ``"verl"`` and ``"trl"`` runs keep only the metrics
those frameworks log (no micro-batch gradient norm; verl has no zero-std fraction), and
:func:`write_run_log` writes them as that framework's metrics log, under its own keys, so ingestion
can be tested end to end.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rlvr_schedule.ingest.aliases import FRAMEWORK_METRICS
from rlvr_schedule.records import METRIC_FIELDS, Run, StepRecord
from rlvr_schedule.synthetic.environment import SyntheticEnvironment

__all__ = ["FRAMEWORK_KEYS", "NAME_STYLES", "make_run", "make_sweep", "to_framework_dict", "write_run_log"]

NAME_STYLES = ("canonical", "verl", "trl")

#: canonical field -> key the framework logs it under (verl 0.9.1, TRL 1.16): the ingest table's.
FRAMEWORK_KEYS: Mapping[str, Mapping[str, str]] = {k: FRAMEWORK_METRICS[k] for k in ("verl", "trl")}


def _check_names(names: str) -> str:
    if names not in NAME_STYLES:
        raise ValueError(f"names must be one of {NAME_STYLES}, got {names!r}")
    return names


def _restrict(run: Run, names: str) -> Run:
    """Blank out (NaN) the metrics ``names``' framework does not log."""
    if names == "canonical":
        return run
    logged = set(FRAMEWORK_KEYS[names])
    blank: dict[str, Any] = {f: math.nan for f in METRIC_FIELDS if f not in logged}
    run.records = [replace(r, micro_batch=None, **blank) for r in run.records]
    return run


def make_run(
    batch: int,
    *,
    lr: float | None = None,
    steps: int | None = None,
    max_samples: float | None = None,
    names: str = "canonical",
    name: str | None = None,
    **task: Any,
) -> Run:
    """One constant-batch run of a synthetic task (LR: ``lr`` or the sqrt rule from ``(base_batch, lr0)``).

    Runs ``steps`` updates, or to ``max_samples`` rollouts, or by default to 1.3 x the failure point.
    The task's keyword arguments go to
    :class:`~rlvr_schedule.synthetic.environment.SyntheticEnvironment`, which holds their defaults:
    ``critical_batch``, ``failure_samples``, ``lr0``, ``base_batch``, ``noise``, ``seed``, ``drift``
    and the other :class:`~rlvr_schedule.synthetic.model.ClockModel` fields (``failure_exponent``,
    ``rate_at_zero``, ``reward_ceiling``, ``b_simple``, ...).
    """
    _check_names(names)
    if steps is not None and (int(steps) != steps or steps < 1):
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    env = SyntheticEnvironment(**task)
    run = env.run_constant(batch, max_samples, lr=lr, steps=steps, name=name)
    return _restrict(run, names)


def make_sweep(
    batches: Iterable[int],
    *,
    seed: int | None = 0,
    steps: int | None = None,
    max_samples: float | None = None,
    names: str = "canonical",
    **task: Any,
) -> list[Run]:
    """A constant-batch sweep of one synthetic task: one run per batch, each with its own noise stream
    (spawned from ``seed``).

    Every run uses the sqrt-rule LR for its batch; run names are ``B<batch>``. The task's keyword
    arguments are those of :func:`make_run` (``critical_batch``, ``failure_samples``, ``lr0``,
    ``base_batch``, ``noise``, the ClockModel fields).
    """
    for own in ("lr", "name"):
        if own in task:
            raise TypeError(f"make_sweep() sets {own!r} per run; got {own}={task[own]!r}")
    batches = [int(b) for b in batches]
    if not batches:
        raise ValueError("batches must not be empty")
    seeds = np.random.SeedSequence(seed).spawn(len(batches))
    return [
        make_run(
            b, seed=int(s.generate_state(1)[0]), steps=steps, max_samples=max_samples, names=names, **task
        )
        for b, s in zip(batches, seeds, strict=True)
    ]


def to_framework_dict(record: StepRecord, names: str = "canonical", *, with_samples: bool = True) -> dict:
    """One record as the framework would log it (canonical: ``record.to_dict()``).

    verl and TRL do not log rollouts consumed or the batch; ``with_samples`` adds them under the
    canonical names ``samples`` and ``batch`` (which ingestion also accepts) so a log is self-contained.
    TRL logs also get ``num_tokens`` (cumulative, from the mean response length).
    """
    _check_names(names)
    if names == "canonical":
        return record.to_dict()
    d = record.to_dict()
    out: dict[str, Any] = {}
    for field, key in FRAMEWORK_KEYS[names].items():
        if field in d:
            out[key] = d[field]
    if with_samples:
        out["samples"] = record.samples
        out["batch"] = record.batch
    return out


def write_run_log(
    path: str | os.PathLike,
    run: Run | Sequence[StepRecord],
    names: str = "canonical",
    *,
    with_samples: bool = True,
) -> str:
    """Write a run as the JSONL metrics log a framework would leave: one metrics dict per line in
    ``names``' vocabulary (TRL also gets its cumulative ``num_tokens``); returns the path.

    Not to be confused with :func:`rlvr_schedule.ingest.write_jsonl` (canonical records, append-safe).
    """
    _check_names(names)
    records = run.records if isinstance(run, Run) else list(run)
    tokens = 0.0
    with open(path, "w", encoding="utf-8") as fh:
        for rec in records:
            row = to_framework_dict(rec, names, with_samples=with_samples)
            if names == "trl" and not math.isnan(rec.response_length):
                tokens += rec.batch * rec.response_length
                row["num_tokens"] = float(round(tokens))
            fh.write(json.dumps(row) + "\n")
    return os.fspath(path)
