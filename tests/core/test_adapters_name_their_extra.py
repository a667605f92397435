"""An adapter's launcher or host without its framework says which extra to install (exit 2 for a
launcher, an ImportError naming it for a host), never a traceback from deep inside an import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _blocking(tmp_path: Path, *modules: str) -> dict[str, str]:
    """An environment in which ``modules`` cannot be imported (as on a machine without them)."""
    site = tmp_path / "block"
    site.mkdir()
    code = "import sys\nclass _B:\n    def find_spec(self, name, path=None, target=None):\n"
    code += f"        if name.split('.')[0] in {modules!r}:\n            raise ModuleNotFoundError(name)\n"
    code += "        return None\nsys.meta_path.insert(0, _B())\n"
    (site / "sitecustomize.py").write_text(code)
    paths = [str(site), str(ROOT / "src"), str(ROOT / "adapters"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@pytest.mark.parametrize(
    "adapter,blocked",
    [("verl", ("verl", "hydra")), ("openrlhf", ("openrlhf",))],
)
def test_a_launcher_without_its_framework_names_the_extra(tmp_path, adapter, blocked):
    out = subprocess.run(
        [sys.executable, "-m", f"rlvr_schedule_adapters.{adapter}", "--schedule", "s.yaml"],
        capture_output=True,
        text=True,
        env=_blocking(tmp_path, *blocked),
        timeout=120,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert f'pip install -e ".[{adapter}]"' in out.stderr and "Traceback" not in out.stderr


def test_the_trl_host_without_trl_names_the_extra(tmp_path):
    code = "from rlvr_schedule_adapters.trl import RlvrScheduleCallback"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=_blocking(tmp_path, "trl", "transformers"),
        timeout=120,
    )
    assert out.returncode != 0 and 'pip install -e ".[trl]"' in out.stderr
