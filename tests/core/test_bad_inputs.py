"""Bad input through the command line (the cases: ``benchmarks/fixtures/bad_inputs.py``): each case in
a forked child under a time limit and a memory cap, so that a hang or a bomb fails the case fast.
Every case must end in one clear error line naming the file and the line, field or byte offset (exit
2), or in a located warning with the result still produced (exit 0): no traceback, no hang."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.fixtures.bad_inputs import CASES, MEMORY_CAP_MB, Case, problems, run_case


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_a_clear_error_or_a_located_warning(case: Case, tmp_path: Path) -> None:
    res = run_case(case, tmp_path)
    assert not problems(case, res, tmp_path), problems(case, res, tmp_path)
    assert res.peak_mb < MEMORY_CAP_MB / 2, f"{res.peak_mb:.0f} MB"


def test_the_case_set_covers_every_class() -> None:
    assert len(CASES) >= 100
    assert len({c.name for c in CASES}) == len(CASES)
    assert {"truncated gzip", "deep nesting", "endless line", "fifo or device", "symlink loop"} <= {
        c.cls for c in CASES
    }
