"""Alias tables and canonicalize(): framework names land on the right fields, by priority."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from rlvr_schedule.errors import ConfigError, IngestError, IngestWarning
from rlvr_schedule.ingest import ALIASES, canonicalize, collect_aliases, merge_aliases
from rlvr_schedule.ingest.aliases import AliasTable

TRL_LOG = {
    "loss": 0.01,
    "grad_norm": 0.7,
    "learning_rate": 1e-6,
    "num_tokens": 1234.0,
    "completions/mean_length": 88.5,
    "completions/clipped_ratio": 0.1,
    "rewards/acc/mean": 0.4,
    "rewards/acc/std": 0.2,
    "reward": 0.4,
    "reward_std": 0.3,
    "frac_reward_zero_std": 0.25,
    "entropy": 1.3,
    "kl": 0.02,
    "clip_ratio/low_mean": 0.0,
    "clip_ratio/high_mean": 0.0,
    "clip_ratio/region_mean": 0.05,
    "step_time": 0.1,
    "epoch": 0.5,
}
VERL_LOG = {
    "critic/score/mean": 0.6,
    "actor/entropy": 0.9,
    "actor/ppo_kl": 0.001,
    "actor/kl_loss": 0.03,
    "actor/grad_norm": 1.1,
    "actor/pg_clipfrac": 0.02,
    "response_length/mean": 210.0,
    "training/global_step": 7,
    "actor/lr": 2e-6,
}
OPENRLHF_LOG = {
    "rollout/reward_mean": 0.2,
    "rollout/response_length_mean": 150.0,
    "rollout/num_samples": 64.0,
    "kl": 0.04,
    "ppo_kl": 0.002,
    "ppo_clip_ratio": 0.03,
    "actor_grad_norm": 0.5,
    "actor_lr": 3e-6,
    "entropy_loss": 1.7,
}


def test_trl_names_map_to_canonical_fields():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every TRL key is known: no warning
        r = canonicalize(TRL_LOG, step=3, samples=96, batch=32)
    assert (r.step, r.samples, r.batch, r.lr) == (3, 96, 32, 1e-6)
    assert r.reward_mean == 0.4 and r.reward_std == 0.3 and r.entropy == 1.3 and r.kl == 0.02
    assert r.grad_norm == 0.7 and r.clip_frac == 0.05 and r.response_length == 88.5
    assert r.frac_zero_std == 0.25
    assert r.extra["rewards/acc/mean"] == 0.4 and r.extra["loss"] == 0.01
    assert "reward" not in r.extra and "learning_rate" not in r.extra


def test_verl_kl_priority_prefers_reference_kl_and_keeps_the_other():
    r = canonicalize(VERL_LOG, step=7, samples=70, batch=10)
    assert r.kl == 0.03  # actor/kl_loss (KL to the reference) beats actor/ppo_kl
    assert r.extra["actor/ppo_kl"] == 0.001
    assert (r.reward_mean, r.entropy, r.grad_norm, r.clip_frac, r.response_length, r.lr) == (
        0.6,
        0.9,
        1.1,
        0.02,
        210.0,
        2e-6,
    )


def test_verl_ppo_kl_is_the_fallback_when_alone():
    log = {k: v for k, v in VERL_LOG.items() if k != "actor/kl_loss"}
    assert canonicalize(log, step=7, samples=70, batch=10).kl == 0.001


def test_openrlhf_names_and_batch_from_num_samples():
    r = canonicalize(OPENRLHF_LOG, step=2, samples=128)
    assert r.batch == 64  # rollout/num_samples: rollouts of this update
    assert (r.reward_mean, r.response_length, r.kl, r.clip_frac, r.grad_norm, r.lr, r.entropy) == (
        0.2,
        150.0,
        0.04,
        0.03,
        0.5,
        3e-6,
        1.7,
    )
    assert r.extra["ppo_kl"] == 0.002


def test_train_prefix_resolves_below_the_bare_name():
    r = canonicalize({"train/reward": 0.5, "train/learning_rate": 1e-5}, step=1, samples=8, batch=8)
    assert r.reward_mean == 0.5 and r.lr == 1e-5
    r = canonicalize({"train/reward": 0.5, "reward": 0.6}, step=1, samples=8, batch=8)
    assert r.reward_mean == 0.6 and r.extra["train/reward"] == 0.5


def test_unknown_numeric_keys_kept_in_extra_and_non_numeric_dropped():
    r = canonicalize({"reward": 1.0, "my/metric": np.float32(2.5), "tag": "abc"}, step=1, samples=4, batch=4)
    assert r.extra == {"my/metric": 2.5}


def test_explicit_arguments_win_and_logged_values_are_kept():
    r = canonicalize(
        {"reward": 1.0, "samples": 10, "batch": 5, "lr": 0.1}, step=2, samples=12, batch=6, lr=0.2
    )
    assert (r.samples, r.batch, r.lr) == (12, 6, 0.2)
    assert r.extra["samples"] == 10 and r.extra["batch"] == 5


def test_missing_batch_and_samples_raise_naming_the_field():
    with pytest.raises(IngestError, match="'batch'"):
        canonicalize({"reward": 1.0}, step=1, samples=8)
    with pytest.raises(IngestError, match="'samples'"):
        canonicalize({"reward": 1.0}, step=1, batch=8)


def test_nonfinite_metric_warns_and_becomes_nan():
    with pytest.warns(IngestWarning, match="'entropy'.*inf"):
        r = canonicalize({"reward": 1.0, "entropy": float("inf")}, step=1, samples=4, batch=4)
    assert math.isnan(r.entropy)


def test_non_numeric_known_field_raises():
    with pytest.raises(IngestError, match="'reward'"):
        canonicalize({"reward": "high"}, step=1, samples=4, batch=4)


def test_fractional_batch_raises():
    with pytest.raises(IngestError, match="whole number"):
        canonicalize({"reward": 1.0}, step=1, samples=4, batch=2.5)


def test_user_aliases_take_precedence_and_bad_targets_are_rejected():
    table = merge_aliases({"acc": "reward_mean"})
    r = canonicalize({"acc": 0.9, "reward": 0.1}, step=1, samples=4, batch=4, aliases=table)
    assert r.reward_mean == 0.9 and r.extra["reward"] == 0.1
    with pytest.raises(ConfigError, match="nonsense"):
        merge_aliases({"acc": "nonsense"})


def test_alias_table_covers_every_listed_framework_key():
    for key in list(TRL_LOG)[:1] + [
        "reward",
        "reward_std",
        "entropy",
        "kl",
        "grad_norm",
        "learning_rate",
        "completions/mean_length",
        "frac_reward_zero_std",
        "clip_ratio/region_mean",
    ]:
        if key != "loss":
            assert key in ALIASES, key
    for key in VERL_LOG:
        assert key in ALIASES, key
    for key in OPENRLHF_LOG:
        assert key in ALIASES, key


def test_collect_aliases_merges_plugin_hook():
    from rlvr_schedule.plugins import PluginHost, hookimpl

    class Plugin:
        @hookimpl
        def rlvr_schedule_metric_aliases(self):
            return {"team/score": "reward_mean", "reward": "entropy"}

    class Broken:
        @hookimpl
        def rlvr_schedule_metric_aliases(self):
            return {"x": "not_a_field"}

    host = PluginHost(load_entrypoints=False)
    host.register(Plugin())
    host.register(Broken())
    table = collect_aliases(host)
    assert isinstance(table, AliasTable)
    assert table["team/score"] == "reward_mean"
    assert table["reward"] == "reward_mean"  # a plugin cannot remap a built-in name
    assert "x" not in table
    r = canonicalize({"team/score": 0.7}, step=1, samples=2, batch=2, aliases=table)
    assert r.reward_mean == 0.7


def test_tensor_values_are_read_as_numbers():
    import torch

    r = canonicalize(
        {"reward": torch.tensor(0.5), "entropy": np.array(1.25), "my/vec": torch.ones(3)},
        step=1,
        samples=4,
        batch=4,
    )
    assert r.reward_mean == 0.5 and r.entropy == 1.25 and "my/vec" not in r.extra
    with pytest.raises(IngestError, match="'kl'"):
        canonicalize({"kl": torch.ones(2)}, step=1, samples=4, batch=4)


def test_trl_ppo_rloo_and_old_verl_names() -> None:
    """TRL PPO/RLOO: episode = rollouts so far, objective/scores = the score (rlhf_reward, which
    subtracts the KL penalty, only as a fallback); old verl: actor/entropy_loss is the entropy and
    critic/kl the reference KL; TRL's train/rollout mismatch is known (kept, no warning)."""
    import warnings

    from rlvr_schedule.ingest import map_metrics

    m = map_metrics(
        {
            "episode": 512,
            "objective/scores": 0.4,
            "objective/rlhf_reward": 0.35,
            "objective/entropy": 2.1,
            "objective/kl": 0.02,
            "policy/clipfrac_avg": 0.1,
        }
    )
    assert m.values["samples"] == 512 and m.values["reward_mean"] == 0.4
    assert m.values["entropy"] == 2.1 and m.values["kl"] == 0.02 and m.values["clip_frac"] == 0.1
    assert m.extra["objective/rlhf_reward"] == 0.35
    assert map_metrics({"objective/rlhf_reward": 0.35}).values["reward_mean"] == 0.35
    m = map_metrics({"actor/entropy_loss": 0.5, "critic/kl": 0.01, "actor/ppo_kl": 0.001})
    assert m.values["entropy"] == 0.5 and m.values["kl"] == 0.01 and m.extra["actor/ppo_kl"] == 0.001
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = map_metrics(
            {
                "reward": 1.0,
                "sampling/sampling_logp_difference/mean": 0.02,
                "sampling/importance_sampling_ratio/min": 0.9,
            }
        )
    assert not m.unknown and m.extra["sampling/sampling_logp_difference/mean"] == 0.02
