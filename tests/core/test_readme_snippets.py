"""Every python snippet in README.md runs as written, with the shipped files unchanged.

A snippet runs from the repository root (so the paths it names are the shipped files); a
``test_*`` function it defines is called too. A fragment with ``...`` placeholders (a framework
call the reader completes) cannot run: it must compile, and its imports must resolve, unless the
framework it imports is not installed in this environment (then it is skipped, saying which).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _snippets() -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


SNIPPETS = _snippets()


def test_the_readme_has_snippets_to_run():
    assert any("def test_" in code for _, code in SNIPPETS)


@pytest.mark.parametrize("line, code", SNIPPETS, ids=[f"README.md:{n}" for n, _ in SNIPPETS])
def test_readme_snippet_runs(line, code, monkeypatch):
    tree = compile(code, f"README.md:{line}", "exec", flags=ast.PyCF_ONLY_AST)
    monkeypatch.chdir(ROOT)
    if any(isinstance(n, ast.Constant) and n.value is Ellipsis for n in ast.walk(tree)):
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        try:
            exec(compile(ast.Module(body=imports, type_ignores=[]), f"README.md:{line}", "exec"), {})
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] in ("trl", "transformers", "torch", "verl", "openrlhf"):
                pytest.skip(
                    f"README.md:{line} imports {exc.name}, not installed here (the trainer session runs it)"
                )
            raise
        return
    ns: dict = {"__name__": f"readme_{line}"}
    exec(compile(tree, f"README.md:{line}", "exec"), ns)
    tests = [v for k, v in ns.items() if k.startswith("test_") and callable(v)]
    for fn in tests:
        fn()
