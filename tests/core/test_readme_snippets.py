"""Every python and bash snippet in README.md runs as written, with the shipped files unchanged.

A python snippet runs from a fresh directory (as a user's own test would: what it needs ships
with the package); a ``test_*`` function it defines is called too. A fragment with ``...`` placeholders (a framework
call the reader completes) cannot run: it must compile, and its imports must resolve, unless the
framework it imports is not installed in this environment (then it is skipped, saying which).

A ```` ```bash ```` block runs as one bash script in a fresh directory that holds the repository's
``examples/`` and ``tests/`` (the data the README starts from), with ``python``, ``rlvr-schedule``
and ``rlvr-trainer`` being this interpreter and its modules; what it writes stays in that
directory. A block that calls ``rlvr-trainer`` needs transformers (the trainer session runs it;
elsewhere it is skipped, saying why). ```` ```sh ```` blocks are shown, not run (installs, ``make``,
launchers of frameworks this environment does not have), but what they name must exist: each
extra in ``pyproject.toml``, each ``make`` target in the Makefile, each ``python -m`` module in the
source tree.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
_SH = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
#: what a bash snippet may call, and how it runs here
_COMMANDS = {
    "python": [sys.executable],
    "rlvr-schedule": [sys.executable, "-m", "rlvr_schedule.cli"],
    "rlvr-trainer": [sys.executable, "-m", "rlvr_trainer.cli"],
}


def _snippets(block: re.Pattern[str] = _BLOCK) -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in block.finditer(text)]


SNIPPETS = _snippets()
BASH_SNIPPETS = _snippets(_BASH)


def test_the_readme_has_snippets_to_run():
    assert any("def test_" in code for _, code in SNIPPETS)


@pytest.mark.parametrize("line, code", SNIPPETS, ids=[f"README.md:{n}" for n, _ in SNIPPETS])
def test_readme_snippet_runs(line, code, monkeypatch, tmp_path):
    tree = compile(code, f"README.md:{line}", "exec", flags=ast.PyCF_ONLY_AST)
    monkeypatch.chdir(tmp_path)
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


def test_the_readme_has_commands_to_run():
    called = {line.split()[0] for _, code in BASH_SNIPPETS for line in code.splitlines() if line.strip()}
    assert {"rlvr-schedule", "rlvr-trainer", "python"} <= called


@pytest.mark.parametrize("line, code", BASH_SNIPPETS, ids=[f"README.md:{n}" for n, _ in BASH_SNIPPETS])
def test_readme_commands_run(line, code, tmp_path):
    lines = [s for s in code.splitlines() if s.strip() and not s.lstrip().startswith("#")]
    unknown = {s.split()[0] for s in lines} - set(_COMMANDS)
    assert not unknown, (
        f"README.md:{line} calls {sorted(unknown)}: add them to _COMMANDS or fence the block as sh"
    )
    if (
        any(s.split()[0] == "rlvr-trainer" for s in lines)
        and importlib.util.find_spec("transformers") is None
    ):
        pytest.skip(
            f"README.md:{line} runs rlvr-trainer, which needs transformers (the trainer session runs it)"
        )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, argv in _COMMANDS.items():
        shim = bin_dir / name
        shim.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in argv) + ' "$@"\n')
        shim.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    for shipped in ("examples", "tests"):
        (work / shipped).symlink_to(ROOT / shipped)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", code],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"README.md:{line} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )


SH_SNIPPETS = _snippets(_SH)


def _extras() -> set[str]:
    import tomllib

    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def _module_exists(name: str) -> bool:
    rel = Path(*name.split("."))
    return any(
        (ROOT / top / rel).with_suffix(".py").is_file() or (ROOT / top / rel / "__main__.py").is_file()
        for top in ("src", "adapters", "reference_trainer")
    )


@pytest.mark.parametrize("line, code", SH_SNIPPETS, ids=[f"README.md:{n}" for n, _ in SH_SNIPPETS])
def test_readme_shown_commands_name_what_exists(line, code):
    """A shown command names an extra, a make target or a module the repository has."""
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    extras = _extras()
    for cmd in (s.split("#", 1)[0].split() for s in code.splitlines()):
        if not cmd:
            continue
        if cmd[:3] == ["pip", "install", "-e"]:
            named = set(re.findall(r"\[([\w,-]+)\]", cmd[3])[0].split(","))
            assert named <= extras, f"README.md:{line}: no extra {sorted(named - extras)} in pyproject.toml"
        elif cmd[:2] == ["pip", "install"]:
            # torch (its index per machine), or a pin the trainer's test environment installs too
            pins = (ROOT / "requirements" / "trainer.txt").read_text().split()
            assert cmd[2] == "torch" or cmd[2] in pins, f"README.md:{line}: installs {cmd[2]!r}, not an extra"
        elif cmd[0] == "make":
            assert cmd[1] in targets, f"README.md:{line}: no make target {cmd[1]!r}"
        elif cmd[:2] == ["python", "-m"]:
            assert _module_exists(cmd[2]), f"README.md:{line}: no module {cmd[2]!r} in the source tree"
        else:
            pytest.fail(f"README.md:{line}: a shown command this test does not know: {' '.join(cmd)}")


def test_the_shown_command_check_can_fail(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "_module_exists", lambda name: name != "gone")
    with pytest.raises(AssertionError, match="no module 'gone'"):
        test_readme_shown_commands_name_what_exists(1, "python -m gone --x")
    with pytest.raises(AssertionError, match="no extra"):
        test_readme_shown_commands_name_what_exists(1, 'pip install -e ".[nosuch]"')
