"""Fault injection on the core (the cases: ``benchmarks/fixtures/faults.py``): every case ends in a
clear error or a logged, survived fault, as it expects."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.fixtures.faults import CASES, FaultCase


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fault_is_a_clear_error_or_a_logged_survived_fault(case: FaultCase, tmp_path: Path) -> None:
    out = case.run(tmp_path)
    assert out.kind == case.expect, out


def test_every_group_is_covered() -> None:
    assert {c.group for c in CASES} == {"log", "config", "plugin", "state"}
    assert len({c.name for c in CASES}) == len(CASES)
