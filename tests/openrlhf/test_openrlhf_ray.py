"""The whole path over Ray: the trainer calls the worker method on real Ray actors of the scheduled
policy class through OpenRLHF's RayActorGroup (CPU, no GPUs requested)."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
STUBS = HERE / "stubs"


@pytest.fixture(scope="module")
def ray_session():
    import ray

    paths = [str(HERE), str(STUBS), os.environ.get("PYTHONPATH", "")]
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
        "DS_ACCELERATOR": "cpu",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    yield ray
    ray.shutdown()


def _group(ray):
    from openrlhf.trainer.ray.launcher import RayActorGroup
    from openrlhf_test_support import TinyPolicyModelActor

    remote_cls = ray.remote(num_gpus=1)(TinyPolicyModelActor)
    return RayActorGroup(1, 1, remote_cls, num_gpus_per_actor=0)


@pytest.mark.slow
def test_switch_reaches_ray_workers_and_a_refusal_is_survived(ray_session, openrlhf_args, tmp_path, caplog):
    from openrlhf_test_support import make_trainer, run_steps

    ray = ray_session
    args = copy.deepcopy(openrlhf_args)
    args.ckpt.path, args.ckpt.save_steps = str(tmp_path), float("inf")
    group = _group(ray)
    ray.get(group.async_run_method("init_tiny", copy.deepcopy(args)))
    t = make_trainer(args, group)
    t.init_checkpoint_states()
    run_steps(t, 3)
    state = ray.get(group.async_run_method("tiny_state"))[0]
    assert state == {"gas": 8, "accumulated_gradient": 8, "train_batch": 16, "base_lrs": [2e-3, 2e-3]}
    assert args.train.batch_size == 16 and args.rollout.batch_size == 4

    # a rank without a model refuses; the trainer logs it and keeps its batch
    bare = _group(ray)
    t2 = make_trainer(copy.deepcopy(openrlhf_args), bare)
    t2.args.ckpt.save_steps = float("inf")
    t2.init_checkpoint_states()
    run_steps(t2, 3)
    assert t2.rlvr.faults and "refused" in str(t2.rlvr.faults[-1][2])
    assert t2.args.train.batch_size == 8
