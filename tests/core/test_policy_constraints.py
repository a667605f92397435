"""BatchConstraints: runnable batches and the errors that name the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy import BatchConstraints


def test_snap_rounds_to_whole_groups_and_host_divisor():
    c = BatchConstraints(group_size=8, divisor=6)  # lcm 24
    assert c.multiple == 24
    assert c.snap(100) == 96
    assert c.snap(110) == 120
    assert c.snap(108) == 96  # tie goes down
    assert c.snap(100, "up") == 120
    assert c.snap(119, "down") == 96


def test_snap_clamps_to_min_and_max():
    c = BatchConstraints(group_size=8, min_batch=20, max_batch=100)
    assert c.lowest == 24 and c.highest == 96
    assert c.snap(1) == 24
    assert c.snap(10_000) == 96
    assert c.is_valid(96) and not c.is_valid(100) and not c.is_valid(16)


@pytest.mark.parametrize("bad", [0, -3, float("nan"), float("inf")])
def test_snap_rejects_nonpositive_or_nonfinite(bad):
    with pytest.raises(ValueError):
        BatchConstraints().snap(bad)


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"group_size": 0}, "group_size"),
        ({"group_size": 2.5}, "group_size"),
        ({"min_batch": -1}, "min_batch"),
        ({"max_batch": 4, "min_batch": 8}, "max_batch"),
        ({"divisor": 0}, "divisor"),
        ({"group_size": 16, "max_batch": 10}, "max_batch"),  # no multiple of 16 fits
    ],
)
def test_invalid_fields_are_named(kw, field):
    with pytest.raises(ConfigError) as err:
        BatchConstraints(**kw)
    assert err.value.field == field
    assert repr(field) in str(err.value)


def test_from_dict_names_unknown_key_and_source():
    with pytest.raises(ConfigError) as err:
        BatchConstraints.from_dict({"group_sze": 8}, source="s.yaml")
    assert err.value.field == "constraints.group_sze"
    assert "s.yaml" in str(err.value)
    with pytest.raises(ConfigError) as err:
        BatchConstraints.from_dict({"group_size": -8}, source="s.yaml")
    assert err.value.field == "constraints.group_size"
    assert BatchConstraints.from_dict({"group_size": 4, "max_batch": 64}).to_dict() == {
        "group_size": 4,
        "min_batch": 1,
        "max_batch": 64,
        "divisor": None,
    }


@given(
    group=st.integers(1, 64),
    divisor=st.one_of(st.none(), st.integers(1, 48)),
    lo=st.integers(1, 500),
    span=st.one_of(st.none(), st.integers(0, 5000)),
    batch=st.floats(0.01, 1e6),
)
def test_snap_always_runnable(group, divisor, lo, span, batch):
    hi = None if span is None else lo + span
    try:
        c = BatchConstraints(group_size=group, min_batch=lo, max_batch=hi, divisor=divisor)
    except ConfigError:
        return  # no runnable batch in the range: refused up front
    for mode in ("nearest", "down", "up"):
        b = c.snap(batch, mode)
        assert c.is_valid(b)
        assert b % group == 0 and (divisor is None or b % divisor == 0)
        assert b >= lo and (hi is None or b <= hi)
