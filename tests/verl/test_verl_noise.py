"""The micro-batch gradient norm on verl's real actor update path, on CPU.

verl 0.9.1's FSDP engine is registered for CUDA/NPU only and its ``initialize`` wraps the model in
FSDP; the test builds an ``FSDPEngineWithLMHead`` instance around a plain tiny Llama instead (the
one test-side change: verl's ``get_device_id`` answers ``"cpu"``). Everything else is verl's own code:
``TrainingWorker.train_mini_batch`` -> ``train_batch`` -> ``BaseEngine.train_batch`` ->
``FSDPEngine.forward_backward_batch`` (its micro-batch loop) -> ``FSDPEngineWithLMHead.forward_step``
-> ``ppo_loss`` / ``agg_loss`` with the global-batch normalisation, on data converted by verl's
``left_right_2_no_padding``; once more with the model under FSDP2 (``fully_shard`` on a one-rank
CPU mesh, verl's no-sync context and its FSDP2 clipping) and over two gloo data-parallel ranks. What
stays untested without GPUs: FSDP1, CUDA autocast, Ulysses sequence parallelism, and FSDP sharding
over several ranks.
"""

from __future__ import annotations

import functools
import math
import os
import tempfile
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("verl")

BS, PROMPT, RESPONSE, MICRO = 8, 3, 6, 2


@pytest.fixture(scope="module")
def one_rank():
    import torch.distributed as dist

    if not dist.is_initialized():
        fd, path = tempfile.mkstemp(prefix="rlvr-verl-dist-")
        os.close(fd)
        os.unlink(path)
        dist.init_process_group("gloo", init_method=f"file://{path}", rank=0, world_size=1)
    yield


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
    return LlamaForCausalLM(cfg)


def _engine(module, monkeypatch, *, lr: float = 1e-2):
    """verl's FSDP LM engine around ``module`` on CPU (verl asks CUDA for its device id)."""
    from verl.utils import fsdp_utils
    from verl.workers.engine.fsdp import transformer_impl as ti

    monkeypatch.setattr(ti, "get_device_id", lambda: "cpu")
    monkeypatch.setattr(fsdp_utils, "get_device_id", lambda: "cpu")  # FSDP2's grad clipping
    return _cpu_engine(module, lr=lr)


def _cpu_engine(module, *, lr: float = 1e-2):
    """The engine instance (its ``initialize`` would wrap the module in FSDP on a CUDA mesh)."""
    from verl.workers.engine.fsdp import transformer_impl as ti

    e = object.__new__(ti.FSDPEngineWithLMHead)
    e.module, e.ulysses_device_mesh, e.ulysses_sequence_parallel_size = module, None, 1
    e.ulysses_parallel_group = None
    e.engine_config = SimpleNamespace(
        use_no_sync_for_gradient_accumulation=True, fsdp_size=1, forward_only=False
    )
    e.pad_to_length, e._autocast_dtype, e.scaler, e._qat_enabled = False, torch.float32, None, False
    e.optimizer = torch.optim.AdamW(module.parameters(), lr=lr)
    e.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(e.optimizer, lambda _: 1.0)
    e.optimizer_config = SimpleNamespace(clip_grad=1.0)
    e._is_offload_param = e._is_offload_optimizer = False
    return e


def _raw(gen, *, rows: int = BS, ragged: bool = True) -> dict:
    """A padded rollout batch: prompts, responses leaning to token 5, ragged response masks."""
    prompts = torch.randint(0, 32, (rows, PROMPT), generator=gen)
    responses = torch.randint(0, 32, (rows, RESPONSE), generator=gen)
    responses[torch.rand(rows, RESPONSE, generator=gen) < 0.5] = 5  # a shared direction
    mask = torch.ones(rows, RESPONSE, dtype=torch.long)
    for r in range(
        rows if ragged else 0
    ):  # ragged responses: token-mean weights micro-batches by their tokens
        mask[r, int(torch.randint(2, RESPONSE + 1, (1,), generator=gen)) :] = 0
    attn = torch.cat([torch.ones(rows, PROMPT, dtype=torch.long), mask], 1)
    adv = (1.0 + 0.5 * torch.randn(rows, 1, generator=gen)).expand(rows, RESPONSE).clone()
    return {
        "prompts": prompts,
        "responses": responses,
        "response_mask": mask,
        "input_ids": torch.cat([prompts, responses], 1),
        "attention_mask": attn,
        "position_ids": (attn.cumsum(-1) - 1).clamp(min=0),
        "old_log_probs": torch.full((rows, RESPONSE), -math.log(32)),
        "advantages": adv,
        "temperature": torch.ones(rows),
    }


