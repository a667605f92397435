"""TEST STUB (see tests/openrlhf/stubs/README.md)."""

from flash_attn import _unavailable

all_gather = _unavailable
