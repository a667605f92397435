"""Issue 5, part 4 (core): run every fault case of ``tests/core/test_faults.py`` and count outcomes.

Each case is a corrupt/truncated/NaN-laden log through the CLI, a raising plugin, an invalid
schedule config or a foreign checkpoint state; its outcome is a clear error or a logged,
survived fault (or a failed check, which the tests would also report). Prints a markdown table.

    python benchmarks/evidence/fault_table.py
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "core"))


def main() -> None:
    from common import machine  # found through the paths above
    from test_faults import CASES

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
    print(f"# fault cases of tests/core/test_faults.py; {machine()}\n")
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
