"""How the harness writes numbers: the cells of its markdown tables, and strict JSON for the
summaries beside them (NaN and inf are not JSON)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["jsonable", "num", "interval", "span"]


def jsonable(v: Any) -> Any:
    """NaN/inf -> None, numpy scalars -> Python, recursively (strict JSON)."""
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    return None if isinstance(v, float) and not math.isfinite(v) else v


def num(x: Any) -> str:
    """Three significant digits; "-" for a missing or non-finite value."""
    return f"{x:.3g}" if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def interval(iv: Any) -> str:
    """``[lo, hi]`` with :func:`num`'s digits."""
    return "[" + ", ".join(num(x) for x in (iv or [None, None])) + "]"


def span(xs: Sequence[float]) -> str:
    """Mean [min, max] of rewards."""
    return f"{sum(xs) / len(xs):.3f} [{min(xs):.3f}, {max(xs):.3f}]" if xs else "-"
