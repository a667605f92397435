"""vLLM's own log goes to a file in the run directory: nothing third-party on the console."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from rlvr_trainer.quiet import engine_log


def test_engine_log_catches_native_and_python_output_and_routes_the_vllm_logger(tmp_path, capfd):
    log_file = tmp_path / "run" / "vllm.log"
    logger = logging.getLogger("vllm")
    saved = (list(logger.handlers), logger.propagate)
    try:
        with engine_log(log_file):
            os.write(2, b"native stderr line\n")  # what C++ code prints (NUMA, kernel registration)
            os.write(1, b"native stdout line\n")
            print("python stdout line")
            print("python stderr line", file=sys.stderr)
        logging.getLogger("vllm.engine").warning("a vllm warning after construction")
        print("ours")  # the console is back
        out, err = capfd.readouterr()
        assert out == "ours\n" and err == ""
        text = log_file.read_text()
        for line in ("native stderr", "native stdout", "python stdout", "python stderr", "a vllm warning"):
            assert line in text
    finally:
        for h in logger.handlers:
            h.close()
        logger.handlers[:], logger.propagate = saved


def test_engine_log_none_leaves_the_console_alone(capfd):
    with engine_log(None):
        os.write(2, b"seen\n")
    assert capfd.readouterr().err == "seen\n"


@pytest.mark.slow
def test_a_real_vllm_engine_prints_no_warning_on_the_console(tiny_model_dir, tmp_path, capfd):
    """Building the tiny model's vLLM engine (on CPU: LD_PRELOAD advice, NUMA binding, deprecation
    warnings, ...) and generating prints no WARNING line; the run's vllm.log gets them."""
    import sys

    from rlvr_trainer.rollout import VLLMEngine

    first_engine = "vllm" not in sys.modules  # vLLM gives its start-up advice once per process
    log_file = tmp_path / "run" / "vllm.log"
    engine = VLLMEngine(tiny_model_dir, max_tokens=8, log_file=log_file)
    try:
        groups = engine.generate(["3+4="], 2, step=0)
        logging.getLogger("vllm").warning("vllm warns while running")
    finally:
        engine.close()
    out, err = capfd.readouterr()
    console = [ln for ln in (out + err).splitlines() if "warn" in ln.lower()]
    assert console == []
    assert len(groups[0]) == 2
    text = log_file.read_text()
    assert "vllm warns while running" in text
    if first_engine and not __import__("torch").cuda.is_available():  # the CPU platform advises on LD_PRELOAD
        assert "LD_PRELOAD" in text