def _data(raw: dict, rows: slice = slice(None)):
    """``raw[rows]`` as verl's trainer hands it to the actor (a no-padding TensorDict)."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    part = {k: v[rows] for k, v in raw.items()}
    n = len(part["prompts"])
    td = left_right_2_no_padding(TensorDict(part, batch_size=[n]))
    tu.assign_non_tensor(td, calculate_entropy=False, global_batch_size=n)
    return td


def _loss_fn(mode: str = "token-mean"):
    from verl.workers.config import ActorConfig
    from verl.workers.utils.losses import ppo_loss

    cfg = ActorConfig(
        strategy="fsdp",
        ppo_mini_batch_size=BS,
        ppo_micro_batch_size_per_gpu=MICRO,
        use_dynamic_bsz=False,
        loss_agg_mode=mode,
        rollout_n=1,
    )
    return functools.partial(ppo_loss, config=cfg)


class _NoProfiler:
    """verl's DistProfiler, switched off (what a run without ``profiler`` config gets)."""

    rank = 0

    def step(self) -> None:
        pass

    def check_enable(self) -> bool:
        return False


def _worker(engine, loss_fn):
    """The adapter's actor TrainingWorker (plain instance: its __init__ builds the engine from a
    config and joins Ray's process group)."""
    from rlvr_schedule_adapters.verl.trainer import ScheduleTrainingWorker

    w = object.__new__(ScheduleTrainingWorker)
    w.engine, w.loss_fn, w.device_name, w.flops_counter, w.profiler = (
        engine,
        loss_fn,
        "cpu",
        None,
        _NoProfiler(),
    )
    w.model_config = {"use_remove_padding": False}
    w.engine_config = SimpleNamespace(
        forward_only=False,
        use_dynamic_bsz=False,
        max_token_len_per_gpu=None,
        micro_batch_size_per_gpu=MICRO,
        use_fused_kernels=False,
    )
    return w


def _update(worker, data, *, mini_batch: int = BS):
    from verl.utils import tensordict_utils as tu

    tu.assign_non_tensor(
        data, mini_batch_size=mini_batch, epochs=1, seed=0, dataloader_kwargs={"shuffle": False}
    )
    out = worker.train_mini_batch(data)
    return tu.get(out, "metrics")


def _plain_state(module) -> dict:
    """The module's weights as plain tensors (FSDP2 holds DTensor shards)."""
    return {
        k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().clone()
        for k, v in module.state_dict().items()
    }


def _fully_shard(module):
    """FSDP2 as verl applies it (each decoder layer, then the root), on a one-rank CPU mesh."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (1,))
    for layer in module.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(module, mesh=mesh)
    return module


@pytest.mark.parametrize(
    ("mode", "fsdp2"), [("token-mean", False), ("seq-mean-token-mean", False), ("token-mean", True)]
)
def test_recorded_micro_norm_is_the_micro_batch_gradient(one_rank, monkeypatch, mode, fsdp2):
    """Also under FSDP2 (``fully_shard`` on CPU): its forward runs on unsharded copies of the
    parameters, and verl's loop skips the gradient sync on all but the last micro-batch."""
    from verl.utils import tensordict_utils as tu

    gen = torch.Generator().manual_seed(1)
    module = _llama()
    trained = _fully_shard(module) if fsdp2 else module
    worker = _worker(_engine(trained, monkeypatch), _loss_fn(mode))
    for _ in range(3):
        raw = _raw(gen)
        # brute force: the first micro-batch alone through verl's loop, its own mean loss
        ref = _llama()
        ref.load_state_dict(_plain_state(module))
        ref_engine = _engine(ref, monkeypatch, lr=0.0)
        first = _data(raw, slice(0, MICRO))
        tu.assign_non_tensor(
            first, use_remove_padding=False, use_dynamic_bsz=False, micro_batch_size_per_gpu=MICRO
        )
        ref_engine.optimizer_zero_grad()
        ref_engine.forward_backward_batch(first, _loss_fn(mode), forward_only=False)
        want = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in ref.parameters() if p.grad is not None))

        metrics = _update(worker, _data(raw))
        got = metrics["grad_norm_micro"]
        got = got[0] if isinstance(got, list) else got
        micro = metrics["micro_batch"]
        micro = micro[0] if isinstance(micro, list) else micro
        grad_norm = metrics["grad_norm"]
        grad_norm = grad_norm[0] if isinstance(grad_norm, list) else grad_norm
        print(f"verl {mode}: recorded {got:.6f} brute force {want:.6f} grad_norm {grad_norm:.6f}")
        assert micro == MICRO
        assert got == pytest.approx(want, rel=1e-5)
        assert got > grad_norm


