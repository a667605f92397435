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


def _digest(run) -> list[tuple]:
    return [(r.step, r.samples, r.batch, r.lr, r.reward_mean, r.entropy) for r in run.records]


def test_valid_variants_read_as_the_plain_file(tmp_path: Path) -> None:
    """CRLF line ends, a multi-member gzip stream (``cat a.gz b.gz``) and a TSV read exactly as the
    plain file: the bounded, fault-naming reader changes nothing for a valid log."""
    import gzip

    from benchmarks.fixtures.bad_inputs import csv_text, jsonl, rows
    from rlvr_schedule.ingest import load_run

    text = jsonl(rows())
    plain = tmp_path / "plain.jsonl"
    plain.write_text(text)
    want = _digest(load_run(plain))
    crlf = tmp_path / "crlf.jsonl"
    crlf.write_bytes(text.replace("\n", "\r\n").encode())
    half = len(text.splitlines()) // 2
    lines = text.splitlines(keepends=True)
    multi = tmp_path / "multi.jsonl.gz"
    multi.write_bytes(
        gzip.compress("".join(lines[:half]).encode()) + gzip.compress("".join(lines[half:]).encode())
    )
    csv_crlf = tmp_path / "crlf.csv"
    csv_crlf.write_bytes(csv_text(rows()).replace("\n", "\r\n").encode())
    tsv = tmp_path / "t.tsv.gz"
    tsv.write_bytes(gzip.compress(csv_text(rows(), sep="\t").encode()))
    for p in (crlf, multi, csv_crlf, tsv):
        assert _digest(load_run(p)) == want, p.name


def test_yaml_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    """A merge key (``<<: *base``) brings keys that the mapping may override: no duplicate-key error;
    the same key written twice by hand is one, naming both lines."""
    from rlvr_schedule.errors import ConfigError
    from rlvr_schedule.policy import load_schedule

    p = tmp_path / "merge.yaml"
    p.write_text(
        "base: &base {batch: 64, lr: 1.0e-6}\n"
        "type: static\n"
        "stages:\n"
        "  - {<<: *base, until_samples: 640}\n"
        "  - <<: *base\n"
        "    batch: 128\n"
    )
    with pytest.raises(ConfigError, match="unknown key"):  # the anchor's own key is not a schedule key
        load_schedule(p)
    q = tmp_path / "merge_ok.yaml"
    q.write_text(
        "stages:\n"
        "  - &first {batch: 64, lr: 1.0e-6, until_samples: 640}\n"
        "  - <<: *first\n"
        "    batch: 128\n"
        "    until_samples: null\n"
    )
    sched = load_schedule(q)
    assert [(s.batch, s.lr) for s in sched.stages] == [(64, 1e-6), (128, 1e-6)]
    r = tmp_path / "dup.yaml"
    r.write_text("stages:\n  - batch: 64\n    lr: 1.0e-6\n    batch: 128\n")
    with pytest.raises(ConfigError, match=r"dup\.yaml:4: key 'batch' given twice \(lines 2 and 4"):
        load_schedule(r)
