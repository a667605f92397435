"""The scheduled trainer class (OpenRLHF's real PPOTrainer code path for logs and checkpoints):
schedule state in client_states, resume, and adapter faults survived.

The trainer object is the plain class behind the Ray actor, built without its heavy __init__
(tokenizer, datasets, vLLM); its policy group runs the worker method on in-process workers with
a real DeepSpeed CPU engine, and ``ray.get`` passes their answers through.
"""

from __future__ import annotations

import copy
import logging
from types import SimpleNamespace

import pytest
from openrlhf_test_support import make_trainer, run_steps

from rlvr_schedule_adapters.openrlhf import STATE_KEY, WORKER_METHOD


class CkptWorker:
    """A policy rank: the real worker method on a tiny engine, checkpoints kept in memory."""

    def __init__(self, args, saved=None, refuse=False):
        from openrlhf_tiny_engine import build_policy

        from rlvr_schedule_adapters.openrlhf.actors import RlvrPolicyModelActor

        self.real = object.__new__(RlvrPolicyModelActor)
        if not refuse:
            s, e, o, sc = build_policy(copy.deepcopy(args))
            self.real.strategy, self.real.actor, self.real.actor_optim, self.real.actor_scheduler = (
                s,
                SimpleNamespace(model=e),
                o,
                sc,
            )
        self.saved = saved or {}

    def rlvr_set_batch_and_lr(self, **kw):
        return getattr(self.real, WORKER_METHOD)(**kw)

    def save_checkpoint(self, tag, client_states=None, metric_value=None, metric_key=None):
        self.saved[tag] = copy.deepcopy(client_states)

    def get_checkpoint_states(self):
        return self.saved[max(self.saved, key=lambda t: int(t.removeprefix("global_step")))]


class Group:
    """Stands for RayActorGroup.async_run_method (results come back as they are; ray.get is identity)."""

    def __init__(self, workers):
        self.workers, self.calls = workers, []

    def async_run_method(self, method_name, *args, **kwargs):
        self.calls.append((method_name, kwargs))
        return [getattr(w, method_name)(*args, **kwargs) for w in self.workers]


@pytest.fixture(autouse=True)
def _ray_get_identity(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "get", lambda refs, **kw: refs)


def _args(openrlhf_args, tmp_path, **ckpt):
    a = copy.deepcopy(openrlhf_args)
    a.ckpt.path, a.ckpt.save_steps = str(tmp_path), 2
    for k, v in ckpt.items():
        setattr(a.ckpt, k, v)
    return a


def test_schedule_runs_and_its_state_is_checkpointed(openrlhf_args, tmp_path):
    args = _args(openrlhf_args, tmp_path)
    worker = CkptWorker(args)
    t = make_trainer(args, Group([worker]))
    assert t.init_checkpoint_states()["global_step"] == 0  # fresh run: stage 0 applied
    steps = run_steps(t, 4)
    assert [s[0]["rlvr/batch"] for s in steps] == [8.0, 8.0, 16.0, 16.0]
    assert [s[0]["rlvr/samples"] for s in steps] == [8.0, 16.0, 32.0, 48.0]
    assert (
        args.train.batch_size == 16
        and args.rollout.batch_size == 4
        and args.rollout.vllm_generate_batch_size == 4
    )
    assert worker.real.actor.model.gradient_accumulation_steps() == 8
    assert sorted(worker.saved) == ["global_step2", "global_step4"]
    state = worker.saved["global_step4"][STATE_KEY]
    assert state["samples"] == 8 + 8 + 16 + 16 and state["in_effect"][0] == 16
    assert state["schedule"]["index"] == 1
    assert worker.saved["global_step4"]["total_consumed_prompts"] == 0  # OpenRLHF's own keys kept


def test_resume_restores_stage_samples_and_workers(openrlhf_args, tmp_path):
    args = _args(openrlhf_args, tmp_path)
    first = CkptWorker(args)
    t1 = make_trainer(args, Group([first]))
    t1.init_checkpoint_states()
    run_steps(t1, 4)

    (tmp_path / "_actor").mkdir()
    args2 = _args(openrlhf_args, tmp_path, load_enable=True)  # a fresh process: CLI batch 8 again
    second = CkptWorker(args2, saved=copy.deepcopy(first.saved))
    t2 = make_trainer(args2, Group([second]))
    states = t2.init_checkpoint_states()
    assert states["global_step"] == 4
    assert t2.rlvr.samples == 48 and t2.rlvr.schedule.current.batch == 16
    assert args2.train.batch_size == 16 and args2.rollout.batch_size == 4
    assert second.real.actor.model.gradient_accumulation_steps() == 8
    assert second.real.actor_scheduler.base_lrs[0] == pytest.approx(2e-3)
    more1, more2 = run_steps(t1, 3, start=5), run_steps(t2, 3, start=5)
    assert [m[1][STATE_KEY] for m in more1] == [m[1][STATE_KEY] for m in more2]


