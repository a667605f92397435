"""The shipped text names code, data and runs: no issue numbers, branches, roles or machine paths.

Users have none of the project's issue tracker, branches or machines, so a reference to them in the
README, the docs, the code or the benchmarks is noise to a reader (the git log keeps the history).
The check reads every tracked file under those paths (``git ls-files``) and fails naming each file
and line that matches.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCOPE = ["README.md", "docs", "src", "adapters", "reference_trainer", "benchmarks", "examples"]
#: binary or archived files: not read
SKIP_SUFFIXES = {".png", ".gz", ".xz", ".tar", ".zip", ".pt", ".safetensors", ".bin", ".npz", ".pyc"}

#: what the text must not say, with why (the reason is printed with each hit)
FORBIDDEN: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bissue[ -]?#?[0-9]+", re.IGNORECASE), "an issue number"),
    (re.compile(r"\bi[0-9]{1,3}[a-z]? branch\b|\bbranch i[0-9]{1,3}[a-z]?\b"), "a work branch"),
    (re.compile(r"/work/"), "a machine-local path"),
    (re.compile(r"/tmp/\S*\.lock|\bheavy[ .]lock\b|\bshared lock\b"), "a machine-local lock"),
    (
        re.compile(
            r"\b(lead|helper|other|another|previous|tenth|eleventh|twelfth) sessions?\b", re.IGNORECASE
        ),
        "how the work was organised",
    ),
    (re.compile(r"\b(run|ran|measured) by the (lead|helper)\b", re.IGNORECASE), "who ran what"),
    (re.compile(r"\bTHEORY(\.md)? (notes|section)"), "a document users do not have"),
]


def tracked_files(root: Path = ROOT) -> list[Path]:
    """The tracked files under SCOPE (what a fresh clone has)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", *SCOPE], cwd=root, capture_output=True, check=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an sdist): every file there
        paths = [root / s for s in SCOPE if (root / s).is_file()]
        paths += [p for s in SCOPE if (root / s).is_dir() for p in (root / s).rglob("*") if p.is_file()]
        return [p for p in paths if p.suffix not in SKIP_SUFFIXES and "__pycache__" not in p.parts]
    return [root / p for p in out.split("\0") if p and Path(p).suffix not in SKIP_SUFFIXES]


def offending_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, reason, line) for each line that names what the product does not speak of."""
    hits = []
    for n, line in enumerate(text.splitlines(), 1):
        for pattern, why in FORBIDDEN:
            if pattern.search(line):
                hits.append((n, why, line.strip()[:160]))
                break
    return hits


def test_the_patterns_catch_what_they_are_for():
    bad = (
        "as issue 20 found\nsee Issue #5\nthe issue-12 TRL branch\non branch i21\nthe i20t branch\n"
        "/work/main/x\nflock /tmp/rlvr-heavy.lock make\nrun by the lead\nthe tenth session\nsee THEORY section 3\n"
    )
    assert [n for n, _, _ in offending_lines(bad)] == list(range(1, 11))
    good = "the issue of batch size\nsessions of nox: the core session\ni20 tasks h1-h21\nissues show\n"
    assert offending_lines(good) == []


def test_shipped_text_names_no_issues_roles_or_machine_paths():
    hits = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except (IsADirectoryError, FileNotFoundError):
            continue
        for n, why, line in offending_lines(text):
            hits.append(f"{path.relative_to(ROOT)}:{n}: {why}: {line}")
    assert not hits, f"{len(hits)} line(s) speak of the work, not the product:\n" + "\n".join(hits)


def test_outside_a_git_checkout_every_file_in_scope_is_read(tmp_path):
    """An sdist has no git: the check walks the folders instead of skipping."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("see issue 12\n")
    (tmp_path / "docs" / "b.png").write_bytes(b"\x89PNG")
    files = tracked_files(tmp_path)
    assert files == [tmp_path / "docs" / "a.md"]
    assert offending_lines(files[0].read_text())
