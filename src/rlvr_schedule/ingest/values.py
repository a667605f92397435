"""Values as hosts print them: one tolerant parser for every console reader.

A console log holds values through ``str()`` or ``repr()`` of whatever the host had: Python floats
(``0.41``, ``nan``, ``inf``), numbers in strings (``'0.125'``), numpy scalars (numpy >= 2 prints
``np.float64(0.41)``, ``np.int64(3)``, ``np.float32(0.5)``, ``np.True_``) and torch tensors
(``tensor(0.41)``, ``tensor(0.41, device='cuda:0')``, ``tensor(0.41, dtype=torch.bfloat16)``,
``tensor(0.41, grad_fn=<MeanBackward0>)``). :func:`parse_value` reads one printed value,
:func:`parse_mapping` one printed dict (Python or JSON), both without evaluating code: the text is
parsed with :mod:`ast` and only literals and these known wrappers are read; anything else is kept
as text. :func:`split_top` splits a line at a separator outside brackets and quotes (a verl
``key:value - key:value`` line whose values hold ``device='cuda:0'``).
"""

from __future__ import annotations

import ast
import json
import math
import re
from typing import Any

__all__ = ["parse_value", "parse_mapping", "split_top", "to_number", "UnreadableValue"]

#: Callables whose first argument is the value: numpy scalar types, torch/numpy constructors.
_WRAPPERS = frozenset(
    {
        "float64",
        "float32",
        "float16",
        "float128",
        "longdouble",
        "double",
        "single",
        "half",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint64",
        "uint32",
        "uint16",
        "uint8",
        "intc",
        "intp",
        "bool_",
        "bool",
        "str_",
        "bytes_",
        "tensor",
        "Tensor",
        "array",
        "asarray",
        "float",
        "int",
        "Decimal",
        "Fraction",
    }
)
_NAMES: dict[str, Any] = {
    "nan": math.nan,
    "NaN": math.nan,
    "inf": math.inf,
    "Infinity": math.inf,
    "True": True,
    "False": False,
    "None": None,
    "true": True,
    "false": False,
    "null": None,
    "True_": True,
    "False_": False,
}
#: ``grad_fn=<MeanBackward0>`` is not Python: made a string before parsing.
_ANGLE = re.compile(r"=\s*<([\w.]+)(?: object at 0x[0-9a-fA-F]+)?>")


class UnreadableValue(ValueError):
    """The text is neither a literal nor a known numpy/torch wrapper of one."""


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _eval(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _eval(node.operand)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
        raise UnreadableValue("sign on a non-number")
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = _dotted(node)
        last = name.rsplit(".", 1)[-1] if name else ""
        if last in _NAMES:
            return _NAMES[last]
        raise UnreadableValue(f"unknown name {name!r}")
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise UnreadableValue("** in a dict")
            out[_eval(k)] = _eval(v)
        return out
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(e) for e in node.elts]
    if isinstance(node, ast.Call):
        name = _dotted(node.func) or ""
        if name.rsplit(".", 1)[-1] in _WRAPPERS and node.args:
            v = _eval(node.args[0])
            if isinstance(v, list) and len(v) == 1 and not isinstance(v[0], list):
                v = v[0]  # tensor([0.5]): one value
            if isinstance(v, str) and name.rsplit(".", 1)[-1] not in ("str_", "bytes_"):
                return to_number(v)
            return v
        raise UnreadableValue(f"unknown call {name or '?'}(...)")
    raise UnreadableValue(f"not a literal ({type(node).__name__})")


def _parse(text: str) -> Any:
    body = _ANGLE.sub(r"='\1'", text.strip())
    try:
        tree = ast.parse(body, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        raise UnreadableValue(str(exc)) from None
    try:
        return _eval(tree.body)
    except RecursionError:
        raise UnreadableValue("nested too deep") from None


def to_number(value: Any) -> Any:
    """A number in a string (``'0.125'``, ``'nan'``) as a float; anything else unchanged."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def parse_value(text: str) -> Any:
    """One printed value: a float for a number in any of the printed forms, else the text stripped.

    ``'0.41'``, ``'np.float64(0.41)'``, ``"tensor(0.41, device='cuda:0')"`` -> 0.41;
    ``'nan'`` -> nan; ``'np.True_'`` -> True; ``'abc'`` -> ``'abc'``.
    """
    s = text.strip()
    try:
        return float(s)
    except ValueError:
        pass
    try:
        v = _parse(s)
    except UnreadableValue:
        return s
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return float(v)
    return to_number(v) if isinstance(v, str) else s


def parse_mapping(text: str) -> dict[Any, Any] | None:
    """One printed dict (``str(dict)`` or JSON, values in any printed form), else None."""
    body = text.strip()
    if not body.startswith("{"):
        return None
    try:
        obj = _parse(body)
    except UnreadableValue:
        try:
            obj = json.loads(body)
        except (json.JSONDecodeError, RecursionError):
            return None
    return obj if isinstance(obj, dict) else None


def split_top(text: str, sep: str, *, quotes: bool = True) -> list[str]:
    """``text`` split at ``sep`` where it stands outside brackets and quotes (an unclosed quote,
    as in ``key:it's``, is taken as text: split again minding brackets only)."""
    parts: list[str] = []
    depth = 0
    quote: str | None = None
    start = i = 0
    n, m = len(text), len(sep)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif quotes and c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
        elif depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            i += m
            start = i
            continue
        i += 1
    if quote is not None:
        return split_top(text, sep, quotes=False)
    parts.append(text[start:])
    return parts
