"""Repository-wide pytest set-up: hypothesis runs derandomized under CI (CI=true), so a CI run is
reproducible; locally it explores new examples each run."""

from __future__ import annotations

import os

try:
    from hypothesis import settings
except ImportError:  # an environment without hypothesis has no property tests
    pass
else:
    settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
    if os.environ.get("CI"):
        settings.load_profile("ci")
