"""TEST STUB (see tests/openrlhf/stubs/README.md)."""
