"""Draw a held-out set of synthetic tasks at random from the ranges the earlier sets spanned.

Each parameter is drawn uniformly between the smallest and the largest value that the earlier rows
of :data:`benchmarks.evidence.heldout_tasks.ROWS` used (a missing ``failure_exponent`` counts as 0),
from a stated seed, and rounded to the grain the table is written in. The drawn rows are committed
in ``ROWS`` before anything runs on them; ``python -m benchmarks.evidence.draw_heldout`` prints them
again, and a test checks that the committed rows are the draw's.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from benchmarks.evidence.heldout_tasks import COLUMNS, ROWS

__all__ = ["GRAIN", "ranges", "draw_set"]

#: rounding grain per column: B* to 4 rollouts, F to 1,000, noise to 0.01, drift to 0.5, alpha and
#: hazard to 0.01
GRAIN = {
    "critical_batch": 4.0,
    "failure_samples": 1000.0,
    "noise_fraction": 0.01,
    "drift": 0.5,
    "failure_exponent": 0.01,
    "crash_hazard": 0.01,
}


def ranges(before_set: int) -> dict[str, tuple[float, float]]:
    """Per column, (min, max) over the rows of the sets before ``before_set``."""
    rows = [values for s, _name, *values in ROWS if s < before_set]
    out = {}
    for j, col in enumerate(COLUMNS):
        vals = [0.0 if r[j] is None else float(r[j]) for r in rows]
        out[col] = (min(vals), max(vals))
    return out


def _name(index: int, kw: dict[str, float]) -> str:
    def fmt(x: float) -> str:
        return f"{x:g}".replace(".", "p")

    return f"h{index}_b{int(kw['critical_batch'])}_f{int(kw['failure_samples'] // 1000)}k_drift{fmt(kw['drift'])}_alpha"


def draw_set(set_id: int, first_index: int, *, n: int = 3, seed: int) -> list[tuple[Any, ...]]:
    """``n`` rows ``(set_id, name, *COLUMNS)`` drawn uniformly in the earlier sets' ranges."""
    rng = np.random.default_rng(seed)
    lims = ranges(set_id)
    rows = []
    for i in range(n):
        kw = {}
        for col in COLUMNS:
            lo, hi = lims[col]
            g = GRAIN[col]
            kw[col] = round(round(float(rng.uniform(lo, hi)) / g) * g, 6)
        rows.append((set_id, _name(first_index + i, kw), *(kw[c] for c in COLUMNS)))
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", type=int, default=8)
    ap.add_argument("--first", type=int, default=22, help="index of the first task's name (h22)")
    ap.add_argument("--seed", type=int, default=8)
    args = ap.parse_args(argv)
    for row in draw_set(args.set, args.first, seed=args.seed):
        print(row)


if __name__ == "__main__":
    main()
