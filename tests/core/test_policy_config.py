"""Schedule files: YAML and JSON, static and two-clock, and errors that name file and field."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy import StaticSchedule, TwoClockScheduler, load_schedule, schedule_from_dict

DATA = Path(__file__).resolve().parents[1] / "data"
STATIC_YAML = """\
type: static
constraints: {group_size: 8}
base_lr: 1e-6          # YAML 1.1 reads this as a string; accepted
base_batch: 64
lr_rule: sqrt
stages:
  - {batch: 64, until_samples: 2e4}
  - {batch: 256, lr: 3.0e-6, until_samples: 100000}
  - {batch: 1024, until_samples: null}
"""


def test_static_yaml_derives_missing_lr_by_rule(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(STATIC_YAML)
    s = load_schedule(p)
    assert isinstance(s, StaticSchedule)
    assert [(st.batch, st.until_samples) for st in s.stages] == [(64, 20000), (256, 100000), (1024, None)]
    assert s.stages[0].lr == pytest.approx(1e-6)
    assert s.stages[1].lr == pytest.approx(3e-6)  # given explicitly
    assert s.stages[2].lr == pytest.approx(1e-6 * math.sqrt(1024 / 64))


def test_json_round_trip_through_to_dict(tmp_path):
    s = schedule_from_dict(
        {
            "stages": [
                {"batch": 8, "lr": 1e-6, "until_samples": 80},
                {"batch": 32, "lr": 2e-6, "until_samples": None},
            ]
        }
    )
    p = tmp_path / "s.json"
    p.write_text(json.dumps(s.to_dict()))
    again = load_schedule(p)
    assert again.stages == s.stages


def test_two_clock_yaml(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text(
        "type: two_clock\ninitial_batch: auto\ncritical_batch: 1000\nbase_lr: 1e-6\n"
        "growth: 2\nconstraints: {group_size: 16, max_batch: 4096}\n"
    )
    s = load_schedule(p)
    assert isinstance(s, TwoClockScheduler)
    # changed deliberately: the default operating point is the batch cheapest at the default price 16
    assert s.current.batch == 160  # -16 + sqrt(16^2 + 2 x 16 x 1000) = 163.6, whole groups of 16
    assert s.config.growth == 2.0 and s.config.constraints.max_batch == 4096
    p.write_text(
        "type: two_clock\ninitial_batch: auto\ncritical_batch: 1000\nsample_tolerance: 2.5e-1\n"
        "failure_exponent: '0.5'\ncritical_fraction: null\nconstraints: {group_size: 16}\n"
    )
    s = load_schedule(p)
    assert s.current.batch == 400 and s.config.failure_exponent == 0.5  # 0.4 x 1000
    p.write_text(
        "type: two_clock\ncritical_batch: 1000\ncritical_fraction: 0.5\nconstraints: {group_size: 16}\n"
    )
    assert load_schedule(p).current.batch == 496  # the explicit fraction overrides the tolerance


@pytest.mark.parametrize(
    "doc, field",
    [
        (
            {
                "stages": [
                    {"batch": 8, "lr": 1e-6, "until_samples": 100},
                    {"batch": 16, "lr": 1e-6, "until_samples": 50},
                ]
            },
            "stages[1].until_samples",
        ),
        ({"stages": [{"batch": 12, "lr": 1e-6}], "constraints": {"group_size": 8}}, "stages[0].batch"),
        ({"stages": [{"batch": 8, "lr": -1e-6}]}, "stages[0].lr"),
        ({"stages": [{"batch": 8}]}, "stages[0].lr"),  # no lr and no base_lr
        ({"stages": [{"batch": 8, "lr": 1e-6, "size": 3}]}, "stages[0].size"),
        ({"stages": [{"batch": 8, "lr": 1e-6}], "stagez": []}, "stagez"),
        ({"stages": [{"batch": 8.5, "lr": 1e-6}]}, "stages[0].batch"),
        ({"stages": [{"batch": 8, "lr": 1e-6}, {"batch": 16, "lr": 1e-6}]}, "stages[0].until_samples"),
        ({"stages": "64"}, "stages"),
        ({"type": "dynamic"}, "type"),
        ({"stages": [{"batch": 8, "lr": 1e-6}], "lr_rule": "cubic"}, "lr_rule"),
        ({"type": "two_clock", "growth": 0.5}, "growth"),
        ({"type": "two_clock", "hysteresis": 0}, "hysteresis"),
        ({"type": "two_clock", "initial_batch": 12, "constraints": {"group_size": 8}}, "initial_batch"),
        ({"type": "two_clock", "failure_signal": "loss"}, "failure_signal"),
        ({"type": "two_clock", "base_lr": -1}, "base_lr"),
        ({"type": "two_clock", "marginn": 2}, "marginn"),
        ({"type": "two_clock", "constraints": {"group_size": 0}}, "constraints.group_size"),
    ],
)
def test_every_invalid_case_names_file_and_field(tmp_path, doc, field):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as err:
        load_schedule(p)
    assert err.value.field == field, str(err.value)
    assert "bad.json" in str(err.value)


def test_syntax_errors_name_the_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("type: static\nstages:\n  - {batch: 8, lr: [1e-6\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+"):
        load_schedule(p)
    q = tmp_path / "broken.json"
    q.write_text('{"stages": [\n  {"batch": 8,}\n]}')
    with pytest.raises(ConfigError, match=r"broken\.json:2"):
        load_schedule(q)
    with pytest.raises(ConfigError, match="mapping"):
        r = tmp_path / "list.yaml"
        r.write_text("- 1\n- 2\n")
        load_schedule(r)
    with pytest.raises(ConfigError, match="cannot read"):
        load_schedule(tmp_path / "missing.yaml")


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "schedules").glob("*.yaml"))


def test_example_schedules_load():
    assert len(EXAMPLES) >= 3
    kinds = set()
    from rlvr_schedule_adapters._common import host_keys, with_host_values

    for p in EXAMPLES:
        spec, keys = host_keys(p)
        if keys:  # "host" values: what an adapter fills in from the Trainer at train start
            spec = with_host_values(spec, keys, batch=8, lr=1e-3)
        s = load_schedule(spec)
        kinds.add(type(s).__name__)
        assert s.current.batch >= 1 and s.current.lr > 0
    assert kinds == {"StaticSchedule", "TwoClockScheduler"}
    static = load_schedule(EXAMPLES[0].with_name("static_three_stage.yaml"))
    assert [st.batch for st in static.stages] == [128, 256, 512]
    assert static.stages[2].lr == pytest.approx(2e-6)


def test_policy_config_round_trips_through_a_schedule_dict():
    from rlvr_schedule.policy import BatchConstraints, PolicyConfig

    cfg = PolicyConfig(
        initial_batch=48,
        growth=3.0,
        detectors=["kl_blowup"],
        failure_signal="kl",
        constraints=BatchConstraints(group_size=16, divisor=3),
    )
    s = schedule_from_dict(json.loads(json.dumps({"type": "two_clock", **cfg.to_dict()})))
    assert isinstance(s, TwoClockScheduler) and s.config == cfg


def test_numeric_coercion_follows_the_dataclass_fields():
    """Counts and floats given as strings (YAML 1.1 reads 1e-6 as a string) are coerced for every
    numeric field of PolicyConfig, BatchConstraints and Stage, derived from their type hints."""
    import dataclasses

    from rlvr_schedule.policy import BatchConstraints, PolicyConfig, schedule_from_dict
    from rlvr_schedule.policy.config import _FLOAT_FIELDS, _INT_FIELDS
    from rlvr_schedule.records import Stage

    for cls in (PolicyConfig, BatchConstraints, Stage):
        for f in dataclasses.fields(cls):
            if f.name in (
                "reason",
                "constraints",
                "detectors",
                "lr_rule",
                "failure_signal",
                "switch_on_alarm",
                "track_critical_batch",
                "forecast",
                "failure_samples_interval",
            ):
                assert f.name not in _INT_FIELDS | _FLOAT_FIELDS
            else:
                assert (f.name in _INT_FIELDS) != (f.name in _FLOAT_FIELDS), f.name
    s = schedule_from_dict(
        {
            "type": "two_clock",
            "min_stage_samples": 4.0,
            "failure": {"forecast_samples": "1024"},
            "base_lr": "1e-6",
            "constraints": {"max_batch": "512"},
        }
    )
    assert s.config.min_stage_samples == 4 and s.config.forecast_samples == 1024 and s.config.base_lr == 1e-6
    assert s.config.constraints.max_batch == 512
    with pytest.raises(ConfigError, match="failure_switch_fraction") as err:  # old keys are coerced too
        schedule_from_dict({"type": "two_clock", "forecast_window": "50"})
    assert err.value.field == "forecast_window"
    s = schedule_from_dict({"type": "two_clock", "failure_threshold": "0.5"})
    assert s.config.failure_threshold == 0.5 and s.forecast.fixed_threshold == 0.5


def test_a_v2_schedule_file_is_refused_naming_the_keys_to_give(tmp_path):
    # the shipped two_clock.yaml of policy v2 (before policy v3), without comments,
    # margin 2 -> 3 (a non-default); each removed key is named with what to give instead
    v2 = (
        "type: two_clock\ninitial_batch: auto\ncritical_batch: 1024\nsample_tolerance: 0.10\n"
        "base_lr: 1.0e-6\nlr_rule: sqrt\ntrack_critical_batch: true\ntrack_step: 1.19\n"
        "failure_exponent: 0.0\ngrowth: 2.0\nmargin: 3.0\nhorizon_steps: 10\nhysteresis: 3\n"
        "min_stage_steps: 10\nmax_stages: 16\nfailure_signal: entropy\nfailure_fraction: 0.1\n"
        "detectors: [entropy_collapse, reward_crash]\nconstraints:\n  group_size: 16\n  max_batch: 8192\n"
    )
    old = tmp_path / "v2.yaml"
    for key, says, fix in (
        ("margin", "failure_switch_fraction", ("margin: 3.0\n", "")),
        ("hysteresis", "hysteresis_samples", ("hysteresis: 3\n", "hysteresis_samples: 48\n")),
        ("min_stage_steps", "min_stage_samples", ("min_stage_steps: 10\n", "min_stage_samples: 160\n")),
    ):
        old.write_text(v2)
        with pytest.raises(ConfigError, match=f"removed: .*{says}") as err:
            load_schedule(old)
        assert err.value.field == key and str(old) in str(err.value)
        v2 = v2.replace(*fix)
    old.write_text(v2)  # horizon_steps 10 (v2's own value, inert under v3) is dropped quietly
    s = load_schedule(old)
    assert (s.config.hysteresis_samples, s.config.min_stage_samples) == (48, 160)
    assert s.current.batch == 192  # 0.182 x 1024 = 186, the nearest whole groups of 16
    # a v2 file proper (failure_switch_fraction 0) is refused, pointing at the v3 forecast knobs
    old.write_text(v2 + "failure_switch_fraction: 0\n")
    with pytest.raises(ConfigError, match="forecast: off") as err:
        load_schedule(old)
    assert err.value.field in ("failure_switch_fraction", "horizon_steps")


def _old_dump() -> dict:
    """PolicyConfig().to_dict() as policy v2 wrote it (a checkpoint's config)."""
    return {
        "initial_batch": "auto", "base_lr": 1e-6, "base_batch": None, "lr_rule": "sqrt", "growth": 2.0,
        "margin": None, "horizon_steps": None, "hysteresis": 3, "min_samples_between": 0, "max_stages": 16,
        "failure_signal": "entropy", "failure_threshold": None, "failure_fraction": None,
        "forecast_window": None, "forecast_samples": 2048, "min_stage_steps": 10,
        "detectors": ["entropy_collapse", "reward_crash"], "critical_batch": None, "critical_batch_lr": None,
        "critical_fraction": None, "sample_tolerance": 0.1, "track_step": 2.0**0.25, "failure_exponent": 0.0,
        "failure_switch_fraction": 0.25, "failure_lr_exponent": 0.0, "fallback_batch": None,
        "auto_records": 100, "track_critical_batch": True, "switch_on_alarm": True,
        "constraints": {"group_size": 1, "min_batch": 1, "max_batch": None, "divisor": None},
    }  # fmt: skip


def test_an_old_saved_config_is_refused_naming_its_rollout_keys_and_the_new_one_round_trips():
    import warnings

    from rlvr_schedule.policy import PolicyConfig

    with pytest.raises(ConfigError, match="hysteresis_samples") as err:
        PolicyConfig.from_dict(_old_dump())
    assert err.value.field == "hysteresis"
    fixed = {
        k: v for k, v in _old_dump().items() if k not in ("hysteresis", "min_stage_steps", "auto_records")
    }
    with pytest.raises(ConfigError, match="estimate_samples") as err:
        PolicyConfig.from_dict(dict(fixed, auto_records=100))
    assert err.value.field == "auto_records"
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        cfg = PolicyConfig.from_dict(fixed)  # the old dump without its removed keys: quiet
        assert PolicyConfig.from_dict(cfg.to_dict()) == cfg
        assert PolicyConfig.from_dict(PolicyConfig().to_dict()) == PolicyConfig()
    assert "legacy" not in PolicyConfig().to_dict()
    # a previous version's legacy mapping: its failure_threshold is the knob now, the rest refused
    assert PolicyConfig.from_dict({"legacy": {"failure_threshold": 0.5}}).failure_threshold == 0.5
    with pytest.raises(ConfigError) as err:
        PolicyConfig.from_dict({"legacy": {"min_stage_steps": 10}})
    assert err.value.field == "min_stage_steps"
    # groups as mappings, and their mistakes named
    grouped = PolicyConfig.from_dict({"pacing": {"hysteresis_samples": 96}, "start": {"initial_batch": 64}})
    assert (grouped.hysteresis_samples, grouped.initial_batch) == (96, 64)
    with pytest.raises(ConfigError) as err:
        PolicyConfig.from_dict({"pacing": {"growth": 2.0}})
    assert err.value.field == "pacing.growth"


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("forecast_window", 50, "counted in records.*failure_switch_fraction.*forecast_samples"),
        ("horizon_steps", 4, "horizon trigger.*failure_switch_fraction"),
        ("margin", 3.0, "horizon trigger.*failure_switch_fraction"),
        ("auto_records", 20, "estimate_samples"),
        ("hysteresis", 3, "hysteresis_samples"),
        ("min_stage_steps", 10, "min_stage_samples"),
        ("failure_switch_fraction", 0, "forecast: off"),
    ],
)
def test_removed_keys_are_refused_naming_the_keys_to_give(tmp_path, key, value, says):
    old = tmp_path / "old.yaml"
    old.write_text(f"type: two_clock\ninitial_batch: 64\n{key}: {value}\n")
    with pytest.raises(ConfigError, match=says) as err:
        load_schedule(old)
    assert err.value.field == key and "old.yaml" in str(err.value)


