"""The plugin manager: entry-point discovery and fault-isolated hooks.

pluggy stops a hook call at the first exception; a host's training run must not. Every hook
implementation registered on a :class:`PluginHost` is wrapped once, at registration, so that a
raising plugin (also one calling ``sys.exit``) is recorded in :attr:`PluginHost.faults` and skipped
(``strict=True`` re-raises, for tests). Hooks are then called through pluggy's own hook relay
(``host.pm.hook.<name>(...)``), so hook wrappers, ``tryfirst``/``trylast`` and call monitoring
(``pm.add_hookcall_monitoring``) work as pluggy documents them.

Each fault is one ERROR line naming the plugin (its registered name; a plugin registered without
one by its module or class name) and the hook; its traceback is logged once per plugin and hook,
at DEBUG after that, so a plugin failing on every record does not flood the log. What a hook or a
detector returns is checked: a detectors hook must return a list of objects with ``update``, a
detector's ``update`` None or an alarm (``name`` and ``message``); anything else is a fault. A
detector that faults on :data:`MAX_DETECTOR_FAULTS` records in a row is taken out, with one warning
saying what the schedule loses (a faulted record holds the stage, so one faulting on every record
would hold it for ever).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import pluggy

from rlvr_schedule.plugins import hookspecs

__all__ = [
    "ENTRY_POINT_GROUP",
    "MAX_DETECTOR_FAULTS",
    "DetectorFault",
    "IsolatedDetector",
    "PluginHost",
    "get_plugin_host",
]

log = logging.getLogger("rlvr_schedule.plugins")

ENTRY_POINT_GROUP = hookspecs.PROJECT

#: Records in a row on which a plugin detector may fault before it is taken out. Each faulted record
#: holds the stage (its alarm may be missing); 20 records is long enough to ride out a transient fault
#: (a missing metric for a few updates), short enough that a broken detector does not pin the stage.
MAX_DETECTOR_FAULTS = 20


def plugin_label(plugin: Any, registered: str) -> str:
    """A plugin's name for messages: its registered name, or (registered without one, which pluggy
    names by a bare number) its module or class name."""
    if not registered.isdigit():
        return registered
    name = getattr(plugin, "__name__", None) or type(plugin).__qualname__
    return f"{name} (registered without a name)"


class _BadReturn(Exception):
    """A hook implementation returned what its hook does not take."""


class PluginHost:
    """A :class:`pluggy.PluginManager` whose hook implementations are fault-isolated."""

    def __init__(self, *, strict: bool = False, load_entrypoints: bool = True) -> None:
        self.strict = strict
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.faults: list[tuple[str, str, BaseException]] = []
        self._traced: set[tuple[str, str]] = set()  # (plugin, hook) whose traceback was logged
        if load_entrypoints:
            try:
                self.pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
            except Exception as exc:  # a broken installed plugin must not stop the host
                if strict:
                    raise
                log.exception("loading entry-point plugins of group %r failed", ENTRY_POINT_GROUP)
                self.faults.append(("<entrypoints>", "load", exc))
            self._isolate()

    @property
    def hook(self) -> Any:
        """pluggy's hook relay (``host.hook.rlvr_schedule_on_record(record=...)``)."""
        return self.pm.hook

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        out = self.pm.register(plugin, name=name)
        self._isolate()
        return out

    def unregister(self, plugin: Any) -> None:
        self.pm.unregister(plugin)

    def fault(self, plugin: str, where: str, exc: BaseException) -> None:
        """Record and log a fault: one line; its traceback the first time for this plugin and hook,
        at DEBUG after that (``strict``: re-raise it)."""
        if self.strict:
            raise exc
        what = f"exited (sys.exit({exc.code!r}))" if isinstance(exc, SystemExit) else "raised"
        detail = f"{type(exc).__name__}: {exc}" if not isinstance(exc, (SystemExit, _BadReturn)) else str(exc)
        if isinstance(exc, _BadReturn):
            what = "returned a wrong type"
        first = (plugin, where) not in self._traced
        self._traced.add((plugin, where))
        log.error(
            "plugin %r %s in %s (%s); skipped, the run goes on%s",
            plugin,
            what,
            where,
            detail,
            "" if first else " (traceback at DEBUG)",
            exc_info=exc if first and not isinstance(exc, _BadReturn) else None,
        )
        if not first:
            log.debug("plugin %r in %s", plugin, where, exc_info=exc)
        self.faults.append((plugin, where, exc))

    def _isolate(self) -> None:
        """Wrap every not yet wrapped hook implementation (wrappers excepted) in a fault guard."""
        for caller in vars(self.pm.hook).values():
            if not isinstance(caller, pluggy.HookCaller):
                continue
            for impl in caller.get_hookimpls():
                if impl.hookwrapper or impl.wrapper or getattr(impl.function, "_rlvr_guarded", False):
                    continue
                # pluggy types HookImpl.function Final (its own field); replacing the callable is
                # the one way to isolate each implementation's faults, which pluggy has no hook for
                guarded = self._guard(impl.function, plugin_label(impl.plugin, impl.plugin_name), caller.name)
                impl.function = guarded  # type: ignore[misc]

    def _guard(self, fn: Any, plugin: str, hook_name: str) -> Any:
        check = _RETURN_CHECKS.get(hook_name)

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                out = fn(*args, **kwargs)
                if check is not None and out is not None:
                    check(out)
                return out
            except (Exception, SystemExit) as exc:  # sys.exit in a plugin must not stop the run
                self.fault(plugin, hook_name, exc)
                return None

        guarded._rlvr_guarded = True  # type: ignore[attr-defined]
        return guarded

    def call(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call ``hook_name`` through the hook relay; the non-None results as a list (a
        ``firstresult`` hook: at most one). A raising implementation is skipped (see above)."""
        res = getattr(self.pm.hook, hook_name)(**kwargs)
        if isinstance(res, list):
            return [r for r in res if r is not None]
        return [] if res is None else [res]

    def failure_detectors(self) -> list[IsolatedDetector]:
        """Plugins' failure detectors (``rlvr_schedule_failure_detectors``), each fault-isolated."""
        out: list[IsolatedDetector] = []
        for group in self.call("rlvr_schedule_failure_detectors"):
            out.extend(IsolatedDetector(d, self) for d in (group or []))
        return out

    def progress_estimators(self) -> list[IsolatedDetector]:
        """Plugins' online progress estimators (``rlvr_schedule_progress_estimators``), each
        fault-isolated the same way (their ``update`` cannot raise into the host)."""
        out: list[IsolatedDetector] = []
        for group in self.call("rlvr_schedule_progress_estimators"):
            out.extend(IsolatedDetector(e, self, alarms=False) for e in (group or []))
        return out


def _check_detectors(out: Any) -> None:
    if not isinstance(out, (list, tuple)):
        raise _BadReturn(f"returned {type(out).__name__} {out!r:.60}, expected a list of detectors")
    for d in out:
        if not callable(getattr(d, "update", None)):
            raise _BadReturn(
                f"returned a list holding {type(d).__name__} {d!r:.60}: a detector has update(record)"
            )


def _check_aliases(out: Any) -> None:
    from collections.abc import Mapping

    if not isinstance(out, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in out.items()
    ):
        raise _BadReturn(f"returned {type(out).__name__} {out!r:.60}, expected a mapping of names to fields")


_RETURN_CHECKS = {
    "rlvr_schedule_failure_detectors": _check_detectors,
    "rlvr_schedule_progress_estimators": _check_detectors,
    "rlvr_schedule_metric_aliases": _check_aliases,
}


@dataclass(frozen=True)
class DetectorFault:
    """What an :class:`IsolatedDetector` returns when its detector raised: its alarm may be missing,
    so the schedule holds the stage on that record (``fault`` is the marker it reads)."""

    name: str
    message: str
    fault: bool = True


class IsolatedDetector:
    """A plugin's failure detector (or progress estimator) whose ``update`` cannot raise into the
    schedule or host: an exception (``sys.exit`` too) or a return that is neither None nor an alarm
    is recorded on the host (``strict`` re-raises) and comes back as a :class:`DetectorFault`
    value; after :data:`MAX_DETECTOR_FAULTS` faulted records in a row the detector is taken out
    (``update`` returns None), with one warning."""

    def __init__(self, detector: Any, host: PluginHost, *, alarms: bool = True) -> None:
        self.detector = detector
        self.name = str(getattr(detector, "name", None) or type(detector).__name__)
        self._host = host
        self._alarms = alarms  # a failure detector returns alarms; a progress estimator anything
        self.faults_in_a_row = 0
        self.taken_out = False

    def update(self, record: Any) -> Any:
        if self.taken_out:
            return None
        try:
            out = self.detector.update(record)
            if self._alarms and out is not None and not (hasattr(out, "name") and hasattr(out, "message")):
                raise _BadReturn(
                    f"update returned {type(out).__name__} {out!r:.60}, expected None or an alarm"
                )
        except (Exception, SystemExit) as exc:
            self._host.fault(self.name, "update", exc)
            self.faults_in_a_row += 1
            if self.faults_in_a_row >= MAX_DETECTOR_FAULTS:
                self.taken_out = True
                log.warning(
                    "plugin detector %r faulted on %d records in a row: taken out. The schedule loses its "
                    "alarms (it no longer switches on them) and stops holding the stage on its faults; the "
                    "built-in detectors go on",
                    self.name,
                    self.faults_in_a_row,
                )
            return DetectorFault(self.name, f"{type(exc).__name__}: {exc}")
        self.faults_in_a_row = 0
        return out

    def __getattr__(self, attr: str) -> Any:  # state_dict / load_state_dict when the detector has them
        if attr.startswith("__") or attr in ("detector", "_host", "_alarms"):
            raise AttributeError(attr)
        return getattr(self.detector, attr)


def get_plugin_host(*, strict: bool = False, load_entrypoints: bool = True) -> PluginHost:
    """A new plugin host with the entry-point plugins of group ``rlvr_schedule`` loaded."""
    return PluginHost(strict=strict, load_entrypoints=load_entrypoints)
