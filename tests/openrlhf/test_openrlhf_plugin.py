"""The entry-point module (imports without OpenRLHF), and the launcher's patching."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def test_entry_point_module_imports_without_frameworks():
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {"openrlhf", "ray", "torch", "deepspeed", "vllm", "flash_attn"}:
                    raise ImportError("blocked: " + name)
        sys.meta_path.insert(0, Block())
        import rlvr_schedule_adapters.openrlhf as p
        from rlvr_schedule.plugins import PluginHost
        host = PluginHost()
        host.register(p, name="openrlhf-direct") if not host.pm.is_registered(p) else None
        print(host.call("rlvr_schedule_metric_aliases")[-1]["train/rlvr/samples"], len(host.faults))
        import rlvr_schedule_adapters.openrlhf.controller  # framework-free too
    """)
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["samples", "0"]


@pytest.fixture
def restore_openrlhf(monkeypatch):
    """Undo the launcher's patches after the test."""
    import openrlhf.utils as outils
    from openrlhf.trainer import ppo_trainer
    from openrlhf.trainer.ray import ppo_actor

    monkeypatch.setattr(ppo_trainer, "PPOTrainer", ppo_trainer.PPOTrainer)
    monkeypatch.setattr(ppo_actor, "PolicyModelActor", ppo_actor.PolicyModelActor)
    monkeypatch.setattr(outils, "get_strategy", outils.get_strategy)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    return ppo_trainer, ppo_actor, outils


def test_patch_puts_the_scheduled_classes_where_the_cli_reads_them(restore_openrlhf):
    import runpy

    from rlvr_schedule_adapters.openrlhf import CLI_MODULE, actors, patch_openrlhf

    ppo_trainer, ppo_actor, _ = restore_openrlhf
    patch_openrlhf({"stages": [{"batch": 8, "lr": 1e-3, "until_samples": None}]})
    assert ppo_trainer.PPOTrainer is actors.ScheduledPPOTrainer
    assert ppo_actor.PolicyModelActor is actors.ScheduledPolicyModelActor
    cli = runpy.run_module(CLI_MODULE, run_name="openrlhf_cli_as_imported")  # top-level imports only
    assert cli["PolicyModelActor"] is actors.ScheduledPolicyModelActor
    assert actors.ScheduledPPOTrainer.__ray_actor_class__ is actors.RlvrPPOTrainer


class _Stop(Exception):
    pass


def test_launcher_hands_the_schedule_to_the_actors_and_warns(
    restore_openrlhf, monkeypatch, tmp_path, base_argv
):
    import ray

    from rlvr_schedule_adapters.openrlhf import ARGS_ATTR, main

    _, _, outils = restore_openrlhf
    seen = {}

    def fake_get_strategy(args):  # stands for DeepspeedStrategy creation; stops before any actor starts
        seen["args"] = args
        raise _Stop

    monkeypatch.setattr(outils, "get_strategy", fake_get_strategy)
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    sched = tmp_path / "sched.yaml"
    sched.write_text(
        "type: static\nstages:\n  - {batch: 8, lr: 1.0e-3, until_samples: 64}\n  - {batch: 10, lr: 2.0e-3}\n"
    )
    from rlvr_schedule_adapters._common import ScheduleSetupWarning

    with (
        pytest.warns(ScheduleSetupWarning, match="stage 1: batch 10 .* not a whole number of prompts"),
        pytest.raises(_Stop),
    ):
        main(["--schedule", str(sched), *base_argv])
    spec = getattr(seen["args"], ARGS_ATTR)["schedule"]
    assert [s["batch"] for s in spec["stages"]] == [8, 10]
    assert getattr(seen["args"], ARGS_ATTR)["advisory"] is False
    with pytest.warns(ScheduleSetupWarning), pytest.raises(_Stop):
        main(["--schedule", str(sched), "--advisory", *base_argv])
    assert getattr(seen["args"], ARGS_ATTR)["advisory"] is True
    assert seen["args"].train.batch_size == 8  # OpenRLHF's own parsing of the rest of the command line


def test_launcher_rejects_a_bad_schedule_before_patching(restore_openrlhf, tmp_path, base_argv):
    from rlvr_schedule.errors import ConfigError
    from rlvr_schedule_adapters.openrlhf import main

    ppo_trainer, _, _ = restore_openrlhf
    before = ppo_trainer.PPOTrainer
    bad = tmp_path / "bad.yaml"
    bad.write_text("stages:\n  - {batch: 8, lr: 1.0e-3, until_samples: 64}\n  - {batch: 0, lr: 1.0e-3}\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml.*stages\[1\]\.batch"):
        main(["--schedule", str(bad), *base_argv])
    assert ppo_trainer.PPOTrainer is before
