"""The scripts behind docs/RESULTS.md; each writes the verbatim output kept under ``results/``.

Run them from the repository root as modules, e.g. ``python -m benchmarks.evidence.schedules_v3
--lean --seeds 20``; they import each other (and ``benchmarks.fixtures``) by package name.
"""
