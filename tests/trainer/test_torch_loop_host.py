"""A fourth host, as the proof that adding a framework is one ``apply`` and a record: a plain torch
training loop (noisy linear regression, SGD, gradient accumulation) scheduled by the ScheduleDriver.

The host below is the whole adapter: it builds records (with the micro-batch gradient norm, so the
online gradient-noise estimate forms) and puts a decided (batch, LR) in effect. Everything else
(observers, schedule, commit or hold, faults, state) is the driver's.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, StaticSchedule, TwoClockScheduler
from rlvr_schedule.records import StepRecord

DIM, NOISE, MICRO = 16, 2.0, 8


class TorchLoopHost:
    """Least squares on y = w* . x + noise, ``batch`` samples per update in micro-batches of MICRO."""

    def __init__(self, schedule, plugins=None, *, advisory=False, seed=0, noise=NOISE):
        torch.manual_seed(seed)
        self.noise = noise
        self.w_star = torch.randn(DIM)
        self.model = torch.nn.Linear(DIM, 1, bias=False)
        self.batch, lr = int(schedule.current.batch), float(schedule.current.lr)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.step, self.gen = 0, torch.Generator().manual_seed(seed)
        self.driver = ScheduleDriver(
            schedule, self.apply, plugins, in_effect=(self.batch, lr), advisory=advisory
        )

    def apply(self, batch: int, lr: float) -> bool:
        if batch % MICRO:
            return False  # not whole micro-batches: refused, the schedule holds its stage
        self.batch = batch
        for g in self.opt.param_groups:
            g["lr"] = lr
        return True

    def _grad_norm(self) -> float:
        return float(torch.sqrt(sum((p.grad**2).sum() for p in self.model.parameters())))

    def update(self) -> StepRecord:
        k = self.batch // MICRO
        x = torch.randn(self.batch, DIM, generator=self.gen)
        y = x @ self.w_star + self.noise * torch.randn(self.batch, generator=self.gen)
        self.opt.zero_grad()
        micro_norm = math.nan
        for i in range(k):
            xb, yb = x[i * MICRO : (i + 1) * MICRO], y[i * MICRO : (i + 1) * MICRO]
            loss = ((self.model(xb).squeeze(-1) - yb) ** 2).mean() / k
            loss.backward()
            if i == 0 and k > 1:
                micro_norm = self._grad_norm() * k  # undo the 1/k loss scaling
        big_norm = self._grad_norm()
        self.opt.step()
        self.step += 1
        return StepRecord(
            step=self.step,
            samples=self.driver.samples + self.batch,
            batch=self.batch,
            lr=self.opt.param_groups[0]["lr"],
            reward_mean=-float(loss.detach()) * k,
            entropy=1.0,
            grad_norm=big_norm,
            grad_norm_micro=micro_norm,
            micro_batch=MICRO,
        )

    def run(self, updates: int) -> list:
        return [self.driver.observe(self.update()) for _ in range(updates)]


def test_a_static_schedule_switches_batch_and_lr_in_the_loop():
    sched = StaticSchedule([{"batch": 16, "lr": 1e-2, "until_samples": 64}, {"batch": 32, "lr": 2e-2}])
    host = TorchLoopHost(sched)
    decisions = host.run(6)
    assert [d.switched for d in decisions] == [False, False, False, True, False, False]
    assert host.batch == 32 and host.opt.param_groups[0]["lr"] == 2e-2
    assert host.driver.samples == 4 * 16 + 2 * 32


def test_a_batch_the_loop_cannot_run_is_held_and_observers_see_it():
    seen = []

    class Sink:
        @hookimpl
        def rlvr_schedule_on_decision(self, decision, record):
            seen.append(decision.reason)

    plugins = PluginHost(load_entrypoints=False)
    plugins.register(Sink())
    sched = StaticSchedule([{"batch": 16, "lr": 1e-2, "until_samples": 32}, {"batch": 20, "lr": 1e-2}])
    host = TorchLoopHost(sched, plugins)
    host.run(4)
    assert host.batch == 16 and sched.index == 0 and seen[-1] == "held: the host refused it"


def test_the_online_noise_estimate_forms_and_matches_brute_force():
    cfg = PolicyConfig(
        initial_batch=64,
        base_lr=1e-3,
        estimate_samples=1280,  # 20 updates at batch 64 (and the estimate's own 100 records)
        detectors=(),
        constraints=BatchConstraints(divisor=MICRO, max_batch=1024),
    )
    host = TorchLoopHost(TwoClockScheduler(cfg), seed=1)
    host.run(150)
    est = host.driver.schedule.noise.b_simple
    # brute force at the final parameters: per-sample gradients of the squared error on many samples
    w = host.model.weight.detach().squeeze(0)
    x = torch.randn(200_000, DIM, generator=host.gen)
    r = x @ (w - host.w_star) - NOISE * torch.randn(200_000, generator=host.gen)
    g = 2 * r[:, None] * x  # per-sample gradients
    brute = float(g.var(0).sum() / (g.mean(0) ** 2).sum())
    assert host.driver.schedule.noise.n_updates == 150 and math.isfinite(est)
    print(f"B_simple online {est:.4g}, brute force {brute:.4g}")
    assert est == pytest.approx(brute, rel=0.3), (est, brute)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_default_policys_auto_switch_on_a_gradient_noise_the_test_sets(seed):
    """The auto start from the noise estimate, by construction: with noiseless targets the
    per-sample gradient is 2 (x . d) x, x ~ N(0, I), d the model's error, so B_simple = tr(Sigma)
    / |G|^2 = DIM + 1 = 17 whatever the model has learned. From the fallback batch 64, the switch
    at record 100 (the estimate's EMA horizon) goes to 0.46 x ~17, snapped to the nearest
    runnable batch no lower than 2 micro-batches: 16 for any estimate up to ~40."""
    cfg = PolicyConfig(  # every policy knob at its default but the LR, the fallback and the grid
        base_lr=1e-2,
        base_batch=64,
        fallback_batch=64,
        constraints=BatchConstraints(divisor=MICRO, max_batch=1024),
    )
    host = TorchLoopHost(TwoClockScheduler(cfg), seed=seed, noise=0.0)
    decisions = host.run(104)
    switched = [(i + 1, d) for i, d in enumerate(decisions) if d.switched]
    assert [d.batch for d in decisions[:99]] == [64] * 99
    assert [step for step, _ in switched] == [100] and switched[0][1].trigger == "auto"
    assert switched[0][1].batch == 16 and host.batch == 16
    assert (DIM + 1) / 2 < host.driver.schedule.noise.b_simple < 2 * (DIM + 1)


def test_state_round_trip_and_advisory():
    def sched():
        return StaticSchedule([{"batch": 16, "lr": 1e-2, "until_samples": 48}, {"batch": 32, "lr": 2e-2}])

    first = TorchLoopHost(sched())
    first.run(4)
    state = json.loads(json.dumps(first.driver.state_dict()))
    again = TorchLoopHost(sched())
    again.driver.load_state_dict(state)
    assert again.driver.start() and again.batch == 32 and again.driver.samples == first.driver.samples
    advisory = TorchLoopHost(sched(), advisory=True)
    assert any(d.switched for d in advisory.run(5)) and advisory.batch == 16
