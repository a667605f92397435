"""The micro-batch gradient norm on OpenRLHF's real policy step: ``ActorPPOTrainer.training_step``
(OpenRLHF 0.11.2: its ``Actor`` around a tiny Llama, its ``PolicyLoss``, its per-update loss
normalisation ``iter_grad_accum_global_norm``) on a real DeepSpeed CPU engine, ZeRO 0 and 2.

``ppo_train`` itself asks for ``torch.cuda.current_device()``; the tests drive ``training_step`` in
the order it does (one window of GA micro-batches per update, the window's normalisers for each).
The recorded norm is checked against a brute-force gradient of the micro-batch's own token-mean
loss on a plain copy of the model, and the records are fed to the core's online estimator.
"""

from __future__ import annotations

import math

import pytest

pytest.importorskip("deepspeed")
torch = pytest.importorskip("torch")

GA = 4  # train batch 8 / micro-batch 2 (conftest's BASE_ARGV)
MICRO = 2
UPDATES = 200  # records fed to the online estimate
POOL = 512  # samples of the brute-force B_simple


def _llama(seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=32,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        attn_implementation="eager",
    )
    return LlamaForCausalLM(cfg), cfg


def _trainer(args, *, stage: int, param_dtype: str, lr: float):
    """OpenRLHF's ActorPPOTrainer (plain instance: its __init__ syncs CUDA) on a DeepSpeed engine."""
    from openrlhf.models import Actor
    from openrlhf.models.loss import PolicyLoss
    from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer
    from openrlhf_tiny_engine import build_policy

    model, cfg = _llama()
    strategy, engine, optim, sched = build_policy(
        args, lr=lr, model=model, stage=stage, param_dtype=param_dtype, scheduler_steps=1000
    )
    actor = Actor(engine)
    actor.packing_samples = False
    t = object.__new__(ActorPPOTrainer)
    t.strategy, t.args, t.actor, t.ema_model = strategy, strategy.args, actor, None
    t.actor_optim, t.actor_scheduler, t.aux_loss = optim, sched, False
    t.actor_loss_fn = PolicyLoss(token_level_loss=True)
    return t, cfg


def _experience(gen, *, rows: int = MICRO, prompt: int = 3, answer: int = 6, ragged: bool = True):
    from openrlhf.trainer.ppo_utils.experience import Experience

    seq = torch.randint(0, 32, (rows, prompt + answer), generator=gen)
    # answers lean to token 5 (a direction the mean gradient shares across samples)
    lean = torch.rand(rows, answer, generator=gen) < 0.5
    seq[:, prompt:][lean] = 5
    action_mask = torch.ones(rows, answer, dtype=torch.bool)
    if ragged:  # responses of different lengths: the loss weights micro-batches by their tokens
        for r in range(rows):
            action_mask[r, int(torch.randint(2, answer + 1, (1,), generator=gen)) :] = False
    adv = (1.0 + 0.5 * torch.randn(rows, 1, generator=gen)).expand(rows, answer).clone()
    return Experience(
        sequences=seq,
        attention_mask=torch.ones_like(seq),
        action_mask=action_mask,
        action_log_probs=torch.full((rows, answer), -math.log(32)),
        base_action_log_probs=torch.zeros(rows, answer),
        advantages=adv,
        info={},
    )


def _policy_grad(module, cfg, experiences) -> list:
    """Brute force: the gradient of the token mean of OpenRLHF's PPO loss over ``experiences``,
    on a plain copy of ``module`` (no DeepSpeed, no hooks)."""
    from openrlhf.models import Actor
    from openrlhf.models.loss import PolicyLoss
    from transformers import LlamaForCausalLM

    plain = LlamaForCausalLM(cfg)
    plain.load_state_dict({k: v.float() for k, v in module.state_dict().items()})
    actor = Actor(plain)
    actor.packing_samples = False
    loss_fn = PolicyLoss(token_level_loss=True)
    tokens = sum(float(e.action_mask.sum()) for e in experiences)
    for e in experiences:
        logp = actor(e.sequences, e.action_mask, attention_mask=e.attention_mask)
        loss, *_ = loss_fn(
            logp, e.action_log_probs, e.advantages, action_mask=e.action_mask, dp_size=1,
            batch_num_tokens=tokens, global_batch_size=None,
        )  # fmt: skip
        loss.backward()
    return [p.grad.detach().clone() for p in plain.parameters()]


def _norm(grads) -> float:
    return float(torch.sqrt(sum(g.float().pow(2).sum() for g in grads)))


