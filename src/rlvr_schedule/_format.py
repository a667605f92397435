"""Number formatting shared by the CLI's tables and the report's summary page."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt", "clean_json", "column_formatter"]


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


def column_formatter(header: str, values: Any) -> Any:
    """One number format for a whole table column: rollout counts as whole numbers with thousands
    separators, other numbers with 3 significant digits, anything else through :func:`fmt`."""
    numeric = all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values)
    if not numeric:
        return fmt
    h = header.lower()
    if any(w in h for w in ("samples", "rollouts", "batch", "stage", "step")) and "from" not in h:
        return lambda v: "-" if v is None or not math.isfinite(float(v)) else f"{int(round(float(v))):,}"
    return lambda v: "-" if v is None or not math.isfinite(float(v)) else f"{float(v):.3g}"


def plain_reason(reason: str) -> str:
    """A decision's reason as one plain sentence for the console and the report: what triggered it
    and how much of its clock is spent, without the arithmetic behind it (parentheses, and the
    ``: batch x g, LR x g^q`` tail), which stays in the decision's JSON. Fractions read as percent."""
    import re

    out, depth = [], 0
    for ch in reason:  # drop parenthesised arithmetic, nested or not
        if ch == "(":
            depth += 1
        elif ch == ")" and depth:
            depth -= 1
        elif not depth:
            out.append(ch)
    text = re.sub(r":\s*(batch x [^;]*|no larger batch or stage left[^;]*)", "", "".join(out))
    text = re.sub(r"\s+([:;,])", r"\1", re.sub(r"\s+", " ", text)).strip().rstrip(":;,")

    def pct(m: re.Match[str]) -> str:
        return f"{float(m.group(1)):.0%} of"

    return re.sub(r"\b(0\.\d+|1\.0+) of\b", pct, text) or reason