def test_a_bad_schedule_leaves_the_run_unscheduled(openrlhf_args, tmp_path, caplog):
    args = _args(openrlhf_args, tmp_path)
    worker = CkptWorker(args)
    with caplog.at_level(logging.ERROR):
        t = make_trainer(args, Group([worker]), spec={"type": "static", "stages": [{"batch": -1, "lr": 1}]})
    assert t.rlvr is None and "could not build the schedule" in caplog.text
    t.init_checkpoint_states()
    run_steps(t, 2)
    assert STATE_KEY not in worker.saved["global_step2"] and args.train.batch_size == 8


def test_a_raising_schedule_is_logged_and_checkpoints_still_happen(openrlhf_args, tmp_path, caplog):
    args = _args(openrlhf_args, tmp_path)
    worker = CkptWorker(args)
    t = make_trainer(args, Group([worker]))
    t.init_checkpoint_states()

    def boom(record):
        raise ZeroDivisionError("schedule bug")

    t.rlvr.schedule.propose = boom
    with caplog.at_level(logging.ERROR):
        run_steps(t, 2)
    assert "schedule bug" in caplog.text and len(t.rlvr.faults) == 2
    assert "global_step2" in worker.saved and STATE_KEY in worker.saved["global_step2"]


def test_a_refusing_worker_holds_the_stage(openrlhf_args, tmp_path, caplog):
    args = _args(openrlhf_args, tmp_path)
    good, bad = CkptWorker(args), CkptWorker(args, refuse=True)
    t = make_trainer(args, Group([good, bad]))
    with caplog.at_level(logging.ERROR):
        t.init_checkpoint_states()
        run_steps(t, 3)
    assert "1 of 2 policy worker(s) refused" in caplog.text
    assert args.train.batch_size == 8 and args.rollout.batch_size == 2  # the trainer side kept its batch
    assert "global_step2" in good.saved


class _PromptLoader:
    """Stands for OpenRLHF's StatefulDataLoader of one-prompt batches (iteration + state_dict)."""

    def __init__(self, n):
        self.items = [(["src"], [f"p{i}"], ["label"], [None]) for i in range(n)]

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)

    def state_dict(self):
        return {"n": len(self.items)}


def test_real_fit_loop_follows_the_schedule(openrlhf_args, tmp_path):
    """OpenRLHF's own PPOTrainer.fit and SamplesGenerator: only vLLM and the PPO update are replaced."""
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator

    args = _args(openrlhf_args, tmp_path)
    args.ckpt.save_steps, args.eval.steps = 4, float("inf")
    worker = CkptWorker(args)
    t = make_trainer(args, Group([worker]))
    t.prompts_dataloader, t.eval_dataloader, t.generate_kwargs = _PromptLoader(20), None, {}
    t.samples_generator = SamplesGenerator(
        strategy=t.strategy,
        prompts_dataloader=t.prompts_dataloader,
        eval_dataloader=None,
        tokenizer=None,
        vllm_engines=[],
    )

    def fake_vllm(dataloader_iter, num_prompts, dynamic_filtering, **kw):  # n rollouts per prompt
        got = []
        for _ in range(num_prompts):
            item = next(dataloader_iter, None)
            if item is None:
                return got, len(got) // args.rollout.n_samples_per_prompt, True
            got.extend([item[1][0]] * args.rollout.n_samples_per_prompt)
        return got, num_prompts, False

    sizes = []

    def fake_train_step(rollout_samples, global_step):  # the PPO update; reports what OpenRLHF logs
        sizes.append((len(rollout_samples), worker.real.strategy.accumulated_gradient))
        return {
            "rollout/num_samples": float(len(rollout_samples)),
            "actor_lr": 1e-3,
            "kl": 0.0,
            "rollout/reward_mean": 0.5,
            "generated_samples": ["x", 1.0],
        }, global_step + 1

    t.samples_generator._generate_vllm = fake_vllm
    t.train_step = fake_train_step
    t.fit()
    # 20 prompts x 4: two steps of 8 rollouts (16 = until_samples), then 16 per step; the
    # workers accumulate 8 micro-batches of 2 from the first 16-rollout step on
    assert sizes == [(8, 4), (8, 4), (16, 8), (16, 8), (16, 8), (16, 8)]
    assert sorted(worker.saved) == ["global_step4"]
    assert worker.saved["global_step4"][STATE_KEY]["samples"] == 48


def test_openrlhf_tensorboard_logs_read_back_as_the_run(openrlhf_args, tmp_path):
    """OpenRLHF's own TensorboardLogger writes the steps; the core reads them back as a Run."""
    from openrlhf.utils.logging_utils import TensorboardLogger

    from rlvr_schedule.ingest import load_run

    args = _args(openrlhf_args, tmp_path)
    args.ckpt.save_steps = float("inf")
    args.logger.tensorboard_dir = str(tmp_path / "tb")
    t = make_trainer(args, Group([CkptWorker(args)]))
    t.tensorboard_logger = TensorboardLogger(args)
    t.init_checkpoint_states()
    run_steps(t, 4)
    t.tensorboard_logger.close()
    run = load_run(tmp_path / "tb")
    assert list(run.array("step")) == [1, 2, 3, 4]
    assert list(run.samples) == [8, 16, 32, 48]
    assert list(run.array("batch")) == [8, 8, 16, 16]
    assert list(run.array("reward_mean")) == [0.5] * 4
