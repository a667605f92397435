"""TEST STUB of flash_attn (see tests/openrlhf/stubs/README.md): import only, every call raises."""

__version__ = "0.0.0+rlvr-test-stub"
STUB = True


def _unavailable(*args, **kwargs):
    raise RuntimeError("flash_attn test stub: not available on CPU")
