"""TEST STUB of vllm (see tests/openrlhf/stubs/README.md): import only, every call raises."""

__version__ = "0.0.0+rlvr-test-stub"
STUB = True


def _unavailable(*args, **kwargs):
    raise RuntimeError("vllm test stub: not available in the OpenRLHF test environment")


class SamplingParams:
    def __init__(self, *args, **kwargs):
        _unavailable()


AsyncEngineArgs = AsyncLLMEngine = SamplingParams
