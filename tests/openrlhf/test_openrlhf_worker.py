"""The policy-worker method on a real DeepSpeed CPU engine built as OpenRLHF builds it (ZeRO-2,
bf16, AdamW param groups, LambdaLR cosine with warm-up)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rlvr_schedule_adapters.openrlhf import WORKER_METHOD


@pytest.fixture
def worker(openrlhf_args):
    """An RlvrPolicyModelActor (the plain class behind the Ray actor) holding a tiny engine."""
    from openrlhf_tiny_engine import build_policy

    from rlvr_schedule_adapters.openrlhf.actors import RlvrPolicyModelActor

    strategy, engine, optim, sched = build_policy(openrlhf_args, lr=1e-3, scheduler_steps=20)
    w = object.__new__(RlvrPolicyModelActor)
    w.strategy, w.actor, w.actor_optim, w.actor_scheduler = (
        strategy,
        SimpleNamespace(model=engine),
        optim,
        sched,
    )
    return w


def _updates(engine, micro_steps):
    from openrlhf_tiny_engine import micro_step

    return [micro_step(engine) for _ in range(micro_steps)]


def test_samples_per_update_changes_accumulation(worker):
    engine = worker.actor.model
    assert engine.gradient_accumulation_steps() == 4 == worker.strategy.accumulated_gradient  # 8 / micro 2
    assert _updates(engine, 4) == [False, False, False, True]
    out = getattr(worker, WORKER_METHOD)(train_batch=16)
    assert out["ok"] and out["accumulated_gradient"] == 8
    assert worker.strategy.accumulated_gradient == 8 and worker.strategy.train_batch_size == 16
    assert worker.strategy.args.train.batch_size == 16
    assert _updates(engine, 8) == [False] * 7 + [True]
    assert engine.global_steps == 2


def test_lr_moves_base_groups_and_last_lr_together(worker):
    engine, sched, optim = worker.actor.model, worker.actor_scheduler, worker.actor_optim
    _updates(engine, 4 * 3)  # past the 2-step warm-up, into the cosine decay
    mult = sched.lr_lambdas[0](sched.last_epoch)
    assert 0 < mult < 1
    assert len(optim.param_groups) == 2  # decay / no-decay groups, as OpenRLHF makes them
    out = getattr(worker, WORKER_METHOD)(lr=4e-3)
    assert out["ok"]
    assert sched.base_lrs == [pytest.approx(4e-3)] * 2
    assert [g["lr"] for g in optim.param_groups] == [pytest.approx(4e-3 * mult)] * 2
    assert sched.get_last_lr() == [pytest.approx(4e-3 * mult)] * 2
    assert worker.strategy.args.actor.adam.lr == 4e-3
    _updates(engine, 4)  # the next optimizer step keeps the new base LR under the multiplier
    mult2 = sched.lr_lambdas[0](sched.last_epoch)
    assert sched.get_last_lr()[0] == pytest.approx(4e-3 * mult2)
    assert optim.param_groups[0]["lr"] == pytest.approx(4e-3 * mult2)


def test_a_batch_the_ranks_cannot_split_is_refused_and_nothing_changes(worker):
    out = getattr(worker, WORKER_METHOD)(train_batch=7, lr=5e-3)
    assert not out["ok"] and "micro_batch_size 2" in out["error"]
    assert worker.actor.model.gradient_accumulation_steps() == 4
    assert worker.actor_scheduler.base_lrs == [pytest.approx(1e-3)] * 2


def test_a_worker_without_a_model_answers_instead_of_raising():
    from rlvr_schedule_adapters.openrlhf.actors import RlvrPolicyModelActor

    out = getattr(object.__new__(RlvrPolicyModelActor), WORKER_METHOD)(train_batch=8, lr=1e-3)
    assert out["ok"] is False and "AttributeError" in out["error"]
