"""Hook specifications: how plugins extend and observe rlvr-schedule.

Plugins are plain modules or classes with functions marked ``@hookimpl`` (see
:data:`rlvr_schedule.plugins.hookimpl`) and are found through the entry-point group
``rlvr_schedule``. :class:`~rlvr_schedule.driver.ScheduleDriver` calls the observer hooks around
each schedule step; hosts apply decisions through the driver's ``apply`` callback, not a hook. A
plugin that raises (or calls ``sys.exit``) is logged, one line a fault with its traceback once, and
skipped (``strict=True`` on the plugin manager re-raises, for tests); a raising failure detector holds
the stage on that record, and one that faults on 20 records in a row is taken out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.records import Decision, StepRecord, WatchAlarm

PROJECT = "rlvr_schedule"
hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks a plugin's hook implementations (re-exported as ``rlvr_schedule.plugins.hookimpl``).
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def rlvr_schedule_metric_aliases() -> Mapping[str, str]:
    """Return extra ``{logged_name: canonical_field}`` aliases used by ingestion.

    Use it to teach the readers a framework's or a team's metric names; canonical fields are
    those of :class:`rlvr_schedule.records.StepRecord`.
    """
    raise NotImplementedError  # a specification: pluggy calls the implementations


@hookspec
def rlvr_schedule_failure_detectors() -> list[Any]:
    """Return a list of extra failure detectors (objects with ``name``, ``update(record)`` and
    ``state_dict()``/``load_state_dict()``) that the failure clock runs beside the built-in ones.
    ``update`` returns None or an alarm (an object with ``name`` and ``message``, such as
    :class:`~rlvr_schedule.clocks.failure.base.Alarm`); any other return is a fault, not an alarm."""
    raise NotImplementedError  # a specification: pluggy calls the implementations


@hookspec
def rlvr_schedule_progress_estimators() -> list[Any]:
    """Return extra online progress estimators (objects with ``name`` and ``update(record)``)."""
    raise NotImplementedError  # a specification: pluggy calls the implementations


@hookspec
def rlvr_schedule_on_record(record: StepRecord) -> None:
    """Observe every record the driver is fed, before the schedule steps (sinks: JSONL, TensorBoard)."""


@hookspec
def rlvr_schedule_on_decision(decision: Decision, record: StepRecord) -> None:
    """Observe every decision, switched or not, with the record that produced it (after the host
    applied it, or held: then ``decision.reason`` starts with "held")."""


@hookspec
def rlvr_schedule_on_alarm(alarm: WatchAlarm, record: StepRecord) -> None:
    """Act on a raised alarm, in process: a failure, a raised warning or the failure clock at its
    lower bound (:class:`~rlvr_schedule.clocks.failure.alarms.WatchAlarm`, once per detector and
    kind). Called after the record's decision and before the host's checkpoint at the alarm; page
    someone, stop the run, copy the checkpoint elsewhere. ``alarm.to_dict()`` is JSON-able."""
