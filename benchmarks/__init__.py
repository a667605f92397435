"""Benchmarks and evidence: speed and memory measurements, and the scripts behind docs/RESULTS.md.

A package, run from the repository root: ``python -m benchmarks.evidence.schedules_v3 ...``.
It uses the product (core, adapters, reference trainer); the product never imports it. Tests may
import it (to check a script's logic); nothing here imports a module under ``tests/``.
"""