def test_critical_fraction_and_failure_threshold_are_translated(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("type: two_clock\ninitial_batch: 64\ncritical_fraction: 0.25\n")
    with pytest.warns(
        FutureWarning, match=r"old.yaml: schedule key 'critical_fraction' is deprecated.*f / \(2 - f\)"
    ):
        s = load_schedule(old)
    assert s.config.operating_fraction == pytest.approx(0.25)
    old.write_text("type: two_clock\ninitial_batch: 64\nfailure_threshold: 0.5\n")
    s = load_schedule(old)  # an absolute collapse level: a knob, quietly
    assert s.config.failure_threshold == 0.5 and s.forecast.fixed_threshold == 0.5
    assert s.forecast.min_samples == 2048  # the v3 forecast


def test_translated_keys_give_the_same_decisions(tmp_path):
    from rlvr_schedule.policy import PolicyConfig

    with pytest.warns(FutureWarning, match="critical_fraction"):
        old = PolicyConfig.from_dict(
            {"critical_batch": 1000, "critical_fraction": 0.5, "constraints": {"group_size": 16}}
        )
    assert old.operating_fraction == 0.5 and TwoClockScheduler(old).current.batch == 496
    with pytest.warns(FutureWarning, match="min_samples_between.*min_stage_samples"):
        old = PolicyConfig.from_dict({"min_samples_between": 500})
    assert old.min_stage_samples == 500
    with pytest.raises(ConfigError) as err:
        PolicyConfig.from_dict({"min_samples_between": 500, "min_stage_samples": 200})
    assert err.value.field == "min_samples_between"
    with pytest.raises(ConfigError) as err:
        PolicyConfig.from_dict({"hysteresis": 0})
    assert err.value.field == "hysteresis"


def test_an_old_checkpoint_resumes_under_the_new_config_and_says_what_changed(caplog):
    """A state saved before items 3-4 (no rollout counters, the removed record-counted keys in its
    config) loads into the policy built from the config a user gives now (those keys replaced by
    their rollout knobs): it continues as that config's uninterrupted run and names the removed
    keys. A policy v2 state (failure_switch_fraction 0: its forecast counted records) is refused."""
    import json

    from rlvr_schedule.policy import PolicyConfig
    from rlvr_schedule.synthetic import SyntheticEnvironment

    old = dict(_old_dump(), fallback_batch=32, base_batch=64, constraints={"group_size": 8, "max_batch": 512})
    now = {k: v for k, v in old.items() if k not in ("hysteresis", "min_stage_steps", "auto_records")}
    cfg = PolicyConfig.from_dict(now)
    env = SyntheticEnvironment(critical_batch=256, failure_samples=20_000, drift=3.0, seed=1)
    run = env.run(TwoClockScheduler(cfg), 30_000)
    full = env.decisions
    assert sum(d.switched for d in full) >= 3
    recorded = json.loads((DATA / "policy_state" / "v3_states.json").read_text())["cases"][0]
    assert PolicyConfig.from_dict(recorded["config"]) == cfg  # states version 3 wrote for this config
    for k, state in recorded["states"].items():
        k = int(k)
        a = TwoClockScheduler(cfg)
        head = [a.step(r) for r in run.records[:k]]
        for key in ("streak_samples", "samples", "noise_samples"):  # what version 2 did not save
            del state[key]
        state["version"], state["config"] = 2, old
        b = TwoClockScheduler(cfg)
        caplog.clear()
        with caplog.at_level("WARNING", logger="rlvr_schedule.policy"):
            b.load_state_dict(state)
        assert "another config" in caplog.text
        assert all(key in caplog.text for key in ("hysteresis", "min_stage_steps", "auto_records"))
        assert head + [b.step(r) for r in run.records[k:]] == full
    state["config"] = dict(old, failure_switch_fraction=0.0, margin=2.0)
    with pytest.raises(ConfigError, match="policy v2.*fresh schedule state"):
        TwoClockScheduler(cfg).load_state_dict(state)


def test_a_state_saved_before_the_forecast_modes_says_its_forecast_no_longer_switches(caplog):
    """A state whose config has no ``forecast`` key was saved when the forecast switched the batch;
    resumed under today's default (advisory) it no longer does, and the warning says so."""
    from rlvr_schedule.policy import BatchConstraints, PolicyConfig

    cfg = PolicyConfig(critical_batch=1000.0, constraints=BatchConstraints(group_size=16))
    state = TwoClockScheduler(cfg).state_dict()
    del state["config"]["forecast"]
    with caplog.at_level("WARNING", logger="rlvr_schedule.policy"):
        TwoClockScheduler(cfg).load_state_dict(state)
    assert "another config (changed: forecast)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="rlvr_schedule.policy"):
        TwoClockScheduler(PolicyConfig(**{**cfg.__dict__, "forecast": "on"})).load_state_dict(state)
    assert "another config" not in caplog.text  # given `forecast: on`, it resumes as it ran
