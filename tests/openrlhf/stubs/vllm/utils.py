"""TEST STUB (see tests/openrlhf/stubs/README.md)."""

from vllm import _unavailable as random_uuid  # noqa: F401
