"""pluggy plugins: hook specifications, the fault-isolating host and built-in sinks.

Importing this package needs pluggy; the rest of the core needs numpy alone.
"""

from __future__ import annotations

from rlvr_schedule.plugins.hookspecs import hookimpl
from rlvr_schedule.plugins.manager import (
    ENTRY_POINT_GROUP,
    DetectorFault,
    IsolatedDetector,
    PluginHost,
    get_plugin_host,
)

__all__ = [
    "hookimpl",
    "PluginHost",
    "get_plugin_host",
    "ENTRY_POINT_GROUP",
    "DetectorFault",
    "IsolatedDetector",
]