def _values(metrics, key):
    v = metrics[key]
    return v if isinstance(v, list) else [v]


def test_several_updates_per_step_report_no_micro_norm(one_rank, monkeypatch):
    """Two PPO mini-batches per step: ``grad_norm`` is their mean over updates of half the step's
    rollouts, which the record's batch does not describe; nothing is reported."""
    gen = torch.Generator().manual_seed(2)
    worker = _worker(_engine(_llama(), monkeypatch), _loss_fn())
    metrics = _update(worker, _data(_raw(gen)), mini_batch=BS // 2)
    assert len(_values(metrics, "grad_norm")) == 2
    assert "grad_norm_micro" not in metrics
    one = _update(worker, _data(_raw(gen)))  # and the next one-update step reports again
    assert len(_values(one, "grad_norm_micro")) == 1


def _sample_grad(module, raw, i, monkeypatch):
    from verl.utils import tensordict_utils as tu

    ref = _llama()
    ref.load_state_dict(module.state_dict())
    eng = _engine(ref, monkeypatch, lr=0.0)
    one = _data(raw, slice(i, i + 1))
    tu.assign_non_tensor(one, use_remove_padding=False, use_dynamic_bsz=False, micro_batch_size_per_gpu=1)
    eng.optimizer_zero_grad()
    eng.forward_backward_batch(one, _loss_fn(), forward_only=False)
    return torch.cat([p.grad.flatten() for p in ref.parameters()])


UPDATES = 200  # records fed to the online estimate
POOL = 512  # samples of the brute-force B_simple


def test_the_online_estimate_forms_from_the_records(one_rank, monkeypatch):
    """The worker's metrics, reduced and renamed by verl's own functions as its trainer does, read
    by the adapter's aliases, feed the core's two-batch estimator; with the parameters held (lr 0)
    its B_simple is compared with the brute-force tr(Sigma)/|G|^2 over a fresh pool of samples."""
    from verl.utils.metric import reduce_metrics
    from verl.utils.py_functional import rename_dict

    from rlvr_schedule.clocks.online import GradientNoiseScale
    from rlvr_schedule.ingest import canonicalize
    from rlvr_schedule_adapters.verl.plugin import VERL_ALIASES

    gen = torch.Generator().manual_seed(3)
    module = _llama()
    worker = _worker(_engine(module, monkeypatch, lr=0.0), _loss_fn())
    est = GradientNoiseScale(beta=0.99)
    for step in range(1, UPDATES + 1):
        metrics = _update(worker, _data(_raw(gen, ragged=False)))
        logged = reduce_metrics(rename_dict(dict(metrics), "actor/"))
        rec = canonicalize(logged, step=step, samples=step * BS, batch=BS, aliases=VERL_ALIASES)
        assert rec.micro_batch == MICRO and math.isfinite(rec.grad_norm_micro)
        est.update(rec)
    assert est.n_updates == UPDATES and math.isfinite(est.b_simple) and est.b_simple > 0
    raw = _raw(gen, rows=POOL, ragged=False)
    per = torch.stack([_sample_grad(module, raw, i, monkeypatch) for i in range(POOL)])
    mean = per.mean(0)
    trace = float((per - mean).pow(2).sum(1).mean()) * POOL / (POOL - 1)
    brute = trace / (float(mean.pow(2).sum()) - trace / POOL)
    print(f"verl B_simple online {est.b_simple:.3f} brute force {brute:.3f}")
    assert est.b_simple == pytest.approx(brute, rel=0.3)


def test_a_two_clock_schedule_behind_the_adapter_forms_its_noise_estimate(one_rank, monkeypatch):
    """The actor's metrics as verl's trainer logs them (``reduce_metrics`` of the renamed update
    output, beside the step's other metrics) through the adapter's controller: the schedule's own
    gradient-noise estimate takes every step."""
    from verl.utils.metric import reduce_metrics
    from verl.utils.py_functional import rename_dict

    from rlvr_schedule.policy import schedule_from_dict
    from rlvr_schedule_adapters.verl.controller import ScheduleController
    from rlvr_schedule_adapters.verl.plugin import VERL_ALIASES

    spec = {"type": "two_clock", "initial_batch": BS, "critical_batch": 64, "constraints": {"group_size": 4}}
    schedule = schedule_from_dict(spec)
    ctl = ScheduleController(
        schedule, group_size=4, running=(BS, 1e-2), apply_fn=lambda b, lr: None, aliases=VERL_ALIASES
    )
    gen = torch.Generator().manual_seed(5)
    worker = _worker(_engine(_llama(), monkeypatch), _loss_fn())
    for step in range(1, 7):
        logged = reduce_metrics(rename_dict(dict(_update(worker, _data(_raw(gen)))), "actor/"))
        ctl.observe({**logged, "training/global_step": step, "critic/score/mean": 0.5}, step)
    assert ctl.last_record.micro_batch == MICRO and math.isfinite(ctl.last_record.grad_norm_micro)
    assert schedule.noise.n_updates == 6 and math.isfinite(schedule.noise.trace_sigma)
    assert not ctl.faults


def _two_rank_worker(rank: int, path: str, out: str) -> None:
    """One of two data-parallel ranks: its own rollouts through verl's loop over the gloo group;
    writes the recorded norm and the brute-force norm of its first micro-batch's own loss."""
    import json

    import torch.distributed as dist
    from verl.utils import fsdp_utils
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.fsdp import transformer_impl as ti

    ti.get_device_id = fsdp_utils.get_device_id = lambda: "cpu"
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=2)
    alone = [dist.new_group([r]) for r in range(2)][rank]  # every rank makes every group
    raw = _raw(torch.Generator().manual_seed(100 + rank))
    plain = _llama()
    brute = _cpu_engine(plain, lr=0.0)
    brute.get_data_parallel_group = lambda: alone  # its own mean loss: a data-parallel world of one
    brute.get_data_parallel_size = lambda: 1
    first = _data(raw, slice(0, MICRO))
    tu.assign_non_tensor(
        first, use_remove_padding=False, use_dynamic_bsz=False, micro_batch_size_per_gpu=MICRO
    )
    brute.optimizer_zero_grad()
    brute.forward_backward_batch(first, _loss_fn(), forward_only=False)
    want = math.sqrt(sum(float(p.grad.pow(2).sum()) for p in plain.parameters()))
    metrics = _update(_worker(_cpu_engine(_llama()), _loss_fn()), _data(raw), mini_batch=2 * BS)
    with open(f"{out}.{rank}", "w") as fh:
        json.dump({"got": metrics["grad_norm_micro"], "want": want}, fh)
    dist.destroy_process_group()


def test_two_data_parallel_ranks_record_the_mean_squared_norm(tmp_path):
    """Two gloo ranks (verl's loss then carries dp_size 2 and the tokens of both ranks): each
    rank's hooked norm is scaled back to its own micro-batch's mean loss, and the squared norms are
    averaged over the data-parallel group, so both ranks log sqrt(mean of the two)."""
    import json

    import torch.multiprocessing as mp

    path, out = str(tmp_path / "rendezvous"), str(tmp_path / "norms")
    mp.spawn(_two_rank_worker, args=(path, out), nprocs=2, join=True)
    rows = [json.loads((tmp_path / f"norms.{r}").read_text()) for r in range(2)]
    want = math.sqrt(sum(r["want"] ** 2 for r in rows) / 2)
    print(f"verl 2 ranks: recorded {rows[0]['got']} {rows[1]['got']}, brute force rms {want:.6f}")
    for r in rows:
        got = r["got"][0] if isinstance(r["got"], list) else r["got"]
        assert got == pytest.approx(want, rel=1e-5)
    assert rows[0]["want"] != pytest.approx(rows[1]["want"], rel=1e-3)  # the ranks saw different data
