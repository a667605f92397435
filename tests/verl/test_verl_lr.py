"""The LR worker method on a real torch optimizer and verl's own LambdaLR (built, stepped and
read by verl's FSDP engine methods on a CPU module); the applied LR is measured from the
parameter update, not read back from the scheduler."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from rlvr_schedule_adapters._common import scale_base_lr


def make_engine(
    config, *, scheduler: str = "cosine", warmup: int = 2, total: int = 20, lr: float = 1e-2, groups: int = 1
):
    """An object with what verl's FSDPEngine keeps (optimizer, lr_scheduler, optimizer_config),
    the scheduler built by ``FSDPEngine._build_lr_scheduler`` from the real optim config."""
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    optim = copy.deepcopy(config.actor_rollout_ref.actor.optim)
    optim.lr, optim.lr_scheduler_type = lr, scheduler
    optim.lr_warmup_steps, optim.total_training_steps = warmup, total
    optim.clip_grad = 1e9  # measure the raw SGD update
    module = torch.nn.Linear(1, groups, bias=False)
    with torch.no_grad():
        module.weight.zero_()
    if groups == 1:
        params = [{"params": [module.weight]}]
    else:  # a second group at half the LR, as with a separate LR for some parameters
        module = torch.nn.ModuleList([torch.nn.Linear(1, 1, bias=False) for _ in range(groups)])
        params = [{"params": list(m.parameters()), "lr": lr / (2**i)} for i, m in enumerate(module)]
    opt = torch.optim.SGD(params, lr=lr)
    eng = SimpleNamespace(
        module=module,
        optimizer=opt,
        optimizer_config=omega_conf_to_dataclass(optim),
        rank=0,
        _qat_enabled=False,
    )
    eng.lr_scheduler = FSDPEngine._build_lr_scheduler(eng, opt)
    return eng


def train_step(eng) -> list[float]:
    """One verl update: gradient 1 on every weight, optimizer_step + lr_scheduler_step (the
    engine's own methods); returns the LR each group APPLIED, measured as the weight change."""
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    params = [g["params"][0] for g in eng.optimizer.param_groups]
    before = [p.detach().clone() for p in params]
    for p in params:
        p.grad = torch.ones_like(p)
    FSDPEngine.optimizer_step(eng)
    FSDPEngine.lr_scheduler_step(eng)
    return [float((b - p.detach()).flatten()[0]) for b, p in zip(before, params, strict=True)]


def test_rescale_takes_effect_on_the_next_update_and_keeps_the_schedule(verl_config):
    eng = make_engine(verl_config, lr=1e-2)
    ref = make_engine(verl_config, lr=3e-2)  # the same schedule launched at the new peak LR
    for _ in range(5):
        train_step(eng)
        train_step(ref)
    applied = scale_base_lr(eng.optimizer, eng.lr_scheduler, 3e-2)
    assert applied[0] == pytest.approx(ref.optimizer.param_groups[0]["lr"])
    assert eng.lr_scheduler.get_last_lr()[0] == pytest.approx(applied[0])  # what verl logs as actor/lr
    for _ in range(6):  # the measured updates now follow the new peak x the cosine factor
        assert train_step(eng)[0] == pytest.approx(train_step(ref)[0], rel=1e-5)


def test_rescale_during_warmup(verl_config):
    eng = make_engine(verl_config, scheduler="constant", warmup=4, lr=1e-2)
    ref = make_engine(verl_config, scheduler="constant", warmup=4, lr=5e-3)
    train_step(eng), train_step(ref)
    scale_base_lr(eng.optimizer, eng.lr_scheduler, 5e-3)
    got = [train_step(eng)[0] for _ in range(5)]
    want = [train_step(ref)[0] for _ in range(5)]
    assert got == pytest.approx(want, rel=1e-5)
    assert got[-1] == pytest.approx(5e-3, rel=1e-5)  # warm-up over: the full new peak


def test_groups_keep_their_ratio(verl_config):
    eng = make_engine(verl_config, scheduler="constant", warmup=0, lr=1e-2, groups=2)
    scale_base_lr(eng.optimizer, eng.lr_scheduler, 4e-2)
    a, b = train_step(eng)
    assert a == pytest.approx(4e-2, rel=1e-5) and b == pytest.approx(2e-2, rel=1e-5)


def test_param_groups_alone_would_be_undone(verl_config):
    # why base_lrs must change too: the scheduler recomputes the LR from base_lrs each step
    eng = make_engine(verl_config, scheduler="constant", warmup=0, lr=1e-2)
    eng.optimizer.param_groups[0]["lr"] = 4e-2
    train_step(eng)
    assert train_step(eng)[0] == pytest.approx(1e-2, rel=1e-5)


def test_resume_restores_the_new_lr(verl_config):
    eng = make_engine(verl_config, lr=1e-2)
    train_step(eng)
    scale_base_lr(eng.optimizer, eng.lr_scheduler, 2e-2)
    opt_state, sched_state = eng.optimizer.state_dict(), eng.lr_scheduler.state_dict()
    new = make_engine(verl_config, lr=1e-2)  # relaunched with the old LR in the config
    new.optimizer.load_state_dict(opt_state)
    new.lr_scheduler.load_state_dict(sched_state)
    assert train_step(new)[0] == pytest.approx(train_step(eng)[0], rel=1e-6)
    assert new.lr_scheduler.base_lrs == pytest.approx([2e-2])


def test_without_scheduler_and_bad_input():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.1)
    assert scale_base_lr(opt, None, 0.3) == pytest.approx([0.3])
    with pytest.raises(ValueError, match="non-negative"):
        scale_base_lr(opt, None, float("nan"))
    with pytest.raises(TypeError, match="no base_lrs"):
        scale_base_lr(opt, SimpleNamespace(), 0.1)  # e.g. Megatron's OptimizerParamScheduler
    assert opt.param_groups[0]["lr"] == pytest.approx(0.3)  # a refused call changes nothing


