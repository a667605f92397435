"""The plugin manager: entry-point discovery and fault-isolated hooks.

pluggy stops a hook call at the first exception; a host's training run must not. Every hook
implementation registered on a :class:`PluginHost` is wrapped once, at registration, so that a
raising plugin is logged with its traceback, recorded in :attr:`PluginHost.faults` and skipped
(``strict=True`` re-raises, for tests). Hooks are then called through pluggy's own hook relay
(``host.pm.hook.<name>(...)``), so hook wrappers, ``tryfirst``/``trylast`` and call monitoring
(``pm.add_hookcall_monitoring``) work as pluggy documents them.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import pluggy

from rlvr_schedule.plugins import hookspecs

__all__ = ["ENTRY_POINT_GROUP", "DetectorFault", "IsolatedDetector", "PluginHost", "get_plugin_host"]

log = logging.getLogger("rlvr_schedule.plugins")

ENTRY_POINT_GROUP = hookspecs.PROJECT


class PluginHost:
    """A :class:`pluggy.PluginManager` whose hook implementations are fault-isolated."""

    def __init__(self, *, strict: bool = False, load_entrypoints: bool = True) -> None:
        self.strict = strict
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self.faults: list[tuple[str, str, BaseException]] = []
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
        """Record and log a fault (``strict``: re-raise it)."""
        if self.strict:
            raise exc
        log.error("plugin %r raised in %s; keeping the current stage", plugin, where, exc_info=exc)
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
                guarded = self._guard(impl.function, impl.plugin_name, caller.name)
                impl.function = guarded  # type: ignore[misc]

    def _guard(self, fn: Any, plugin: str, hook_name: str) -> Any:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
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
            out.extend(IsolatedDetector(e, self) for e in (group or []))
        return out


@dataclass(frozen=True)
class DetectorFault:
    """What an :class:`IsolatedDetector` returns when its detector raised: its alarm may be missing,
    so the schedule holds the stage on that record (``fault`` is the marker it reads)."""

    name: str
    message: str
    fault: bool = True


class IsolatedDetector:
    """A plugin's failure detector (or progress estimator) whose ``update`` cannot raise into the
    schedule or host: an exception is recorded on the host (``strict`` re-raises) and comes back as a
    :class:`DetectorFault` value."""

    def __init__(self, detector: Any, host: PluginHost) -> None:
        self.detector = detector
        self.name = str(getattr(detector, "name", None) or type(detector).__name__)
        self._host = host

    def update(self, record: Any) -> Any:
        try:
            return self.detector.update(record)
        except Exception as exc:
            self._host.fault(self.name, "update", exc)
            return DetectorFault(self.name, f"{type(exc).__name__}: {exc}")

    def __getattr__(self, attr: str) -> Any:  # state_dict / load_state_dict when the detector has them
        if attr.startswith("__") or attr in ("detector", "_host"):
            raise AttributeError(attr)
        return getattr(self.detector, attr)


def get_plugin_host(*, strict: bool = False, load_entrypoints: bool = True) -> PluginHost:
    """A new plugin host with the entry-point plugins of group ``rlvr_schedule`` loaded."""
    return PluginHost(strict=strict, load_entrypoints=load_entrypoints)
