"""TEST STUB (see tests/openrlhf/stubs/README.md)."""

from flash_attn import _unavailable

index_first_axis = pad_input = rearrange = unpad_input = _unavailable