def test_mixin_method_on_a_worker_like_object(verl_config):
    """The registered worker method itself (what each Ray rank runs), called on an object shaped
    like ActorRolloutRefWorker: ``self.actor.engine``."""
    from verl.single_controller.base.decorator import MAGIC_ATTR, Dispatch

    from rlvr_schedule_adapters.verl.trainer import LRControlMixin, ScheduleActorRolloutRefWorker

    attrs = getattr(ScheduleActorRolloutRefWorker.rlvr_set_lr, MAGIC_ATTR)
    assert attrs["dispatch_mode"] == Dispatch.ONE_TO_ALL
    eng = make_engine(verl_config, scheduler="constant", warmup=0, lr=1e-2)
    worker = SimpleNamespace(actor=SimpleNamespace(engine=eng))
    assert LRControlMixin.rlvr_set_lr(worker, 5e-2) == pytest.approx([5e-2])
    assert train_step(eng)[0] == pytest.approx(5e-2, rel=1e-5)
    assert LRControlMixin.rlvr_set_lr(SimpleNamespace(actor=None), 1e-3) is None  # e.g. a ref-only worker


@pytest.mark.slow
def test_one_to_all_over_ray_reaches_every_rank(ray_cluster):
    """The mixin's method through Ray the way the trainer builds its workers (a colocated
    WorkerDict on a 2-rank CPU resource pool, spawned by role prefix): every rank's optimizer
    and scheduler get the new LR."""
    import os

    import ray
    from verl.single_controller.base import Worker
    from verl.single_controller.base.decorator import Dispatch, register
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup
    from verl.single_controller.ray.base import create_colocated_worker_cls

    from rlvr_schedule_adapters.verl.trainer import LRControlMixin

    class ToyActorWorker(LRControlMixin, Worker):  # defined here: Ray pickles it by value
        def __init__(self, lr: float, warmup: int) -> None:
            super().__init__()
            p = torch.nn.Parameter(torch.zeros(1))
            opt = torch.optim.SGD([p], lr=lr)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
            self.actor = SimpleNamespace(engine=SimpleNamespace(optimizer=opt, lr_scheduler=sched))

        @register(dispatch_mode=Dispatch.ONE_TO_ALL)
        def train_and_read(self):
            e = self.actor.engine
            p = e.optimizer.param_groups[0]["params"][0]
            before = float(p)
            p.grad = torch.ones_like(p)
            e.optimizer.step()
            e.lr_scheduler.step()
            return before - float(p), list(e.lr_scheduler.base_lrs), os.environ["RANK"]

    wg = None
    try:
        pool = RayResourcePool([2], use_gpu=False, max_colocate_count=1)
        fused = create_colocated_worker_cls(
            {"actor_rollout": RayClassWithInitArgs(cls=ray.remote(ToyActorWorker), lr=0.1, warmup=2)}
        )
        wg = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=fused, device_name="cpu")
        wg = wg.spawn(prefix_set={"actor_rollout"})["actor_rollout"]
        assert wg.world_size == 2
        wg.train_and_read()  # warm-up step 1 of 2: LR 0.05
        applied = wg.rlvr_set_lr(lr=0.4)
        assert applied == [pytest.approx([0.4]), pytest.approx([0.4])]  # warm-up done: the full peak
        out = wg.train_and_read()
        assert sorted(r for _, _, r in out) == ["0", "1"]
        for step_size, bases, _ in out:
            assert step_size == pytest.approx(0.4) and bases == pytest.approx([0.4])
    finally:
        for w in getattr(wg, "workers", []) if wg is not None else []:
            ray.kill(w)
        for pg in getattr(pool, "pgs", None) or []:
            ray.util.remove_placement_group(pg)
