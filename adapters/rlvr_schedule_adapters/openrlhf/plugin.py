"""The ``openrlhf`` entry point of the ``rlvr_schedule`` plugin group: OpenRLHF's metric names.

Imports neither OpenRLHF nor Ray nor torch (the plugin loader imports it in every process).
"""

from __future__ import annotations

from collections.abc import Mapping

from rlvr_schedule.ingest.aliases import FRAMEWORK_METRICS
from rlvr_schedule.plugins import hookimpl

__all__ = ["OPENRLHF_ALIASES", "OPENRLHF_NAMES", "rlvr_schedule_metric_aliases"]

#: OpenRLHF 0.11.2's metric names, by canonical field (the core's framework table).
OPENRLHF_NAMES: Mapping[str, str] = FRAMEWORK_METRICS["openrlhf"]

#: Extra names for reading OpenRLHF logs back (its TensorBoard logger writes ``train/<key>``; the
#: core strips one prefix, so the adapter's own ``train/rlvr/*`` scalars need naming here).
OPENRLHF_ALIASES: dict[str, str] = {"train/rlvr/samples": "samples", "train/rlvr/batch": "batch"}


@hookimpl
def rlvr_schedule_metric_aliases() -> Mapping[str, str]:
    """OpenRLHF names the core table lacks."""
    return dict(OPENRLHF_ALIASES)
