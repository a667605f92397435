"""The schedules make the same decisions as when recorded, on recorded runs.

``tests/data/regression/*.json.gz`` hold the records and decisions of the synthetic section 3a
closed-loop runs (``docs/RESULTS.md``): the two-clock policy v3 on four tasks x two seeds (recorded
when policy v2 was removed, whose recordings it could no longer replay), and the noise-scale
and linear-ramp baselines on drift3 (recorded before the driver refactor); origin in
``tests/data/regression/README.md``. Replaying the records must give the same decisions, field
for field, directly and through a :class:`~rlvr_schedule.driver.ScheduleDriver` (every recorded
field; ``trigger``, the kind of the trigger a decision answers, came after the recordings).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.policy.baselines import LinearRampSchedule, NoiseScaleAdaptiveSchedule
from rlvr_schedule.records import StepRecord

DATA = Path(__file__).resolve().parents[1] / "data" / "regression"
FILES = sorted(DATA.glob("*.json.gz"))
LO, HI, FAIL = 32, 512, 50_000


def _load(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _recorded(d: dict) -> dict:
    """A decision's fields as recorded (all but ``trigger``, added since)."""
    assert set(d) - {"trigger"} == {"step", "samples", "batch", "lr", "stage", "switched", "reason"}
    return {k: v for k, v in d.items() if k != "trigger"}


def _schedule(doc: dict):
    kind = doc.get("schedule", "two_clock")
    cons = BatchConstraints(group_size=8, max_batch=HI)
    if kind == "two_clock":
        return TwoClockScheduler(PolicyConfig.from_dict(doc["config"]))
    if kind == "noise_scale":
        return NoiseScaleAdaptiveSchedule(
            LO, base_lr=1e-6, t0=0.046, t1=0.00139, max_batch=HI, constraints=cons
        )
    return LinearRampSchedule(LO, LO, FAIL // 2, HI, base_lr=1e-6, base_batch=64, constraints=cons)


def test_the_recorded_runs_are_there():
    assert len(FILES) == 10
    switches = [sum(d["switched"] for d in _load(p)["decisions"]) for p in FILES]
    assert all(n >= 2 for n in switches)  # every run switches: the comparison is not vacuous


@pytest.mark.parametrize("path", FILES, ids=[p.name.split(".")[0] for p in FILES])
def test_same_decisions_as_before(path: Path):
    doc = _load(path)
    sched = _schedule(doc)
    records = [StepRecord.from_dict(r) for r in doc["records"]]
    got = [_recorded(sched.step(r).to_dict()) for r in records]
    assert len(got) == len(doc["decisions"])
    for i, (g, want) in enumerate(zip(got, doc["decisions"], strict=True)):
        assert g == want, f"record {i}: {g} != {want}"


THROUGH_DRIVER = FILES[:4] + [p for p in FILES if "static" in p.name]


@pytest.mark.parametrize("path", THROUGH_DRIVER, ids=[p.name.split(".")[0] for p in THROUGH_DRIVER])
def test_same_decisions_through_the_driver(path: Path):
    from rlvr_schedule.driver import ScheduleDriver

    doc = _load(path)
    sched = _schedule(doc)
    applied = []
    driver = ScheduleDriver(
        sched,
        lambda b, lr: applied.append((b, lr)) or True,
        in_effect=(sched.current.batch, sched.current.lr),
    )
    got = [_recorded(driver.observe(StepRecord.from_dict(r)).to_dict()) for r in doc["records"]]
    assert got == doc["decisions"]
    assert applied == [(d["batch"], d["lr"]) for d in doc["decisions"] if d["switched"]]
