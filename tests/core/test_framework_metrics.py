"""The one table of framework metric names: every name resolves to its field through the ingest
aliases, and the synthetic writers and adapters use it."""

from __future__ import annotations

from rlvr_schedule.ingest.aliases import ALIASES, CANONICAL_FIELDS, FRAMEWORK_METRICS
from rlvr_schedule.synthetic.generator import FRAMEWORK_KEYS


def test_every_framework_name_resolves_to_its_field():
    assert set(FRAMEWORK_METRICS) == {"trl", "verl", "openrlhf"}
    for framework, table in FRAMEWORK_METRICS.items():
        for field, key in table.items():
            assert field in CANONICAL_FIELDS, (framework, field)
            assert ALIASES[key] == field, (framework, key)


def test_the_synthetic_writers_use_the_table():
    assert (
        FRAMEWORK_KEYS["trl"] is FRAMEWORK_METRICS["trl"]
        and FRAMEWORK_KEYS["verl"] is FRAMEWORK_METRICS["verl"]
    )


def test_the_adapters_entry_points_use_the_table():
    from rlvr_schedule_adapters.trl.plugin import TRL_METRIC_ALIASES
    from rlvr_schedule_adapters.verl.plugin import VERL_ALIASES

    assert all(TRL_METRIC_ALIASES[k] == f for f, k in FRAMEWORK_METRICS["trl"].items())
    assert all(VERL_ALIASES[k] == f for f, k in FRAMEWORK_METRICS["verl"].items())
