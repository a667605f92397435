"""pytest helpers: check a batch schedule on a synthetic task before spending GPU hours.

A user test is a few lines::

    from rlvr_schedule.synthetic import SyntheticEnvironment
    from rlvr_schedule.synthetic.testing import assert_beats_constant, assert_switches_before_failure

    def test_my_schedule():
        # critical batch 32 at the start, rising 16x with progress; collapse after 20k rollouts
        env = SyntheticEnvironment(critical_batch=32, failure_samples=20_000, drift=15.0, seed=0)
        assert_switches_before_failure(make_schedule(), env)
        result = assert_beats_constant(make_schedule(), env, batches=[8, 16, 32, 64, 128], target=0.52)
        print(result)  # rollouts and updates to the target, per constant batch and for the schedule

``make_schedule()`` returns any :class:`~rlvr_schedule.records.BatchSchedule` whose LRs refer to the
task's ``base_batch`` (64) and ``lr0`` (1e-6) unless the environment is built with others. Each helper raises ``AssertionError`` with the numbers behind the verdict and otherwise returns a
small result object (the runs included) for further checks. Build a fresh schedule per helper:
schedules are stateful.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from rlvr_schedule.records import BatchSchedule, Run
from rlvr_schedule.synthetic.environment import SyntheticEnvironment

__all__ = [
    "ConstantComparison",
    "SwitchCheck",
    "assert_beats_constant",
    "assert_switches_before_failure",
    "samples_to_target",
]


@dataclass
class SwitchCheck:
    """Where the schedule first grew the batch, and where the task collapsed under it (None: it did not)."""

    switch_samples: int | None
    switch_step: int | None
    batches: list[int]
    failure_samples: float | None
    run: Run = field(repr=False)


@dataclass
class ConstantComparison:
    """Rollouts and updates to reach ``target`` for the schedule and each constant batch (None: never)."""

    target: float
    schedule_samples: int | None
    schedule_steps: int | None
    constants: dict[int, tuple[int | None, int | None]]
    baseline_batch: int | None  # fewest updates among constants within the rollout budget
    run: Run = field(repr=False)
    constant_runs: dict[int, Run] = field(repr=False, default_factory=dict)


def samples_to_target(run: Run, target: float, *, window: float = 0) -> tuple[int | None, int | None]:
    """(rollouts, updates) at the first record whose reward reaches ``target``.

    With ``window`` > 0 the reward is first averaged over the trailing ``window`` rollouts (records
    weighted by their batch), so small, noisy batches do not cross early on a lucky update.
    """
    reward = np.nan_to_num(run.array("reward_mean"), nan=-np.inf)
    if window > 0:
        w = run.array("batch")
        cum_s = np.concatenate([[0.0], np.cumsum(w)])
        cum_r = np.concatenate([[0.0], np.cumsum(w * reward)])
        ends = np.arange(1, len(reward) + 1)
        starts = np.searchsorted(cum_s, cum_s[1:] - window, side="right") - 1
        starts = np.clip(starts, 0, ends - 1)
        reward = (cum_r[ends] - cum_r[starts]) / (cum_s[ends] - cum_s[starts])
    hit = np.flatnonzero(reward >= target)
    if hit.size == 0:
        return None, None
    rec = run.records[int(hit[0])]
    return rec.samples, int(hit[0]) + 1


def assert_switches_before_failure(
    schedule: BatchSchedule, env: SyntheticEnvironment, max_samples: float | None = None
) -> SwitchCheck:
    """Drive ``schedule`` on ``env``; assert it grew the batch before the task collapsed.

    What the name says, and not vacuously: first a constant run at the schedule's first stage
    (its batch and LR) must collapse within ``max_samples`` (otherwise there is no failure to switch
    before, and the helper says so); then the schedule's run must make an upward switch (a larger
    batch; LR-only changes do not count) before its own collapse, if it collapses at all.
    ``max_samples`` defaults to 1.5 x the rollouts a constant first stage takes to collapse.
    """
    first_stage = schedule.current
    if max_samples is None:
        max_samples = 1.5 * env.model.failure_at(int(first_stage.batch), float(first_stage.lr))
    const = env.run_constant(int(first_stage.batch), max_samples, lr=float(first_stage.lr))
    const_collapse = env.collapsed_at
    if const_collapse is None:
        raise AssertionError(
            f"a constant batch {first_stage.batch} at LR {first_stage.lr:g} (the schedule's first stage) "
            f"does not collapse in {const.records[-1].samples} rollouts on this task: there is no failure "
            f"to switch before (use a task with fewer failure_samples or a larger max_samples)"
        )
    run = env.run(schedule, max_samples)
    batches = [r.batch for r in run.records]
    first = next((i for i in range(1, len(batches)) if batches[i] > batches[i - 1]), None)
    check = SwitchCheck(
        switch_samples=None if first is None else run.records[first - 1].samples,
        switch_step=None if first is None else run.records[first - 1].step,
        batches=sorted(set(batches), key=batches.index),
        failure_samples=env.collapsed_at,
        run=run,
    )
    if first is None:
        raise AssertionError(
            f"schedule never grew the batch (batches {check.batches}) in {run.records[-1].samples} rollouts; "
            f"it collapsed at {_fmt(env.collapsed_at)} rollouts, a constant batch {first_stage.batch} "
            f"at {const_collapse:.0f}"
        )
    if env.collapsed_at is not None and run.records[first - 1].samples >= env.collapsed_at:
        raise AssertionError(
            f"schedule grew the batch {batches[first - 1]} -> {batches[first]} after "
            f"{check.switch_samples} rollouts, but the task collapsed at {env.collapsed_at:.0f}"
        )
    return check


def assert_beats_constant(
    schedule: BatchSchedule,
    env: SyntheticEnvironment,
    batches: Sequence[int],
    target: float | None = None,
    *,
    max_samples: float | None = None,
    samples_ratio: float = 1.25,
    window: float | None = None,
) -> ConstantComparison:
    """Assert the schedule reaches ``target`` reward within ``samples_ratio`` x the rollouts of the most
    sample-efficient constant batch among ``batches``, and in fewer updates than the baseline: the
    constant batch with the fewest updates among those within that same rollout budget (so no
    constant batch matches the schedule on both clocks).

    ``target`` defaults to 60% of the climb from the task's initial reward to its ceiling; rewards are
    averaged over the trailing ``window`` rollouts before the crossing (default: 5% of the failure
    samples). ``max_samples`` defaults to 1.5 x the
    failure samples at the base batch.
    """
    m = env.model
    if target is None:
        target = m.reward0 + 0.6 * (m.reward_ceiling - m.reward0)
    if max_samples is None:
        max_samples = 1.5 * m.failure_samples
    if not batches:
        raise ValueError("batches must not be empty")
    if window is None:
        window = 0.05 * m.failure_samples
    constant_runs = {int(b): env.run_constant(int(b), max_samples) for b in batches}
    constants = {b: samples_to_target(r, target, window=window) for b, r in constant_runs.items()}
    run = env.run(schedule, max_samples)
    s_samples, s_steps = samples_to_target(run, target, window=window)
    reached = {b: (s, n) for b, (s, n) in constants.items() if s is not None and n is not None}
    baseline = None
    if reached:
        budget = samples_ratio * min(v[0] for v in reached.values())
        eligible = {b: v for b, v in reached.items() if v[0] <= budget}
        baseline = min(eligible, key=lambda b: (eligible[b][1], eligible[b][0]))
    out = ConstantComparison(target, s_samples, s_steps, constants, baseline, run, constant_runs)
    table = ", ".join(f"B={b}: {_fmt(v[0])} rollouts/{_fmt(v[1])} updates" for b, v in constants.items())
    if s_samples is None or s_steps is None:
        raise AssertionError(
            f"schedule never reached reward {target:.3f} in {run.records[-1].samples} rollouts "
            f"(best smoothed reward {_best(run, window):.3f}); constants: {table}"
        )
    if baseline is None:
        return out  # no constant batch reached the target at all: the schedule did
    _b_samples, b_steps = reached[baseline]
    best_batch = min(reached, key=lambda b: reached[b][0])
    if s_samples > budget:
        raise AssertionError(
            f"schedule needed {s_samples} rollouts to reach reward {target:.3f}, more than "
            f"{samples_ratio} x the {reached[best_batch][0]} of constant batch {best_batch}; constants: {table}"
        )
    if s_steps >= b_steps:
        raise AssertionError(
            f"schedule needed {s_steps} updates to reach reward {target:.3f}, not fewer than the "
            f"{b_steps} of constant batch {baseline}; constants: {table}"
        )
    return out


def _fmt(x: float | None) -> str:
    return "never" if x is None else f"{x:.0f}"


def _best(run: Run, window: float) -> float:
    r = run.array("reward_mean")
    b = run.array("batch")
    k = max(1, int(window / max(float(np.mean(b)), 1.0)))
    if k > 1 and len(r) >= k:
        r = np.convolve(r, np.ones(k) / k, mode="valid")
    return float(np.nanmax(r))
