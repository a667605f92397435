"""The micro-batch gradient norm on a real GRPOTrainer: the fused ``.grad`` read and the hook meter
(the path of sharded engines, DeepSpeed ZeRO and FSDP, where ``.grad`` is empty after a micro-step)
give the same number; the value is read when the update is logged, not at the micro-step."""

from __future__ import annotations

import math

import pytest
from trl_harness import run_grpo

from rlvr_schedule.plugins import hookimpl
from rlvr_schedule_adapters.trl import RlvrScheduleCallback, find_callback

STAGE = {"stages": [{"batch": 16, "lr": 1e-3}]}  # 4 per micro-step x GA 4


def test_the_hook_meter_measures_what_the_fused_grad_read_measures(tiny_model, tmp_path):
    seen = {}
    for meter in ("grad", "hooks"):
        cb = RlvrScheduleCallback(STAGE, strict=True, noise_meter=meter)
        got = []
        cb.host.register(_Sink(got))
        trainer, _ = run_grpo(tiny_model, tmp_path / meter, [cb], max_steps=4, gradient_accumulation_steps=4)
        assert find_callback(trainer).errors == []
        assert (cb.micro_norm.meter is None) and len(got) == 4  # hooks removed at train end
        seen[meter] = got
    assert all(math.isfinite(x) and x > 0 for x in seen["grad"])
    assert seen["hooks"] == pytest.approx(seen["grad"], rel=1e-5)


def test_the_micro_norm_stays_on_the_device_until_the_log(tiny_model, tmp_path):
    import torch

    class Spy(RlvrScheduleCallback):  # type: ignore[misc, valid-type]
        kinds: list[str] = []

        def on_step_end(self, args, state, control, **kwargs):
            self.kinds.append(type(self.micro_norm._sq).__name__)
            return super().on_step_end(args, state, control, **kwargs)

    cb = Spy(STAGE, strict=True)
    run_grpo(tiny_model, tmp_path, [cb], max_steps=2, gradient_accumulation_steps=4)
    assert Spy.kinds == [torch.Tensor.__name__] * 2


class _Sink:
    def __init__(self, out):
        self.out = out

    @hookimpl
    def rlvr_schedule_on_record(self, record):
        self.out.append(record.grad_norm_micro)