def _run(t, cfg, gen, updates: int, *, brute: bool = True, ragged: bool = True):
    """``updates`` optimizer updates as ppo_train runs them; per update (recorded micro norm,
    brute-force micro norm, logged grad norm, brute-force full norm)."""
    from openrlhf.utils.loss_utils import iter_grad_accum_global_norm

    from rlvr_schedule_adapters.openrlhf.noise import MicroNormProbe

    probe = MicroNormProbe(t)
    exps = [_experience(gen, ragged=ragged) for _ in range(GA * updates)]
    out = []
    pairs = iter_grad_accum_global_norm(iter(exps), t.strategy, GA, lambda e: e.action_mask)
    for step, (exp, info) in enumerate(pairs):
        if step % GA == 0 and brute:
            module = t.actor.model.module
            window = exps[step : step + GA]
            want_micro = _norm(_policy_grad(module, cfg, window[:1]))
            want_full = _norm(_policy_grad(module, cfg, window))
        status = t.training_step(exp, 0.0, step, info)
        if step % GA == GA - 1:
            got = probe.metrics()
            grad_norm = float(status["metrics"]["actor_grad_norm"])
            out.append((got, want_micro if brute else None, grad_norm, want_full if brute else None))
    probe.remove()
    return out


@pytest.mark.parametrize(
    ("stage", "dtype", "rel"), [(0, "fp32", 1e-5), (0, "bf16", 0.03), (2, "fp32", 1e-5), (2, "bf16", 0.03)]
)
def test_recorded_micro_norm_is_the_micro_batch_gradient(openrlhf_args, stage, dtype, rel):
    from rlvr_schedule_adapters.openrlhf.metrics import translate_metrics

    t, cfg = _trainer(openrlhf_args, stage=stage, param_dtype=dtype, lr=1e-2)
    gen = torch.Generator().manual_seed(1)
    rows = _run(t, cfg, gen, updates=3)
    for got, want_micro, grad_norm, want_full in rows:
        assert got["micro_batch"] == MICRO
        assert got["grad_norm_micro"] == pytest.approx(want_micro, rel=rel)
        # the big half of the pair: DeepSpeed's logged norm is the whole update's token mean
        if (stage, dtype) == (0, "fp32"):  # DeepSpeed computes no norm there; OpenRLHF logs 0.0
            assert grad_norm == 0.0
            assert "actor_grad_norm" not in translate_metrics({"actor_grad_norm": grad_norm})
            continue
        assert grad_norm == pytest.approx(want_full, rel=rel)
        assert got["grad_norm_micro"] > grad_norm  # a micro-batch is noisier than its update


def test_a_ga_of_one_measures_nothing(openrlhf_args):
    from rlvr_schedule_adapters.openrlhf.noise import MicroNormProbe

    t, _ = _trainer(openrlhf_args, stage=2, param_dtype="fp32", lr=1e-2)
    t.strategy.accumulated_gradient = 1
    t.actor.model.set_train_batch_size(MICRO)
    probe = MicroNormProbe(t)
    gen = torch.Generator().manual_seed(2)
    info = {"dp_size": 1, "batch_num_tokens": None, "global_batch_size": None}
    t.training_step(_experience(gen), 0.0, 0, info)
    assert probe.metrics() == {}


def test_the_online_estimate_forms_from_the_records(openrlhf_args):
    """Records built from the worker's status through the adapter's metric translation feed the
    core's two-batch estimator; with the parameters held (lr 0) its B_simple is compared with the
    brute-force tr(Sigma)/|G|^2 over the same pool of samples."""
    from rlvr_schedule.clocks.online import GradientNoiseScale
    from rlvr_schedule.ingest import canonicalize
    from rlvr_schedule_adapters.openrlhf.metrics import translate_metrics

    t, cfg = _trainer(openrlhf_args, stage=2, param_dtype="fp32", lr=0.0)
    gen = torch.Generator().manual_seed(3)
    est = GradientNoiseScale(beta=0.99)
    for got, _, grad_norm, _ in _run(t, cfg, gen, updates=UPDATES, brute=False, ragged=False):
        logs = translate_metrics({"actor_grad_norm": grad_norm, "actor_lr": 0.0, **got})
        rec = canonicalize(logs, step=1, samples=8, batch=GA * MICRO)
        assert rec.grad_norm_micro == got["grad_norm_micro"] and rec.micro_batch == MICRO
        est.update(rec)
    assert est.n_updates == UPDATES and math.isfinite(est.b_simple) and est.b_simple > 0
    # brute force: per-sample gradients of a fresh pool from the same distribution
    module = t.actor.model.module
    grads = []
    for _ in range(POOL):
        g = _policy_grad(module, cfg, [_experience(gen, rows=1, ragged=False)])
        grads.append(torch.cat([x.flatten() for x in g]))
    per = torch.stack(grads)
    mean = per.mean(0)
    trace = float((per - mean).pow(2).sum(1).mean()) * POOL / (POOL - 1)
    g2 = float(mean.pow(2).sum()) - trace / POOL  # unbiased |G|^2
    brute = trace / g2
    print(f"openrlhf B_simple online {est.b_simple:.3f} brute force {brute:.3f}")
    assert est.b_simple == pytest.approx(brute, rel=0.3)


