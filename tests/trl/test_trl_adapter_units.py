"""Fast checks of the adapter helpers and of the TRL module's lazy import (no trainer runs)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from types import SimpleNamespace

import pytest
import torch

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.policy import StaticSchedule, schedule_from_dict
from rlvr_schedule.records import Stage, StepRecord
from rlvr_schedule_adapters._common import (
    build_schedule,
    planned_batches,
    reachable_batches,
    scale_base_lr,
    schedule_spec,
)
from rlvr_schedule_adapters.trl.checkpoints import last_complete_checkpoint
from rlvr_schedule_adapters.trl.epochs import BatchUnit, epoch_fit


def test_planned_batches_follow_until_samples():
    stages = StaticSchedule(
        [Stage(8, 1e-3, until_samples=32), Stage(16, 5e-4, until_samples=64), Stage(32, 2e-4)]
    ).stages
    assert planned_batches(stages, 7) == [8, 8, 8, 8, 16, 16, 32]
    assert planned_batches(stages, 3, samples=40, start=1) == [16, 16, 32]


def test_batch_unit_accumulation_and_refusal():
    unit = BatchUnit(per_step=4, accumulation_multiple=2)
    assert unit.accumulation(16) == 4 and unit.batch(4) == 16 and unit.multiple == 8
    with pytest.raises(ValueError, match="multiple of 8.*divisor=8"):
        unit.accumulation(12)


def test_epoch_fit_replays_the_trainer_epoch_loop():
    # 8 micro-steps per epoch, epochs planned from GA 2 (4 updates each), then GA 4: data runs out
    fit = epoch_fit([2] * 4 + [4] * 4, micro_per_epoch=8, initial_accumulation=2, epochs=2)
    assert (fit.updates, fit.partial, fit.micro_needed, fit.fits) == (6, 0, 24, False)
    # an epoch length that GA 4 does not divide cuts an update short
    fit = epoch_fit([2, 4, 4], micro_per_epoch=8, initial_accumulation=2, epochs=1)
    assert (fit.updates, fit.partial) == (3, 1)
    assert epoch_fit([2] * 4 + [4] * 4, micro_per_epoch=64, initial_accumulation=2, epochs=1).fits


@pytest.mark.parametrize("kind", ["constant", "linear"])
def test_scale_base_lr_survives_the_next_scheduler_step(kind):
    from transformers import get_scheduler

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(
        [{"params": [model.weight], "lr": 1e-3}, {"params": [model.bias], "lr": 1e-3, "weight_decay": 0.0}],
        lr=1e-3,
    )
    sched = get_scheduler(kind, opt, num_warmup_steps=0, num_training_steps=10)
    for _ in range(2):
        opt.step()
        sched.step()
    mult = opt.param_groups[0]["lr"] / 1e-3
    scale_base_lr(opt, sched, 4e-4)
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([4e-4 * mult] * 2)
    assert sched.get_last_lr() == pytest.approx([4e-4 * mult] * 2)
    opt.step()
    sched.step()  # recomputes from base_lrs: the new base LR holds
    assert opt.param_groups[0]["lr"] == pytest.approx(4e-4 * sched.lr_lambdas[0](3))
    with pytest.raises(ValueError):
        scale_base_lr(opt, sched, float("nan"))


def test_scale_base_lr_unwraps_wrappers_and_refuses_without_changing_anything():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([{"params": [p], "lr": 1e-2}], lr=1e-2)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5)
    # accelerate's AcceleratedOptimizer / AcceleratedScheduler keep the torch objects here
    wrapped_opt, wrapped_sched = SimpleNamespace(optimizer=opt), SimpleNamespace(scheduler=sched)
    assert scale_base_lr(wrapped_opt, wrapped_sched, 4e-2) == pytest.approx([2e-2])
    assert sched.base_lrs == pytest.approx([4e-2]) and sched.get_last_lr() == pytest.approx([2e-2])
    assert opt.param_groups[0]["initial_lr"] == pytest.approx(4e-2)
    before = (list(sched.base_lrs), opt.param_groups[0]["lr"])
    for bad in (-1.0, float("inf"), "x", True):
        with pytest.raises(ValueError, match="finite non-negative"):
            scale_base_lr(opt, sched, bad)
    with pytest.raises(TypeError, match="no base_lrs"):  # e.g. Megatron's OptimizerParamScheduler
        scale_base_lr(opt, SimpleNamespace(step=lambda: None, optimizer=opt), 1e-3)
    sched.base_lrs = [4e-2, 4e-2]
    with pytest.raises(ValueError, match="2 base LRs for 1 param groups"):
        scale_base_lr(opt, sched, 1e-3)
    sched.base_lrs = before[0]
    assert (list(sched.base_lrs), opt.param_groups[0]["lr"]) == before


def test_schedule_spec_round_trips(tmp_path):
    spec = {"stages": [{"batch": 8, "lr": 1e-3, "until_samples": 32}, {"batch": 16, "lr": 5e-4}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(spec))
    for given in (spec, path, StaticSchedule(spec["stages"])):
        rebuilt = build_schedule(schedule_spec(given))
        assert [(s.batch, s.lr, s.until_samples) for s in rebuilt.stages] == [(8, 1e-3, 32), (16, 5e-4, None)]
    two = schedule_from_dict({"type": "two_clock", "initial_batch": 16, "base_lr": 1e-4})
    assert build_schedule(schedule_spec(two)).current.batch == 16
    with pytest.raises(TypeError, match="schedule must be"):
        build_schedule(42)


def test_module_imports_without_transformers_or_trl():
    code = (
        "import sys\n"
        "sys.modules['transformers'] = None; sys.modules['trl'] = None\n"
        "import rlvr_schedule_adapters.trl as m\n"
        "assert m.rlvr_schedule_metric_aliases()['reward'] == 'reward_mean'\n"
        "from rlvr_schedule.plugins import PluginHost\n"
        "h = PluginHost(); assert not h.faults, h.faults\n"
        "try:\n    m.RlvrScheduleCallback\nexcept ImportError:\n    print('lazy-ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "lazy-ok" in out.stdout


def test_state_is_json_and_rebuilds_a_new_instance():
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    spec = {"stages": [{"batch": 8, "lr": 1e-3, "until_samples": 32}, {"batch": 16, "lr": 5e-4}]}
    cb = RlvrScheduleCallback(spec)
    cb.driver.samples, cb.driver.in_effect = 40, (16, 5e-4)
    cb.schedule.load_state_dict({**cb.schedule.state_dict(), "index": 1, "last_batch": 16, "last_lr": 5e-4})
    state = json.loads(json.dumps(cb.state()))
    new = RlvrScheduleCallback.from_state(state)  # what transformers does on restore
    assert new is not cb and new.host is cb.host  # same process: the user's plugin host is kept
    assert RlvrScheduleCallback(spec).host is not cb.host  # fresh callbacks get their own host
    assert (new.samples, new.wanted, new.schedule.index) == (40, (16, 5e-4), 1)


def _falling_entropy(cb, steps):
    out = []
    for i in range(1, steps + 1):
        out.append(
            cb.feed(
                StepRecord(
                    step=i, samples=8 * i, batch=8, lr=1e-3, entropy=3.0 - 0.1 * i, reward_mean=0.1 * i
                )
            )
        )
    return out


def test_two_clock_switch_is_applied_through_the_driver():
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    spec = {
        "type": "two_clock",
        "initial_batch": 8,
        "base_lr": 1e-3,
        "lr_rule": "sqrt",
        "max_stages": 2,
        "hysteresis_samples": 1,
        "failure_threshold": 1.0,  # an absolute collapse level
        "forecast_samples": 16,  # v3's forecast evidence, in rollouts (default 2048): 2 records here
        "forecast": "on",  # the live forecast switches (advisory by default)
        "failure_exponent": 0.5,  # alpha > 0: a square-root switch (q = 1/2) postpones the failure too
        "failure_lr_exponent": 0.5,
        "constraints": {"group_size": 4, "divisor": 8},
    }
    cb = RlvrScheduleCallback(spec, strict=True)
    decisions = _falling_entropy(cb, 25)
    switched = [d for d in decisions if d.switched]
    assert len(switched) == 1 and switched[0].batch == 16
    # the driver called the callback's request (its apply) once per new stage; the callback took it
    assert cb.wanted == (16, pytest.approx(1e-3 * 2**0.5))
    assert [d.batch for d in cb.decisions].count(16) == len(cb.decisions) - cb.decisions.index(switched[0])


def test_unrunnable_two_clock_switch_is_held_by_the_scheduler():
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    # growth 1.5 proposes 12 rollouts: not a multiple of 4 per micro-step x steps_per_generation 2
    spec = {
        "type": "two_clock",
        "initial_batch": 8,
        "base_lr": 1e-3,
        "growth": 1.5,
        "max_stages": 2,
        "hysteresis_samples": 1,
        "failure_threshold": 1.0,  # an absolute collapse level
        "forecast_samples": 16,  # v3's forecast evidence, in rollouts (default 2048): 2 records here
        "forecast": "on",  # the live forecast switches (advisory by default)
        "failure_exponent": 0.5,  # alpha > 0: a square-root switch (q = 1/2) postpones the failure too
        "failure_lr_exponent": 0.5,
        "constraints": {"group_size": 4},
    }
    cb = RlvrScheduleCallback(spec)
    cb.run.unit = BatchUnit(per_step=4, accumulation_multiple=2)  # what on_train_begin binds
    decisions = _falling_entropy(cb, 25)
    assert not any(d.switched for d in decisions)
    # the initial stage (unknown to an unbound callback) was taken at the first record; 12 never was
    assert cb.schedule.current.batch == 8 and cb.wanted == (8, 1e-3)
    assert cb.host.faults and "multiple of 8" in str(cb.host.faults[0][2])
    assert any(d.reason.startswith("held: the host could not apply it (ValueError") for d in decisions)


def test_with_the_trainers_grid_published_the_two_clock_switch_lands_on_it():
    from rlvr_schedule.policy import BatchConstraints
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    # the same schedule, with the grid the trainer publishes at train begin (4 x 1 x 2): growth 1.5
    # from 8 snaps up to 16, which the trainer runs, instead of 12, which it cannot
    spec = {
        "type": "two_clock",
        "initial_batch": 8,
        "base_lr": 1e-3,
        "growth": 1.5,
        "max_stages": 2,
        "hysteresis_samples": 1,
        "failure_threshold": 1.0,
        "forecast_samples": 16,
        "forecast": "on",  # the live forecast moves the batch (the default only warns)
        "failure_exponent": 0.5,
        "failure_lr_exponent": 0.5,
        "constraints": {"group_size": 4},
    }
    cb = RlvrScheduleCallback(spec, strict=True)
    cb.run.unit = BatchUnit(per_step=4, accumulation_multiple=2)
    assert cb.driver.set_host_grid(BatchConstraints(divisor=cb.run.unit.multiple)) == []
    switched = [d for d in _falling_entropy(cb, 25) if d.switched]
    assert [d.batch for d in switched] == [16] and cb.wanted[0] == 16 and not cb.host.faults


def _two(**kw):
    spec = {
        "type": "two_clock",
        "initial_batch": 8,
        "base_lr": 1e-3,
        "growth": 2.0,
        "constraints": {"group_size": 4},
    }
    return schedule_from_dict({**spec, **kw})


def test_largest_reachable_batch_of_the_two_clock_policy():
    # v2 grows by `growth` only on a failure trigger with failure_exponent > 0 ...
    grow = {"max_stages": 4, "failure_exponent": 0.5}
    assert _two(**grow).largest_reachable_batch(noise_estimate=False) == 64  # 8 -> 16 -> 32 -> 64
    # policy v3: on a sample clock the default held-LR switch grows too; a square-root one holds
    assert _two(max_stages=4).largest_reachable_batch(noise_estimate=False) == 64
    assert _two(max_stages=4, failure_lr_exponent=0.5).largest_reachable_batch(noise_estimate=False) is None
    # ... and B* tracking moves to wherever the estimate goes: only max_batch bounds it
    assert _two(max_stages=4).largest_reachable_batch() == math.inf
    assert _two(max_stages=4, constraints={"group_size": 4, "max_batch": 40}).largest_reachable_batch() == 40
    # each stage runs min_stage_samples (160) rollouts first: 20 updates at 8, then 10 at 16, 5 at 32
    assert _two(**grow).largest_reachable_batch(21, noise_estimate=False) == 16
    assert _two(**grow).largest_reachable_batch(20, noise_estimate=False) is None
    assert _two(**grow).largest_reachable_batch(36, noise_estimate=False) == 64
    assert _two(**grow).largest_reachable_batch(35, noise_estimate=False) == 32
    # an old file's record-counted limit is refused, naming its rollout knob
    with pytest.raises(ConfigError, match="min_stage_samples"):
        _two(**grow, min_stage_steps=10)
    assert _two(max_stages=1, failure_exponent=0.5).largest_reachable_batch() is None
    assert reachable_batches(StaticSchedule([Stage(8, 1e-3)]), 5) is None


class _AlwaysAlarm:
    """A plugin failure detector alarming on every record: the policy switches as early as it may."""

    name = "always"

    def update(self, record):
        return SimpleNamespace(name=self.name, message="test")


class _AlarmPlugin:
    @hookimpl
    def rlvr_schedule_failure_detectors(self):
        return [_AlwaysAlarm()]


@pytest.mark.filterwarnings("ignore::FutureWarning")  # the old key of the last case (translated)
@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"min_stage_samples": 200, "hysteresis_samples": 96},
        {"min_samples_between": 200, "hysteresis_samples": 12},
    ],
)
def test_reachable_batches_are_what_the_policy_does_when_every_record_triggers(extra):
    host = PluginHost()
    host.register(_AlarmPlugin())
    spec = {
        "type": "two_clock",
        "initial_batch": 8,
        "base_lr": 1e-3,
        "max_stages": 4,
        "failure_exponent": 0.5,
        "growth": 2.0,
        "constraints": {"group_size": 4},
        **extra,
    }
    sched = schedule_from_dict(spec, plugins=host)
    ran, samples, bound = [], 0, None
    for i in range(1, 61):
        if i == 15:  # from mid-run state too (the counters come from state_dict)
            bound = reachable_batches(sched, 46, samples=samples, noise_estimate=False)
        ran.append(sched.current.batch)
        samples += ran[-1]
        sched.step(StepRecord(step=i, samples=samples, batch=ran[-1], lr=1e-3, entropy=1.0, reward_mean=0.1))
    assert len(set(ran)) == 4  # it did grow three times
    assert (
        reachable_batches(
            _two(**{k: v for k, v in spec.items() if k != "type"}), 60, samples=0, noise_estimate=False
        )
        == ran
    )
    assert bound == ran[14:]


def _check(spec, *, remaining, micro_per_epoch, noise_updates=0):
    """The callback's set-up check alone (what on_train_begin runs), on 4 rollouts per micro-step and
    steps_per_generation 2 (GA 2 for 8 rollouts); the 'may end early' warnings it gave."""
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback, ScheduleSetupWarning

    cb = RlvrScheduleCallback(spec)
    cb.run.unit = BatchUnit(per_step=4, accumulation_multiple=2)
    cb.schedule.noise.n_updates = noise_updates  # > 0: the logs carry micro-batch gradient norms
    cb.schedule.tracker.noise_samples = 8 * noise_updates  # ... of records at batch 8
    state = SimpleNamespace(max_steps=remaining, global_step=0, num_train_epochs=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cb._check_plan(state, micro_per_epoch, 2)
    got = [str(w.message) for w in caught if issubclass(w.category, ScheduleSetupWarning)]
    assert not [m for m in got if "may end early" not in m], got
    return got


def test_may_end_early_warning_fires_exactly_when_the_data_cannot_hold_the_reachable_plan():
    spec = {
        "type": "two_clock",
        "initial_batch": 8,
        "base_lr": 1e-3,
        "max_stages": 4,
        "failure_exponent": 0.5,
        "constraints": {"group_size": 4, "divisor": 8},
    }
    # 35 updates: at most 20 x 8, 10 x 16, 5 x 32 rollouts (160 a stage) = 40 + 40 + 40 = 120 micro-steps
    assert _check(spec, remaining=35, micro_per_epoch=120) == []
    assert _check(spec, remaining=35, micro_per_epoch=113) == []  # the 35th update starts (cut short)
    (msg,) = _check(spec, remaining=35, micro_per_epoch=112)
    assert "to 32 rollouts" in msg and "only 34 of 35" in msg and "480 completions" in msg
    # 20 updates cannot reach a switch (min_stage_samples 160 = 20 x 8): the plan at 8 is all there
    # is, so no warning however little room the data leaves (the old x growth^stages bound warned here)
    assert _check(spec, remaining=20, micro_per_epoch=40) == []
    # a sample clock (failure_exponent 0) under square-root switches (failure_lr_exponent 0.5) never
    # grows without a B* estimate, which TRL cannot feed
    sqrt_switch = {"failure_exponent": 0.0, "failure_lr_exponent": 0.5}
    assert _check({**spec, **sqrt_switch}, remaining=25, micro_per_epoch=50) == []
    # ... unless the logs carry one: then tracking may go anywhere below max_batch
    sqrt_switch["estimate_samples"] = 800
    (msg,) = _check({**spec, **sqrt_switch}, remaining=25, micro_per_epoch=50, noise_updates=95)
    assert "without bound" in msg
    capped = {**spec, **sqrt_switch, "constraints": {"group_size": 4, "divisor": 8, "max_batch": 64}}
    # estimate ready at record 5 (95 + 5 = the estimate's 100 records, 760 + 40 = estimate_samples
    # 800 rollouts), tracking from record 20 (min_stage_samples 160): 20 x 8 + 5 x 64
    assert _check(capped, remaining=25, micro_per_epoch=20 * 2 + 5 * 16, noise_updates=95) == []
    (msg,) = _check(capped, remaining=25, micro_per_epoch=20 * 2 + 4 * 16, noise_updates=95)
    assert "to 64 rollouts" in msg


def test_last_complete_checkpoint_skips_ones_cut_by_a_kill(tmp_path):
    run = tmp_path / "run"
    for n, state in [(2, "{}"), (4, None), (6, '{"global_step": 6'), (10, '{"global_step": 10}')]:
        (run / f"checkpoint-{n}").mkdir(parents=True)
        (run / f"checkpoint-{n}" / "model.safetensors").write_bytes(b"x")
        if state is not None:
            (run / f"checkpoint-{n}" / "trainer_state.json").write_text(state)
    (run / "checkpoint-12").write_text("a file, not a checkpoint")
    (run / "checkpoint-99-tmp").mkdir()

    assert last_complete_checkpoint(run).path == run / "checkpoint-10"  # by number, not by name
    (run / "checkpoint-10" / "trainer_state.json").unlink()
    choice = last_complete_checkpoint(run)
    assert choice.path == run / "checkpoint-2"
    assert [name for name, _ in choice.skipped] == ["checkpoint-10", "checkpoint-6", "checkpoint-4"]
    assert "no trainer_state.json" in dict(choice.skipped)["checkpoint-4"]
    assert "unreadable" in dict(choice.skipped)["checkpoint-6"]
    assert last_complete_checkpoint(tmp_path / "missing").path is None


def test_a_resume_at_another_world_size_republishes_the_grid_and_snaps_the_saved_stages():
    from rlvr_schedule_adapters._common import ScheduleSetupWarning
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    spec = {"type": "two_clock", "initial_batch": 96, "base_lr": 1e-3, "constraints": {"group_size": 8}}
    cb = RlvrScheduleCallback(spec, strict=True)
    # saved on 2 ranks x 24 per device x steps_per_generation 2 (multiples of 96) ...
    cb.run.applied, cb.run.pending, cb.driver.resume_target = (96, 1e-3), (192, 1.4e-3), (96, 1e-3)
    # ... resumed on 3 ranks x 12 (multiples of 72)
    args = SimpleNamespace(num_generations=8, per_device_train_batch_size=12, world_size=3)
    cb.run.unit = BatchUnit(per_step=36, accumulation_multiple=2)
    with pytest.warns(ScheduleSetupWarning) as rec:
        cb._publish_grid(args)
    text = " ".join(str(w.message) for w in rec)
    assert (
        cb.run.applied == (72, 1e-3)
        and cb.run.pending == (216, 1.4e-3)
        and cb.driver.resume_target == (72, 1e-3)
    )
    assert "the saved stage applied (96 rollouts) is off this trainer's grid (multiples of 72" in text
    assert cb.schedule.current.batch == 72 and "96 -> 72" in cb.schedule.current.reason


def test_trl_step_time_reaches_the_live_price():
    # TRL logs ``step_time`` per update: the callback's record carries it, and the two-clock policy
    # measures its price from it once two batches are seen (0.1 s/rollout + 6.4 s/update: price 64)
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    spec = {
        "type": "two_clock",
        "critical_batch": 600,
        "base_lr": 1e-6,
        "base_batch": 64,
        "detectors": [],
        "track_critical_batch": False,
    }
    cb = RlvrScheduleCallback(spec)
    assert cb.schedule.price.source == "default"
    for i, b in enumerate([64] * 5 + [128] * 5):
        cb.run.last_batch = b
        cb.driver.consume(b)
        logs = {"loss": 0.1, "reward": 0.5, "learning_rate": 1e-6, "step_time": 0.1 * b + 6.4}
        cb.feed(cb.record(logs, step=i + 1))
    assert cb.schedule.price.source == "measured"
    assert cb.schedule.price.value() == pytest.approx(64.0)
