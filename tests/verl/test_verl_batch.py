"""Rollouts per step written into a real verl config; start-up checks."""

from __future__ import annotations

import copy

import pytest

from rlvr_schedule.policy import BatchConstraints, PolicyConfig, StaticSchedule, TwoClockScheduler
from rlvr_schedule_adapters.verl.batch import (
    VerlSetupWarning,
    apply_rollout_batch,
    check_setup,
    pin_gen_batch_size,
    read_layout,
)


def _snapshot(cfg):
    return (
        cfg.data.train_batch_size,
        cfg.actor_rollout_ref.actor.ppo_mini_batch_size,
        cfg.data.get("gen_batch_size"),
    )


def test_layout_of_the_real_config(verl_config):
    lay = read_layout(verl_config)
    assert (lay.train_batch_size, lay.group_size, lay.ppo_mini_batch_size) == (8, 4, 8)
    assert lay.rollouts == 32 and lay.mini_batches == 1 and lay.world_size == 1
    assert lay.gen_batch_size is None


def test_apply_per_step_keeps_mini_batch_count(verl_config):
    verl_config.actor_rollout_ref.actor.ppo_mini_batch_size = 4  # 2 mini-batches per step
    lay = apply_rollout_batch(verl_config, 96)
    actor = verl_config.actor_rollout_ref.actor
    assert (verl_config.data.train_batch_size, actor.ppo_mini_batch_size) == (24, 12)
    assert lay.rollouts == 96 and lay.mini_batches == 2
    assert verl_config.actor_rollout_ref.rollout.n == 4  # the group size never changes


def test_apply_fixed_keeps_mini_batch_size(verl_config):
    apply_rollout_batch(verl_config, 64, mini_batch_mode="fixed")
    actor = verl_config.actor_rollout_ref.actor
    assert (verl_config.data.train_batch_size, actor.ppo_mini_batch_size) == (16, 8)


@pytest.mark.parametrize(
    "rollouts,mode,match",
    [
        (30, "per_step", "not a positive multiple of actor_rollout_ref.rollout.n=4"),
        (0, "per_step", "not a positive multiple"),
        (20, "fixed", "not a multiple of actor_rollout_ref.actor.ppo_mini_batch_size=8"),
        (32, "sideways", "mini_batch_mode must be one of"),
    ],
)
def test_apply_rejects_and_leaves_config_untouched(verl_config, rollouts, mode, match):
    from omegaconf import open_dict

    with open_dict(verl_config):
        verl_config.data.gen_batch_size = 1  # any prompt count is whole dataloader fetches
    before = _snapshot(verl_config)
    with pytest.raises(ValueError, match=match):
        apply_rollout_batch(verl_config, rollouts, mini_batch_mode=mode)
    assert _snapshot(verl_config) == before


def test_apply_rejects_sizes_the_dataloader_cannot_give(verl_config):
    from omegaconf import open_dict

    with open_dict(verl_config):
        verl_config.data.gen_batch_size = 8
    before = _snapshot(verl_config)
    with pytest.raises(ValueError, match="data.gen_batch_size=8"):
        apply_rollout_batch(verl_config, 48)  # 12 prompts: not whole dataloader fetches
    assert _snapshot(verl_config) == before
    with pytest.raises(ValueError, match="do not split into 3 PPO mini-batches"):
        apply_rollout_batch(verl_config, 64, mini_batches=3)


def test_pin_gen_batch_size_static(verl_config):
    s = StaticSchedule(
        [{"batch": 48, "lr": 1e-6, "until_samples": 100}, {"batch": 80, "lr": 1e-6, "until_samples": None}]
    )
    assert pin_gen_batch_size(verl_config, s) == 4  # gcd of 8 (launched), 12, 20 prompts
    assert verl_config.data.gen_batch_size == 4
    apply_rollout_batch(verl_config, 48)
    apply_rollout_batch(verl_config, 80)


def test_pin_gen_batch_size_online_uses_the_constraints(verl_config):
    cons = BatchConstraints(group_size=4, divisor=24)
    sched = TwoClockScheduler(PolicyConfig(initial_batch=48, constraints=cons))
    # any later batch is a multiple of lcm(4, 24) = 24 rollouts = 6 prompts; launched 8, first 12
    assert pin_gen_batch_size(verl_config, sched) == 2


def test_pin_keeps_the_users_value(verl_config):
    from omegaconf import open_dict

    with open_dict(verl_config):
        verl_config.data.gen_batch_size = 4
    s = StaticSchedule([{"batch": 64, "lr": 1e-6}])
    assert pin_gen_batch_size(verl_config, s) == 4


