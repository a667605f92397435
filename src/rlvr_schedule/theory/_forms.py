"""Quadratic forms and traces for matrices given either in full (d, d) or as a diagonal (d,)."""

from __future__ import annotations

import numpy as np


def as_vector(name: str, x) -> np.ndarray:
    v = np.asarray(x, dtype=float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite")
    return v


def as_operator(name: str, x, dim: int) -> np.ndarray:
    """A (d,) diagonal or a symmetric (d, d) matrix."""
    m = np.asarray(x, dtype=float)
    if m.shape not in ((dim,), (dim, dim)):
        raise ValueError(f"{name} must have shape ({dim},) (a diagonal) or ({dim}, {dim}), got {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"{name} must be finite")
    if m.ndim == 2 and not np.allclose(m, m.T, rtol=1e-10, atol=1e-12 * max(1.0, float(np.abs(m).max()))):
        raise ValueError(f"{name} must be symmetric")
    return m


def diagonal(m: np.ndarray) -> np.ndarray:
    return m if m.ndim == 1 else np.diag(m).copy()


def apply(m: np.ndarray, x: np.ndarray) -> np.ndarray:
    """m @ x for a diagonal or full m; x may be (d,) or (..., d) (rows)."""
    return m * x if m.ndim == 1 else x @ m.T


def quad(m: np.ndarray, x: np.ndarray) -> float:
    """x' m x."""
    return float(x @ apply(m, x))


def trace_product(a: np.ndarray, b: np.ndarray) -> float:
    """tr(a b) for symmetric a, b, each diagonal or full."""
    if a.ndim == 1 and b.ndim == 1:
        return float(a @ b)
    if a.ndim == 1:
        return float(a @ np.diag(b))
    if b.ndim == 1:
        return float(np.diag(a) @ b)
    return float(np.sum(a * b))


def sandwich(d: np.ndarray, m: np.ndarray) -> np.ndarray:
    """D m D for a diagonal D (given as a vector)."""
    return d * m * d if m.ndim == 1 else d[:, None] * m * d[None, :]
