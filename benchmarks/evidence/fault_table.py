"""Run every fault case of the core (``benchmarks/fixtures/faults.py``, asserted by
tests/core/test_faults.py) and count outcomes.

Each case is a corrupt/truncated/NaN-laden log through the CLI, a raising plugin, an invalid
schedule config or a foreign checkpoint state; its outcome is a clear error or a logged,
survived fault (or a failed check, which the tests would also report). Prints a markdown table.

    python -m benchmarks.evidence.fault_table
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections import Counter
from pathlib import Path


def main() -> None:
    from benchmarks.evidence.common import machine
    from benchmarks.fixtures.faults import CASES

    # the plugin faults are logged with tracebacks: the cases count them, the table does not print them
    lg = logging.getLogger("rlvr_schedule")
    lg.propagate = False
    lg.addHandler(logging.NullHandler())
    t0 = time.perf_counter()
    rows, counts = [], Counter()
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                out = case.run(Path(tmp))
                got, detail = out.kind, out.detail
            except AssertionError as exc:
                got, detail = "check failed", str(exc).splitlines()[0] if str(exc) else "assertion"
            except Exception as exc:  # noqa: BLE001 - an unhandled crash is an outcome too
                got, detail = "crashed", f"{type(exc).__name__}: {exc}"
        counts[(case.group, got)] += 1
        detail = detail.replace(tmp, "<tmp>").replace("|", "/")
        if len(detail) > 150:
            detail = detail[:147] + "..."
        rows.append(f"| {case.group} | {case.name} | {case.expect} | {got} | {detail} |")
    print(f"# fault cases of benchmarks/fixtures/faults.py; {machine()}\n")
    print("| group | case | expected | outcome | message / evidence |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    print("\n| group | cases | clear error | logged, survived | other |")
    print("|---|---:|---:|---:|---:|")
    for g in ("log", "config", "plugin", "state"):
        n = sum(v for (gg, _), v in counts.items() if gg == g)
        e, s = counts[(g, "error")], counts[(g, "survived")]
        print(f"| {g} | {n} | {e} | {s} | {n - e - s} |")
    total = len(CASES)
    e = sum(v for (_, k), v in counts.items() if k == "error")
    s = sum(v for (_, k), v in counts.items() if k == "survived")
    print(f"| all | {total} | {e} | {s} | {total - e - s} |")
    print(f"\n# wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
