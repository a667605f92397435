"""The trainer on CUDA (marked ``cuda``: skipped without a CUDA device; CI is CPU-only).

The checks live in ``benchmarks/fixtures/cuda_checks.py`` (the GPU check runs them too, part
``trainer.cuda_tests``); here they are asserted. With ``RLVR_CHECK_DEVICE=cpu`` they run on the
CPU instead.

- bf16 log-probs of the packed step equal an unpacked per-sequence reference within ``BF16_TOL``;
- a run killed with SIGKILL mid-update and resumed reproduces the decisions and the samples of an
  uninterrupted one, with ``torch.use_deterministic_algorithms(True)`` and the CUDA RNG state in
  the checkpoint.
"""

from __future__ import annotations

import os

import pytest
import torch

from benchmarks.fixtures.cuda_checks import BF16_TOL, EXPECTED_BATCHES, packed_vs_unpacked, sigkill_resume

pytestmark = pytest.mark.cuda


@pytest.fixture
def device() -> str:
    want = os.environ.get("RLVR_CHECK_DEVICE")
    if want:
        return want
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    return "cuda"


def test_bf16_packed_logprobs_equal_an_unpacked_reference(device):
    fig = packed_vs_unpacked(device)
    assert fig["max"] <= BF16_TOL["max"] and fig["mean"] <= BF16_TOL["mean"], fig


def test_sigkill_and_resume_reproduce_decisions_and_samples(device, tiny_model_dir, tmp_path):
    fig = sigkill_resume(device, tiny_model_dir, tmp_path)
    assert fig["returncodes"][0] == 0 and fig["killed"] and fig["returncodes"][2] == 0, fig
    assert fig["rows_at_kill"] == 3  # checkpoint at step 2, one record past it
    if device.startswith("cuda"):
        assert fig["rng_cuda_saved"]
    assert fig["batches"] == EXPECTED_BATCHES
    assert fig["decisions_equal"] and fig["switched"]
    assert fig["samples_equal"]
    assert fig["metrics_equal"]
