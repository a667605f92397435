"""A backend for verl's ``Tracking``: every step's metrics go to the schedule.

``Tracking.log(data, step)`` calls ``log(data=..., step=...)`` on each object in its
``logger`` dict, so adding one there (:func:`attach_backend`) sees exactly what W&B or
TensorBoard see, at the point between two steps where a config change is safe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule_adapters.verl.controller import ScheduleController

__all__ = ["ScheduleMetricsBackend", "attach_backend", "BACKEND_NAME"]

log = logging.getLogger("rlvr_schedule.adapters.verl")

#: The key of the backend in ``Tracking.logger``.
BACKEND_NAME = "rlvr_schedule"


class ScheduleMetricsBackend:
    """Feeds ``Tracking.log`` calls to a :class:`ScheduleController`; never raises.

    ``after_log(step)`` runs after each training log (the trainer writes the scheduler state
    of a checkpoint saved in that step); its failures are logged too.
    """

    def __init__(
        self, controller: ScheduleController, after_log: Callable[[int], None] | None = None
    ) -> None:
        self.controller = controller
        self.after_log = after_log

    def log(self, data: Mapping[str, Any], step: int) -> None:
        try:
            self.controller.observe(data, step)
        except Exception as exc:  # observe isolates faults itself; this is the last guard
            self.controller.fault("backend", exc)
        if self.after_log is not None:
            try:
                self.after_log(int(step))
            except Exception as exc:
                self.controller.fault("after_log", exc)

    def finish(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to flush (``Tracking.finish`` skips unknown backends anyway)."""


def attach_backend(tracking: Any, backend: ScheduleMetricsBackend, name: str = BACKEND_NAME) -> None:
    """Add ``backend`` to a verl ``Tracking`` object (its ``logger`` dict)."""
    loggers = getattr(tracking, "logger", None)
    if not isinstance(loggers, dict):
        raise TypeError(f"{type(tracking).__name__} has no 'logger' dict of backends")
    loggers[name] = backend