def test_a_two_clock_schedule_behind_the_adapter_forms_its_noise_estimate(openrlhf_args):
    """The worker's status, as OpenRLHF's trainer passes it to ``save_logs_and_checkpoints``,
    through the adapter's controller: the schedule's own gradient-noise estimate takes every update."""
    import copy

    from rlvr_schedule.policy import schedule_from_dict
    from rlvr_schedule_adapters.openrlhf.controller import ScheduleController

    t, cfg = _trainer(openrlhf_args, stage=2, param_dtype="bf16", lr=1e-2)
    spec = {"type": "two_clock", "initial_batch": 8, "critical_batch": 64, "constraints": {"group_size": 4}}
    schedule = schedule_from_dict(spec)
    ctl = ScheduleController(schedule, copy.deepcopy(openrlhf_args), lambda b, lr: None, advisory=True)
    gen = torch.Generator().manual_seed(4)
    for step, (got, _, grad_norm, _) in enumerate(_run(t, cfg, gen, updates=6, brute=False), 1):
        logs = {"rollout/num_samples": 8.0, "actor_grad_norm": grad_norm, "actor_lr": 1e-2, **got}
        ctl.on_step(step, logs)
    assert schedule.noise.n_updates == 6 and math.isfinite(schedule.noise.trace_sigma)
    assert not ctl.driver.faults


def _two_rank_worker(rank: int, path: str, out: str, argv: list[str]) -> None:
    """One of two DeepSpeed data-parallel ranks (gloo, ZeRO-2): its own micro-batches through
    OpenRLHF's training_step; writes the probe's metrics and its first micro-batch's brute force."""
    import json
    import os

    import torch.distributed as dist
    from openrlhf.utils.loss_utils import iter_grad_accum_global_norm

    from rlvr_schedule_adapters.openrlhf import openrlhf_cli_args
    from rlvr_schedule_adapters.openrlhf.noise import MicroNormProbe

    os.environ.update(RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), DS_ACCELERATOR="cpu")
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2)
    args = openrlhf_cli_args(argv)  # 8 per update over 2 ranks x micro-batch 2: GA 2
    t, cfg = _trainer(args, stage=2, param_dtype="fp32", lr=1e-2)
    assert t.strategy.accumulated_gradient == 2
    gen = torch.Generator().manual_seed(200 + rank)
    probe = MicroNormProbe(t)
    exps = [_experience(gen) for _ in range(2)]
    want = _norm(_policy_grad(t.actor.model.module, cfg, exps[:1]))
    for step, (exp, info) in enumerate(
        iter_grad_accum_global_norm(iter(exps), t.strategy, 2, lambda e: e.action_mask)
    ):
        t.training_step(exp, 0.0, step, info)
    with open(f"{out}.{rank}", "w") as fh:
        json.dump({"got": probe.metrics(), "want": want}, fh)
    dist.destroy_process_group()


def test_two_data_parallel_ranks_record_the_mean_squared_norm(tmp_path, base_argv):
    """Two gloo ranks under DeepSpeed ZeRO-2 (OpenRLHF's loss then carries dp_size 2 and the tokens
    of both ranks): each rank's norm is scaled back to its own micro-batch's token mean and the
    squared norms are averaged over the ranks, so both report sqrt(mean of the two)."""
    import json

    import torch.multiprocessing as mp

    path, out = str(tmp_path / "rendezvous"), str(tmp_path / "norms")
    mp.spawn(_two_rank_worker, args=(path, out, base_argv), nprocs=2, join=True)
    rows = [json.loads((tmp_path / f"norms.{r}").read_text()) for r in range(2)]
    want = math.sqrt(sum(r["want"] ** 2 for r in rows) / 2)
    print(f"openrlhf 2 ranks: recorded {rows[0]['got']} {rows[1]['got']}, brute force rms {want:.6f}")
    for r in rows:
        assert r["got"]["micro_batch"] == MICRO
        assert r["got"]["grad_norm_micro"] == pytest.approx(want, rel=1e-5)
    assert rows[0]["want"] != pytest.approx(rows[1]["want"], rel=1e-3)  # the ranks saw different data
