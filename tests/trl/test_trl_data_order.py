"""Where a resumed GRPOTrainer run picks its prompts up (``rlvr_schedule_adapters.trl.data_order``).

The unit tests drive TRL's own ``RepeatSampler`` through a torch ``DataLoader`` and accelerate's
``skip_first_batches`` (the Trainer's resume path); the slow one resumes a real GRPOTrainer in its
second epoch, where TRL 1.16 with transformers 5.x walks the first epoch's order again.
"""

from __future__ import annotations

import pytest
from trl_harness import run_grpo

from rlvr_schedule_adapters.trl.data_order import (
    ShiftedOnce,
    detach_loader_seed,
    find_sampler,
    generator_state,
    restore_order,
)


def test_shifted_once_moves_the_first_pass_only():
    s = ShiftedOnce(list(range(20)), drop=4, resume_at=8)  # the Trainer skips 4, the run was at 8
    assert len(s) == 16
    assert list(s) == [0, 1, 2, 3, *range(8, 20)]
    assert list(s) == list(range(20)) and len(s) == 20  # the next epoch is untouched
    back = ShiftedOnce(list(range(20)), drop=8, resume_at=4)  # the Trainer skips more than the run did
    assert list(back)[8:] == list(range(4, 20))


def _loader(seed: int = 0):
    from torch.utils.data import DataLoader
    from trl.trainer.utils import RepeatSampler

    # 16 prompts, 2 per generation batch, 4 completions each, each generation used twice (S = 2)
    sampler = RepeatSampler(list(range(16)), mini_repeat_count=4, batch_size=2, repeat_count=2, seed=seed)
    return DataLoader(list(range(16)), batch_size=8, sampler=sampler)


def _batches(loader):
    return [b.tolist() for b in loader]


@pytest.mark.parametrize(("trainer_pos", "true_pos"), [(2, 5), (6, 3), (4, 4)])
def test_restored_order_is_the_uninterrupted_runs_after_the_trainers_skip(trainer_pos, true_pos):
    from accelerate import skip_first_batches

    full = _loader()
    _batches(full)  # epoch 0
    rng = generator_state(full.sampler)  # what the callback saves at the start of epoch 1
    epoch1 = _batches(full)
    assert rng is not None and epoch1 != _batches(_loader())  # epoch 1's order is not epoch 0's

    resumed = _loader()  # a new process: the sampler's generator is freshly seeded
    site = find_sampler(resumed)
    assert site is not None and site.indices_per_micro == 8
    restore_order(site, rng=rng, trainer_pos=trainer_pos, true_pos=true_pos)
    assert _batches(skip_first_batches(resumed, trainer_pos)) == epoch1[true_pos:]


def test_a_detached_loader_starts_epochs_without_drawing_from_the_global_rng():
    """Making an epoch's iterator draws the workers' base seed: from the global torch RNG by default
    (what put a resumed run's sampling one draw off), from the loader's own generator while detached."""
    import torch
    from accelerate.data_loader import DataLoaderShard

    def after_an_epoch(loader):
        torch.manual_seed(1)
        _batches(loader)
        return torch.rand(1).item()

    untouched = (torch.manual_seed(1), torch.rand(1).item())[1]
    plain = _loader()
    assert after_an_epoch(plain) != untouched
    shard = DataLoaderShard(list(range(16)), batch_size=8, sampler=_loader().sampler)
    undo = detach_loader_seed(shard, 0)
    assert undo is not None and shard.base_dataloader.generator is not None
    assert after_an_epoch(shard) == untouched
    assert detach_loader_seed(shard, 0) is None  # a loader's own generator is left alone
    undo()
    assert shard.base_dataloader.generator is None and after_an_epoch(shard) != untouched


@pytest.mark.parametrize("rank", [0, 1])
def test_two_ranks_each_resume_at_their_own_batches(rank):
    """accelerate gives rank r every 2nd batch (``BatchSamplerShard``): a micro-step takes 2 batches."""
    from accelerate import skip_first_batches
    from accelerate.data_loader import BatchSamplerShard
    from torch.utils.data import BatchSampler, DataLoader
    from trl.trainer.utils import RepeatSampler

    def loader():
        sampler = RepeatSampler(list(range(32)), mini_repeat_count=4, batch_size=4, repeat_count=2, seed=0)
        shard = BatchSamplerShard(BatchSampler(sampler, 8, False), num_processes=2, process_index=rank)
        return DataLoader(list(range(32)), batch_sampler=shard)

    full = loader()
    _batches(full)
    rng = generator_state(full.batch_sampler.batch_sampler.sampler)
    epoch1 = _batches(full)
    resumed = loader()
    site = find_sampler(resumed)
    assert site is not None and site.indices_per_micro == 16
    restore_order(site, rng=rng, trainer_pos=3, true_pos=5)
    assert _batches(skip_first_batches(resumed, 3)) == epoch1[5:]


@pytest.mark.slow
@pytest.mark.parametrize("ckpt", [4, 6])  # saved after epoch 0's last update; half-way into epoch 1
def test_resume_in_the_second_epoch_takes_the_uninterrupted_runs_prompts(tiny_model, tmp_path, ckpt):
    from rlvr_schedule_adapters.trl import RlvrScheduleCallback

    def cb():
        return RlvrScheduleCallback({"stages": [{"batch": 8, "lr": 1e-3}]}, strict=True, name="epochs")

    # 8 prompts: 8 micro-steps (4 updates of GA 2) per epoch
    kw = {"n_prompts": 8, "max_steps": 8, "save_strategy": "steps", "save_steps": 2}
    kw["restore_callback_states_from_checkpoint"] = True
    _, full = run_grpo(tiny_model, tmp_path / "full", [cb()], **kw)
    path = str(tmp_path / "full" / f"checkpoint-{ckpt}")
    _, resumed = run_grpo(tiny_model, tmp_path / "resumed", [cb()], resume=path, **kw)
    assert resumed.prompts == full.prompts[ckpt:]
    assert resumed.texts == full.texts[ckpt:]
    # without the callback the Trainer's resume shuffles epoch 1 as epoch 0 (what the callback fixes)
    _, plain = run_grpo(tiny_model, tmp_path / "plain", [], resume=path, **kw)
    assert plain.prompts != full.prompts[ckpt:]
