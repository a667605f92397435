"""Run every fault case of the core (``benchmarks/fixtures/faults.py``, asserted by
tests/core/test_faults.py, and the bad-input cases of ``benchmarks/fixtures/bad_inputs.py``, asserted
by tests/core/test_bad_inputs.py) and count outcomes.

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
    bad_input_table()
    print(f"\n# wall time {time.perf_counter() - t0:.1f} s")


def bad_input_table() -> None:
    """The bad-input cases (``benchmarks/fixtures/bad_inputs.py``), each in a forked child under a
    time limit and a memory cap, counted per fault class with the slowest case's time and the most
    memory a case added."""
    from benchmarks.fixtures.bad_inputs import CASES, CLASSES, problems, run_case

    per: dict[str, list] = {c: [] for c in CLASSES}
    for case in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            res = run_case(case, Path(tmp))
            bad = problems(case, res, Path(tmp))
        got = "other" if bad else case.expect
        per[case.cls].append((got, res.seconds, res.peak_mb, res.timed_out, "Traceback" in res.stderr))
    print(
        "\n| fault class | cases | clear error (exit 2) | located warning (exit 0) | traceback | hang | other "
        "| slowest s | most MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    tot = Counter()
    for cls, rows in per.items():
        c = Counter(g for g, *_ in rows)
        tb, hang = sum(r[4] for r in rows), sum(r[3] for r in rows)
        tot.update(c)
        tot["n"] += len(rows)
        tot["tb"] += tb
        tot["hang"] += hang
        print(
            f"| {cls} | {len(rows)} | {c['error']} | {c['survived']} | {tb} | {hang} | {c['other']} | "
            f"{max(r[1] for r in rows):.2f} | {max(r[2] for r in rows):.0f} |"
        )
    print(
        f"| **all** | **{tot['n']}** | **{tot['error']}** | **{tot['survived']}** | **{tot['tb']}** | "
        f"**{tot['hang']}** | **{tot['other']}** | | |"
    )


if __name__ == "__main__":
    main()
