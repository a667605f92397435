"""The layer contracts (``[tool.importlinter]`` in pyproject.toml, run by the lint session) hold on
the tree, and one deliberately broken import fails them: import-linter runs on a copy of the
sources with that one import added."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the packages the contracts name, and where their parent directory goes on the path
PACKAGES = {
    "src/rlvr_schedule": "src",
    "adapters/rlvr_schedule_adapters": "adapters",
    "reference_trainer/rlvr_trainer": "reference_trainer",
    "benchmarks": ".",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The packages' Python files and pyproject.toml, copied."""
    out = tmp_path_factory.mktemp("tree")
    skip = shutil.ignore_patterns("__pycache__", "results", "*.md", "*.json", "*.gz", "*.xz", "*.png")
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, out / pkg, ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", out / "pyproject.toml")
    return out


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(str(tree / d) for d in dict.fromkeys(PACKAGES.values()))
    return subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()", "--no-cache"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    res = lint(tree)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "4 kept, 0 broken" in res.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        # the core reaches for a framework
        ("src/rlvr_schedule/records.py", "import torch", "the core imports no training framework BROKEN"),
        # the trainer's old circle: the loop imports the CLI (which imports the harness, which imports the loop)
        (
            "reference_trainer/rlvr_trainer/train.py",
            "from rlvr_trainer.cli import main",
            "the trainer: CLI over the experiment harness over the loop over its parts BROKEN",
        ),
        # the core imports what is built on it
        (
            "src/rlvr_schedule/report.py",
            "import rlvr_trainer.config",
            "benchmarks over the reference trainer and the adapters, over the core BROKEN",
        ),
        # a cycle inside the core: its error types import the driver, which imports them
        ("src/rlvr_schedule/errors.py", "import rlvr_schedule.driver", "no cycle in any package BROKEN"),
    ],
)
def test_a_broken_import_fails_its_contract(tree: Path, module: str, line: str, contract: str) -> None:
    path = tree / module
    original = path.read_text()
    path.write_text(original + f"\n{line}  # noqa\n")
    try:
        res = lint(tree)
    finally:
        path.write_text(original)
    assert res.returncode != 0
    assert contract in res.stdout, res.stdout


def _loads(path: Path) -> list[str]:
    """What a benchmark file loads by hand: imports of test modules, sys.path edits, and file loaders
    (importlib's spec_from_file_location / import_module, runpy) given a path under tests/."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            found += [f"import {n}" for n in names if n and n.split(".")[0] in ("tests", "conftest")]
            found += [f"import {n}" for n in names if n and n.split(".")[-1].startswith("test_")]
        elif isinstance(node, ast.Call):
            call = ast.unparse(node.func)
            if call.startswith("sys.path."):
                found.append(ast.unparse(node))
            if call.split(".")[-1] in ("spec_from_file_location", "import_module", "run_path", "run_module"):
                if "tests" in ast.unparse(node):
                    found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("part", ["evidence", "fixtures"])
def test_evidence_and_fixtures_load_nothing_by_path(part: str) -> None:
    """benchmarks/evidence and benchmarks/fixtures are packages: no sys.path edit, no module of tests/."""
    found = {str(p.relative_to(ROOT)): _loads(p) for p in sorted((ROOT / "benchmarks" / part).rglob("*.py"))}
    assert found and not {k: v for k, v in found.items() if v}


def test_no_benchmark_imports_a_test_module() -> None:
    """Tests import benchmarks (to check a script's logic, and the shared fixtures), never the reverse."""
    found = {
        str(p.relative_to(ROOT)): [x for x in _loads(p) if not x.startswith("sys.path.") or "tests" in x]
        for p in sorted((ROOT / "benchmarks").rglob("*.py"))
    }
    assert {k: v for k, v in found.items() if v} == {}