def test_check_setup_clean(verl_config):
    s = StaticSchedule([{"batch": 32, "lr": 1e-6, "until_samples": 64}, {"batch": 64, "lr": 1e-6}])
    pin_gen_batch_size(verl_config, s)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_setup(verl_config, s) == []


def test_check_setup_group_size_and_world(verl_config):
    s = StaticSchedule([{"batch": 40, "lr": 1e-6}], constraints=BatchConstraints(group_size=8))
    cfg = copy.deepcopy(verl_config)
    cfg.trainer.n_gpus_per_node = 16
    with pytest.warns(VerlSetupWarning) as rec:
        msgs = check_setup(cfg, s)
    assert any("constraints.group_size=8 differs from actor_rollout_ref.rollout.n=4" in m for m in msgs)
    assert any("does not split over 16 data-parallel ranks" in m for m in msgs)
    assert len(rec) == len(msgs)
    assert check_setup(cfg, s, warn=False) == msgs


def test_check_setup_mini_batch_not_dividing(verl_config):
    verl_config.actor_rollout_ref.actor.ppo_mini_batch_size = 3
    msgs = check_setup(verl_config, StaticSchedule([{"batch": 32, "lr": 1e-6}]), warn=False)
    assert any("ppo_mini_batch_size=3 does not divide data.train_batch_size=8" in m for m in msgs)


def test_check_setup_auto_batch_needs_what_verl_does_not_log(verl_config):
    auto = TwoClockScheduler(
        PolicyConfig(initial_batch="auto", fallback_batch=32, constraints=BatchConstraints(group_size=4))
    )
    msgs = check_setup(verl_config, auto, warn=False)
    assert any("grad_norm_micro" in m and "ppo_micro_batch_size_per_gpu=None" in m for m in msgs)
    # the adapter's actor measures it with several micro-batches in a step's one update
    verl_config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu = 4
    assert not any("grad_norm_micro" in m for m in check_setup(verl_config, auto, warn=False))
    verl_config.actor_rollout_ref.actor.ppo_epochs = 2
    msgs = check_setup(verl_config, auto, warn=False)
    assert any("grad_norm_micro" in m and "ppo_epochs=2" in m for m in msgs)
    given = TwoClockScheduler(
        PolicyConfig(initial_batch="auto", critical_batch=128, constraints=BatchConstraints(group_size=4))
    )
    assert not any("grad_norm_micro" in m for m in check_setup(verl_config, given, warn=False))


@pytest.mark.parametrize("mode", ["per_step", "fixed"])
def test_the_published_grid_is_what_apply_accepts(verl_config, mode):
    from omegaconf import open_dict

    from rlvr_schedule_adapters.verl.batch import host_grid

    with open_dict(verl_config):
        verl_config.trainer.n_gpus_per_node = 2  # two data-parallel ranks
        verl_config.data.gen_batch_size = 2
        verl_config.actor_rollout_ref.actor.ppo_mini_batch_size = 4  # 2 mini-batches of the 8 prompts
    grid = host_grid(verl_config, mini_batch_mode=mode)
    assert grid.group_size == 4
    # per_step: whole groups of 4 x lcm(gen 2, 2 mini-batches) prompts, each mini-batch over 2 ranks;
    # fixed: whole groups of 4 x lcm(gen 2, mini-batch 4 prompts)
    assert grid.multiple == {"per_step": 8, "fixed": 16}[mode]
    for rollouts in range(4, 200, 4):
        cfg = copy.deepcopy(verl_config)
        try:
            apply_rollout_batch(cfg, rollouts, mini_batch_mode=mode)
            ok = (cfg.data.train_batch_size * 4) % 2 == 0 and (
                cfg.actor_rollout_ref.actor.ppo_mini_batch_size * 4
            ) % 2 == 0
        except ValueError:
            ok = False
        assert ok == grid.is_valid(rollouts), rollouts


def test_an_auto_schedule_on_verls_grid_snaps_its_first_stage_with_a_warning(verl_config):
    from rlvr_schedule.driver import ScheduleDriver
    from rlvr_schedule_adapters.verl.batch import host_grid

    sched = TwoClockScheduler(
        PolicyConfig(
            initial_batch="auto",
            critical_batch=300,
            sample_tolerance=0.3,  # a fixed 0.46 B*
            base_lr=1e-6,
            constraints={"group_size": 4},
        )
    )
    assert (
        sched.current.batch == 140
    )  # 0.462 x 300 = 138.5, whole groups of 4: not whole fetches of 8 prompts
    d = ScheduleDriver(sched, lambda b, lr: True)
    notes = d.set_host_grid(host_grid(verl_config))
    assert sched.current.batch == 128 and any("140 -> 128" in n for n in notes)
    apply_rollout_batch(verl_config, sched.current.batch)  # runnable
