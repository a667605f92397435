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


class TwoStage:
    """Train at ``small``; from ``at`` rollouts on, at ``big`` (sqrt-rule LR)."""

    def __init__(self, small: int, big: int, at: float):
        self.big, self.at = big, at
        self._stages = [Stage(small, lr_for_batch(small, 64, 1e-6))]

    @property
    def current(self):
        return self._stages[-1]

    @property
    def stages(self):
        return self._stages

    def step(self, record):
        switched = len(self._stages) == 1 and record.samples >= self.at
        if switched:
            self._stages.append(Stage(self.big, lr_for_batch(self.big, 64, 1e-6), "at", record.samples))
        s = self.current
        return Decision(record.step, record.samples, s.batch, s.lr, len(self._stages) - 1, switched)

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


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
    with pytest.raises(AssertionError, match="never changed batch .stayed at 32"):
        assert_switches_before_failure(TwoStage(32, 128, 1e9), env, max_samples=25_000)


def test_beats_constant_passes_and_reports(env):
    res = assert_beats_constant(TwoStage(16, 128, 4_000), env, batches=[16, 32, 64, 128])
    assert res.baseline_batch in (16, 32)
    base_samples, base_steps = res.constants[res.baseline_batch]
    assert res.schedule_samples <= 1.25 * base_samples and res.schedule_steps < base_steps
    assert set(res.constant_runs) == {16, 32, 64, 128}


def test_beats_constant_fails_when_too_greedy(env):
    # jumping to 1.5x the critical batch early wastes rollouts
    with pytest.raises(AssertionError, match=r"more than 1.25 x the \d+ of constant batch"):
        assert_beats_constant(TwoStage(16, 192, 1_000), env, batches=[16, 32, 64, 128])
    with pytest.raises(AssertionError, match="never reached reward"):
        assert_beats_constant(TwoStage(1024, 1024, 0), env, batches=[16, 32])


def test_samples_to_target_smooths_in_rollouts():
    run = make_run(16, noise=0, failure_samples=20_000)
    exact = samples_to_target(run, 0.4)
    smooth = samples_to_target(run, 0.4, window=1_000)
    assert exact[0] < smooth[0] <= exact[0] + 1_000  # a trailing mean lags by under one window
    assert samples_to_target(run, 0.99) == (None, None)
