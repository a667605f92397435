"""The plugin manager: entry-point discovery and fault-isolated hook calls.

pluggy stops a hook call at the first exception; a host's training run must not. Calls go
through :meth:`PluginHost.call`, which runs each implementation on its own, logs a raising
plugin with its traceback and goes on (``strict=True`` re-raises, for tests).
"""

from __future__ import annotations

import logging
from typing import Any

import pluggy

from rlvr_schedule.plugins import hookspecs

log = logging.getLogger("rlvr_schedule.plugins")

ENTRY_POINT_GROUP = hookspecs.PROJECT


class PluginHost:
    """A :class:`pluggy.PluginManager` plus fault isolation."""

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

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        return self.pm.register(plugin, name=name)

    def unregister(self, plugin: Any) -> None:
        self.pm.unregister(plugin)

    def call(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call every implementation of ``hook_name``; results of those that did not raise.

        For a ``firstresult`` hook the list holds at most the first non-None result.
        """
        hook = getattr(self.pm.hook, hook_name)
        firstresult = bool(hook.spec and hook.spec.opts.get("firstresult"))
        results: list[Any] = []
        # pluggy calls the last registered first; keep that order
        for impl in reversed(hook.get_hookimpls()):
            args = {k: kwargs[k] for k in impl.argnames if k in kwargs}
            try:
                res = impl.function(**args)
            except Exception as exc:
                if self.strict:
                    raise
                log.exception("plugin %r raised in %s; keeping the current stage", impl.plugin_name, hook_name)
                self.faults.append((impl.plugin_name, hook_name, exc))
                continue
            if res is not None:
                results.append(res)
                if firstresult:
                    break
        return results


def get_plugin_host(*, strict: bool = False, load_entrypoints: bool = True) -> PluginHost:
    """A new plugin host with the entry-point plugins of group ``rlvr_schedule`` loaded."""
    return PluginHost(strict=strict, load_entrypoints=load_entrypoints)
