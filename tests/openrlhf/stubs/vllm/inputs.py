"""TEST STUB (see tests/openrlhf/stubs/README.md)."""

from vllm import SamplingParams as TokensPrompt  # noqa: F401
