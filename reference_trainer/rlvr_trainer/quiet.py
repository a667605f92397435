"""vLLM's own log goes to a file in the run directory, not to the console.

Building a vLLM engine prints dozens of third-party warnings (platform advice such as
``LD_PRELOAD``, NUMA binding and kernel registration from native code, deprecation warnings of its
dependencies) and vLLM logs on its ``vllm`` logger while it runs. None of it is the trainer's
output; between progress bars it buries the verdicts. :func:`engine_log` catches all of it:

* while the engine is built, the process's stdout and stderr are redirected at the file
  descriptor level (native code writes there directly, bypassing Python), and ``sys.stdout`` /
  ``sys.stderr`` with them;
* afterwards the ``vllm`` logger (which vLLM configures during construction with a console
  handler and ``propagate=False``) writes to the same file instead, so its later warnings do too.

The log level stays vLLM's own (``VLLM_LOGGING_LEVEL``). Errors are not hidden: an exception
while the engine is built propagates, and the file holds what vLLM printed before it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["engine_log", "route_logger", "quiet_transformers"]

#: The logger vLLM configures (``vllm.logger``: handler "vllm", ``propagate=False``).
VLLM_LOGGER = "vllm"


def route_logger(path: str | Path, name: str = VLLM_LOGGER) -> logging.Handler:
    """Replace ``name``'s handlers with one appending to ``path`` (the previous ones may hold a
    stream that no longer exists); returns the new handler."""
    logger = logging.getLogger(name)
    for h in list(logger.handlers):
        if getattr(h, "_rlvr_engine_log", False):
            h.close()
        logger.removeHandler(h)
    handler = logging.FileHandler(path, mode="a", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(levelname)s %(asctime)s [%(name)s] %(message)s"))
    handler._rlvr_engine_log = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False
    return handler


@contextlib.contextmanager
def engine_log(path: str | Path | None) -> Iterator[None]:
    """Send everything printed inside the block (Python and native) and the ``vllm`` logger's
    later records to ``path`` (appended). ``None``: do nothing (console as usual)."""
    if path is None:
        yield
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for s in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            s.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    old_out, old_err = sys.stdout, sys.stderr
    f = open(path, "a", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115 (closed below)
    try:
        for fd in (1, 2):
            os.dup2(f.fileno(), fd)
        sys.stdout = sys.stderr = f
        yield
    finally:
        with contextlib.suppress(Exception):
            f.flush()
        sys.stdout, sys.stderr = old_out, old_err
        for fd, dup in saved.items():
            os.dup2(dup, fd)
            os.close(dup)
        f.close()
        route_logger(path)


def quiet_transformers() -> None:
    """transformers' own progress bars ("Loading weights", "Writing model shards": one per model
    load) and its messages below ERROR off the console; the trainer's bars use tqdm directly and
    stay. For console front ends (the CLI), not for library use."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
