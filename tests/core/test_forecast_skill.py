"""The forecast's skill metrics on hand-made cases, and the recorded runs of the skill table
(tests/data/forecast) loading and replaying."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rlvr_schedule.clocks.failure.forecast import AnyForecast, FailureForecast, policy_forecast
from rlvr_schedule.clocks.failure.skill import LabelledRun, Replay, first_warning, replay, score, wilson
from rlvr_schedule.records import Run, StepRecord

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "forecast"


def test_wilson_matches_the_textbook_values() -> None:
    lo, hi = wilson(7, 10)  # 0.7 of 10: Wilson 95% is [0.397, 0.892]
    assert lo == pytest.approx(0.3968, abs=1e-3) and hi == pytest.approx(0.8922, abs=1e-3)
    lo, hi = wilson(0, 20)  # none of 20: the upper end is z^2 / (n + z^2) = 0.161
    assert lo == 0.0 and hi == pytest.approx(0.1611, abs=1e-3)
    assert wilson(5, 5)[1] == 1.0 and wilson(5, 5)[0] == pytest.approx(0.5655, abs=1e-3)
    assert all(math.isnan(x) for x in wilson(0, 0))
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_recall_at_lead_false_switches_and_lead_distribution_on_a_hand_made_table() -> None:
    reps = [
        Replay("a", 1000.0, "reward_crash", 500.0),  # lead 0.5: timely
        Replay("b", 1000.0, "reward_crash", 950.0),  # lead 0.05: late
        Replay("c", 1000.0, "reward_crash", None),  # missed
        Replay("d", 2000.0, "entropy_collapse", 1800.0),  # lead exactly 0.1: timely
        Replay("e", 1000.0, "reward_crash", 1200.0),  # warned after the failure: missed
        Replay("h1", None, None, 300.0),  # false switch
        Replay("h2", None, None, None),
        Replay("h3", None, None, None),
        Replay("h4", None, None, None),
    ]
    s = score(reps)
    assert (s.failed, s.timely, s.late, s.healthy, s.false_switches) == (5, 2, 1, 4, 1)
    assert s.recall == 0.4 and s.false_rate == 0.25
    assert sorted(s.lead_fractions) == pytest.approx([0.05, 0.1, 0.5])
    assert s.recall_interval == wilson(2, 5) and s.false_interval == wilson(1, 4)
    crash = score(reps, kind="reward_crash")
    assert (crash.failed, crash.timely, crash.healthy) == (4, 1, 4)
    assert score(reps, lead_fraction=0.6).timely == 0
    assert not s.meets() and score(reps[:1] + reps[6:]).meets()


def _falling(n: int, batch: int = 16, crash_at: int | None = None) -> list[StepRecord]:
    out = []
    for i in range(1, n + 1):
        h = max(0.02, 1.0 - i / 300) if crash_at is not None else 1.0 + 0.01 * ((-1) ** i)
        out.append(StepRecord(step=i, samples=i * batch, batch=batch, lr=1e-6, entropy=h, reward_mean=0.5))
    return out


def test_first_warning_follows_the_forecast_and_holds_for_the_hysteresis() -> None:
    recs = _falling(400, crash_at=300)  # entropy 1 -> 0.1 of the early level at record 270
    w = first_warning(lambda: policy_forecast("entropy", min_samples=512), recs, hold_samples=48)
    assert w is not None and 0.6 * 270 * 16 < w < 0.9 * 270 * 16
    w1 = first_warning(lambda: policy_forecast("entropy", min_samples=512), recs, hold_samples=0)
    assert w1 is not None and w - w1 == 32  # held over 3 records of 16: two records later
    flat = _falling(400)
    assert first_warning(lambda: policy_forecast("entropy", min_samples=512), flat) is None
    # replay stops at the failure point: a forecast that would warn only later counts as a miss
    r = replay(
        lambda: policy_forecast("entropy", min_samples=512),
        [LabelledRun("x", Run(recs, name="x"), float(w - 16), "entropy_collapse")],
    )
    assert r[0].warning is None


def test_warns_is_the_policy_rule_and_switch_fraction_round_trips() -> None:
    fc = policy_forecast("entropy", min_samples=512, switch_fraction=0.5)
    for rec in _falling(200, crash_at=300):
        fc.update(rec)
    assert fc.warns() == (fc.ready and fc.stage_fraction_left < 0.5)
    st = fc.state_dict()
    assert st["switch_fraction"] == 0.5
    fc2 = FailureForecast("entropy")
    fc2.load_state_dict(st)
    assert fc2.switch_fraction == 0.5 and fc2.warns() == fc.warns()
    del st["switch_fraction"]  # a state saved before the key: the policy's 0.25
    fc2.load_state_dict(st)
    assert fc2.switch_fraction == 0.25
    with pytest.raises(ValueError, match="switch_fraction"):
        FailureForecast("entropy", switch_fraction=0.0)


def test_the_committed_split_was_fixed_with_its_rules() -> None:
    split = json.loads((DATA / "SPLIT.json").read_text())
    assert split["lead_fraction"] == 0.1
    s = split["synthetic"]
    cal, test = set(range(*s["calibration_seeds"])), set(range(*s["test_seeds"]))
    assert cal and test and not cal & test


def test_the_recorded_runs_load_and_replay() -> None:
    from benchmarks.evidence import forecast_skill as bench

    runs = list(bench.real_runs())
    real = json.loads((ROOT / "tests/data/real/runs/SPLIT.json").read_text())
    assert len(runs) == len(real["calibration"]) + len(real["test"])
    assert sum(r.failed for r in runs) == sum(v["label"] == "collapsed" for v in real["labels"].values())
    trainer = list(bench.trainer_runs())
    assert trainer, "tests/data/forecast/trainer_runs.json.gz holds the reference-trainer runs"
    assert {r.part for r in trainer} == {"calibration", "test"}
    for r in trainer:  # trimmed, yet every record keeps what the labels and the replay read
        assert r.run.records[-1].samples >= 14_336 and all(r.run.array("entropy") > 0)
    reps = replay(bench.VARIANTS["entropy"], trainer[:4] + runs[:4])
    assert len(reps) == 8 and all(r.warning is None or r.warning > 0 for r in reps)


def test_any_forecast_warns_when_a_member_does_and_reads_extra_signals() -> None:
    recs = []
    for i in range(1, 301):  # entropy flat; the share of responses cut at the cap climbs to 0.9
        cut = min(0.9, i / 300)
        recs.append(
            StepRecord(
                step=i,
                samples=16 * i,
                batch=16,
                lr=1e-6,
                entropy=1.0 + 0.01 * (-1) ** i,
                extra={"truncated_frac": cut},
            )
        )
    ent = lambda: policy_forecast("entropy", min_samples=512)  # noqa: E731
    both = lambda: AnyForecast(  # noqa: E731
        [ent(), policy_forecast("response_clip_ratio", threshold=0.5, min_samples=512)]
    )
    assert first_warning(ent, recs) is None
    w = first_warning(both, recs)
    assert w is not None and w < 150 * 16  # before the cut share reaches 0.5 (record 150)
    fc = both()
    for r in recs:
        fc.update(r)
    assert fc.warns() and fc.reason == "response_clip_ratio"
    fc2 = both()
    fc2.load_state_dict(fc.state_dict())
    assert fc2.warns() and fc2.samples_to_failure == fc.samples_to_failure
    with pytest.raises(ValueError, match="member"):
        AnyForecast([ent()]).load_state_dict(fc.state_dict())
