"""The core imports and fits with numpy alone: optional libraries are imported lazily."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCKED = [
    "pluggy",
    "yaml",
    "matplotlib",
    "torch",
    "tensorboard",
    "tensorboardX",
    "rich",
    "scipy",
    "trl",
    "verl",
    "openrlhf",
    "vllm",
    "transformers",
]

SCRIPT = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCKED = set({blocked!r})

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"blocked optional dependency {{name}}")
            return None

    sys.meta_path.insert(0, Block())
    import rlvr_schedule
    from rlvr_schedule import records, theory, clocks, policy, synthetic, ingest, planner, report, cli
    from rlvr_schedule.synthetic import make_sweep
    from rlvr_schedule.clocks import fit_sweep

    runs = make_sweep([16, 32, 64, 128, 256], critical_batch=128, failure_samples=60000, seed=0)
    fit = fit_sweep(runs)
    assert fit.to_dict()["critical_batch"] is not None
    loaded = sorted(m.split(".")[0] for m in sys.modules)
    print("OK", sorted(BLOCKED & set(loaded)))
    """
)


def test_core_imports_and_fits_with_numpy_alone() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(blocked=BLOCKED)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("OK []")
