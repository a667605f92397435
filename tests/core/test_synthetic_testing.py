"""The pytest helpers pass good schedules and fail bad ones with the numbers in the message."""

import pytest

from rlvr_schedule.records import Decision, Stage
from rlvr_schedule.synthetic import SyntheticEnvironment, make_run
from rlvr_schedule.synthetic.testing import (
    assert_beats_constant,
    assert_switches_before_failure,
    samples_to_target,
)
from rlvr_schedule.theory import lr_for_batch


class Staged:
    """Follows a plan [(start_samples, batch), ...] with sqrt-rule LRs."""

    def __init__(self, plan):
        self.plan = plan
        self._stages = [Stage(plan[0][1], lr_for_batch(plan[0][1], 64, 1e-6))]

    @property
    def current(self):
        return self._stages[-1]

    @property
    def stages(self):
        return self._stages

    def step(self, record):
        i = len(self._stages)
        switched = i < len(self.plan) and record.samples >= self.plan[i][0]
        if switched:
            b = self.plan[i][1]
            self._stages.append(Stage(b, lr_for_batch(b, 64, 1e-6), "plan", record.samples))
        s = self.current
        return Decision(record.step, record.samples, s.batch, s.lr, len(self._stages) - 1, switched)

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def TwoStage(small, big, at):
    return Staged([(0, small), (at, big)])


@pytest.fixture
def env():
    # the critical batch rises 4x over the climb: a later, larger batch loses little per rollout
    return SyntheticEnvironment(critical_batch=128, failure_samples=20_000, drift=6.0, seed=0)


def test_switch_before_failure_passes(env):
    check = assert_switches_before_failure(TwoStage(32, 128, 4_000), env, max_samples=25_000)
    assert check.switch_samples == 4_000 and check.batches == [32, 128]
    assert check.failure_samples == pytest.approx(20_000, abs=128)


def test_switch_after_failure_fails_with_numbers(env):
    with pytest.raises(AssertionError, match=r"32 -> 128 after 2\d{4} rollouts.*collapsed at 2\d{4}"):
        assert_switches_before_failure(TwoStage(32, 128, 21_000), env, max_samples=25_000)
    with pytest.raises(AssertionError, match=r"never grew the batch \(batches \[32\]\).*collapsed at 2\d{4}"):
        assert_switches_before_failure(TwoStage(32, 128, 1e9), env, max_samples=25_000)


def test_a_downward_switch_is_not_a_switch_before_failure(env):
    with pytest.raises(AssertionError, match=r"never grew the batch \(batches \[128, 32\]\)"):
        assert_switches_before_failure(TwoStage(128, 32, 4_000), env, max_samples=25_000)


def test_no_collapse_at_the_first_stage_is_said_not_passed(env):
    # within 15k rollouts no constant batch collapses (failure after 20k): nothing to switch before
    with pytest.raises(AssertionError, match=r"constant batch 32 .* does not collapse in 15\d{3} rollouts"):
        assert_switches_before_failure(TwoStage(32, 128, 4_000), env, max_samples=15_000)


@pytest.fixture
def ramp_env():
    # critical batch 32 at the start, 16x that at the ceiling (Merrill et al.'s rising critical batch)
    return SyntheticEnvironment(critical_batch=32, failure_samples=20_000, drift=15.0, noise=0.5, seed=0)


def test_beats_constant_passes_and_reports(ramp_env):
    ramp = Staged([(0, 16), (2_000, 32), (4_000, 64), (6_000, 128)])
    res = assert_beats_constant(ramp, ramp_env, batches=[8, 16, 32, 64, 128], target=0.52)
    best = min(v[0] for v in res.constants.values() if v[0] is not None)
    base_samples, base_steps = res.constants[res.baseline_batch]
    assert res.schedule_samples <= 1.25 * best and base_samples <= 1.25 * best
    assert res.schedule_steps < base_steps
    assert res.constants[64] == (None, None)  # 2 B* = 64 at the start: no progress at all
    assert set(res.constant_runs) == {8, 16, 32, 64, 128}


def test_beats_constant_fails_with_numbers(ramp_env):
    batches = [8, 16, 32, 64, 128]
    # ramping to 4x the initial critical batch too early wastes rollouts
    with pytest.raises(AssertionError, match=r"more than 1.25 x the \d+ of constant batch 8"):
        assert_beats_constant(Staged([(0, 16), (1_500, 64), (3_000, 128)]), ramp_env, batches, target=0.52)
    # staying small is sample-efficient but takes as many updates as a constant batch
    with pytest.raises(AssertionError, match=r"updates to reach reward 0.520, not fewer than the \d+"):
        assert_beats_constant(TwoStage(8, 16, 2_000), ramp_env, batches, target=0.52)
    with pytest.raises(AssertionError, match="never reached reward"):
        assert_beats_constant(TwoStage(1024, 1024, 0), ramp_env, batches)


def test_samples_to_target_smooths_in_rollouts():
    run = make_run(16, noise=0, failure_samples=20_000)
    exact = samples_to_target(run, 0.4)
    smooth = samples_to_target(run, 0.4, window=1_000)
    assert exact[0] < smooth[0] <= exact[0] + 1_000  # a trailing mean lags by under one window
    assert samples_to_target(run, 0.99) == (None, None)


def test_the_module_docstring_example():
    def make_schedule():
        return Staged([(0, 16), (2_000, 32), (4_000, 64), (6_000, 128)])

    env = SyntheticEnvironment(critical_batch=32, failure_samples=20_000, drift=15.0, seed=0)
    check = assert_switches_before_failure(make_schedule(), env)
    assert check.switch_samples == 2_000 and check.batches == [16, 32, 64, 128]
    result = assert_beats_constant(make_schedule(), env, batches=[8, 16, 32, 64, 128], target=0.52)
    assert "schedule_samples" in repr(result) and "run=" not in repr(result)
