"""A raised alarm of the collapse watch saves OpenRLHF's own DeepSpeed checkpoint of the policy
(the real worker method on a real tiny CPU engine; the Ray group is in-process) apart from the
rotation of ``ckpt.path/_actor``. The step logs raise no alarm on cue, so the watch gets one detector
that warns at a known step (the detectors are tested on real runs in tests/core)."""

from __future__ import annotations

import json

from openrlhf_test_support import SPEC, make_trainer, run_steps
from test_openrlhf_trainer import CkptWorker, Group, _args, _ray_get_identity  # noqa: F401 (autouse)

from rlvr_schedule.clocks.failure import Detector
from rlvr_schedule.clocks.failure.alarms import CollapseWatch
from rlvr_schedule_adapters.openrlhf import STATE_KEY


class WarnAt(Detector):
    name = "warn_at"
    kind = "warning"

    def __init__(self, step: int) -> None:
        super().__init__(patience=1)
        self.step = step

    def _check(self, record):  # type: ignore[no-untyped-def]
        return record.step == self.step, 1.0


class AlarmWorker(CkptWorker):
    def rlvr_save_alarm_checkpoint(self, **kw):  # type: ignore[no-untyped-def]
        return self.real.rlvr_save_alarm_checkpoint(**kw)


def test_a_warning_saves_openrlhfs_checkpoint_apart_from_its_rotation(openrlhf_args, tmp_path, monkeypatch):
    from openrlhf.utils.deepspeed import deepspeed as ds

    # OpenRLHF's save synchronises CUDA around DeepSpeed's own save; this torch build has no CUDA
    monkeypatch.setattr(ds, "torch_dist_barrier_and_cuda_sync", lambda: None)
    args = _args(openrlhf_args, tmp_path)
    worker = AlarmWorker(args)
    t = make_trainer(args, Group([worker]), spec={**SPEC, "watch": {"checkpoint_on_alarm": True}})
    t.rlvr.driver.watch = CollapseWatch([WarnAt(3)], raised={"warn_at"})
    t.init_checkpoint_states()
    run_steps(t, 4)
    kept = tmp_path / "alarm-global_step3"
    assert (kept / "_actor" / "latest").read_text().strip() == "global_step3"  # DeepSpeed's own layout
    assert any((kept / "_actor" / "global_step3").iterdir())
    info = json.loads((kept / "alarm.json").read_text())
    assert info["step"] == 3 and info["samples"] == 32 and info["alarms"][0]["name"] == "warn_at"
    assert sorted(worker.saved) == ["global_step2", "global_step4"]  # the regular saves go on
    assert worker.saved["global_step4"][STATE_KEY]["alarm_checkpoints"][0]["path"] == str(kept)
    assert t.rlvr.faults == []


def test_without_the_schedule_files_consent_an_applied_run_saves_nothing_at_an_alarm(openrlhf_args, tmp_path):
    args = _args(openrlhf_args, tmp_path)
    worker = AlarmWorker(args)
    t = make_trainer(args, Group([worker]))
    t.rlvr.driver.watch = CollapseWatch([WarnAt(3)], raised={"warn_at"})
    t.init_checkpoint_states()
    run_steps(t, 4)
    assert not list(tmp_path.glob("alarm-*"))
