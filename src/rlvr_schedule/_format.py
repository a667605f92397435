"""Number formatting shared by the CLI's tables and the report's summary page."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt", "clean_json"]


def fmt(v: Any) -> str:
    """A table cell: 3 significant digits, thousands separators for large counts, '-' for missing."""
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:,.0f}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return str(v)


def clean_json(obj: Any) -> Any:
    """NaN/inf -> None recursively, so output is strict JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj
