"""Fault injection on the core: corrupt, truncated and NaN-laden logs through the CLI, plugins that
raise, invalid schedule configs and foreign checkpoint states.

Every case must end in a *clear error* (CLI exit status 2 naming the file and line or field, no
traceback; or a ConfigError naming the field) or a *logged, survived fault* (a warning or a
recorded plugin fault, and the run goes on). ``CASES`` is the table that
``benchmarks/evidence/fault_table.py`` counts for docs/RESULTS.md.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlvr_schedule import cli
from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.errors import ConfigError
from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.plugins.sinks import JsonlSink
from rlvr_schedule.policy import (
    BatchConstraints,
    PolicyConfig,
    StaticSchedule,
    TwoClockScheduler,
    load_schedule,
)
from rlvr_schedule.policy.baselines import NoiseScaleAdaptiveSchedule
from rlvr_schedule.synthetic import SyntheticEnvironment, make_sweep, write_run_log


@dataclass
class Outcome:
    kind: str  # "error" (clear error) or "survived" (logged fault, run went on)
    detail: str


@dataclass
class FaultCase:
    name: str
    group: str  # "log", "plugin", "config", "state"
    expect: str  # "error" or "survived"
    run: Callable[[Path], Outcome]


# --- logs through the CLI ------------------------------------------------------------------------
def _rows(n: int = 60) -> list[dict]:
    return [
        {
            "step": i,
            "samples": 64 * i,
            "batch": 64,
            "lr": 1e-6,
            "reward_mean": 0.1 + 0.005 * i,
            "entropy": 1.0 - 0.01 * i,
        }
        for i in range(1, n + 1)
    ]


def _lines() -> list[str]:
    return [json.dumps(r) for r in _rows()]


def _cli(argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr); warnings are added to stderr as the CLI prints them (pytest's
    own warning capture would otherwise take them)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always")
        rc = cli.main(argv)
    text = "".join(f"warning: {w.message}\n" for w in caught) + err.getvalue()
    return rc, out.getvalue(), text


def _log_case(
    name: str, body: str | bytes, expect: str, needle: str, *, suffix: str = ".jsonl", command: str = "fit"
) -> FaultCase:
    """Write ``body`` as a log, run ``rlvr-schedule <command>``; the message must name ``needle``."""

    def run(tmp: Path) -> Outcome:
        p = tmp / f"{name}{suffix}"
        p.write_bytes(body if isinstance(body, bytes) else body.encode())
        args = [command, str(p)] + (["--json"] if command in ("fit", "plan") else [])
        rc, out, err = _cli(args)
        assert "Traceback" not in err
        msg = err.strip().splitlines()
        if expect == "error":
            assert rc == 2, (rc, err)
            assert p.name in err and needle in err, err
            return Outcome("error", msg[-1])
        assert rc == 0, (rc, err)
        assert "warning:" in err and needle in err, err
        json.loads(out)  # the result is still produced
        return Outcome("survived", msg[0])

    return FaultCase(name, "log", expect, run)


def _nan_every_third() -> str:
    return (
        "\n".join(
            ln.replace('"reward_mean": ', '"reward_mean": NaN, "x_": ') if i % 3 == 0 else ln
            for i, ln in enumerate(_lines())
        )
        + "\n"
    )


def _csv(rows: list[dict]) -> str:
    keys = list(rows[0])
    return "\n".join([",".join(keys)] + [",".join(str(r[k]) for k in keys) for r in rows]) + "\n"


GOOD = "\n".join(_lines()) + "\n"
LOG_CASES = [
    _log_case(
        "corrupt_middle_line", "\n".join(_lines()[:30] + ["{not json"] + _lines()[30:]) + "\n", "error", ":31"
    ),
    _log_case("truncated_last_line", GOOD[:-25], "survived", "truncated last line"),
    _log_case("empty_file", "", "error", "no records"),
    _log_case("binary_garbage", bytes(range(256)) * 4, "error", "not UTF-8"),
    _log_case("rows_not_objects", "[1, 2, 3]\n" * 5, "error", ":1"),
    _log_case("nan_rewards", _nan_every_third(), "survived", "non-finite"),
    _log_case(
        "infinite_entropy",
        "\n".join(
            ln.replace('"entropy": ', '"entropy": Infinity, "y_": ') if i == 10 else ln
            for i, ln in enumerate(_lines())
        )
        + "\n",
        "survived",
        ":11",
    ),
    _log_case(
        "all_rewards_null",
        "\n".join(json.dumps({**r, "reward_mean": None}) for r in _rows()) + "\n",
        "error",
        "reward_mean",
    ),
    _log_case(
        "string_reward",
        "\n".join(
            json.dumps({**r, "reward_mean": "high"}) if r["step"] == 6 else json.dumps(r) for r in _rows()
        )
        + "\n",
        "error",
        ":6",
    ),
    _log_case(
        "negative_batch",
        "\n".join(json.dumps({**r, "batch": -64}) for r in _rows()) + "\n",
        "error",
        "'batch'",
    ),
    _log_case(
        "repeated_steps_resumed_run",
        "\n".join(_lines()[:20] + _lines()[10:]) + "\n",
        "survived",
        "logged again",
    ),
    _log_case(
        "csv_bad_cell", _csv(_rows()).replace("\n11,704,64,", "\n11,704,abc,"), "error", ":12", suffix=".csv"
    ),
    _log_case(
        "plan_corrupt_line",
        "\n".join(_lines()[:5] + ['{"step": 6, '] + _lines()[5:]) + "\n",
        "error",
        ":6",
        command="plan",
    ),
]


def _sweep_case(name: str, corrupt: Callable[[str], str], expect: str, needle: str, names: str) -> FaultCase:
    """A synthetic sweep (batches 64, 128, 256) in ``names``' vocabulary through ``rlvr-schedule plan``,
    with the batch-64 log corrupted by ``corrupt``."""

    def run(tmp: Path) -> Outcome:
        runs = make_sweep([64, 128, 256], critical_batch=256, failure_samples=20_000, seed=3)
        paths = [Path(write_run_log(tmp / f"{name}_b{r.batch}.jsonl", r, names)) for r in runs]
        paths[0].write_text(corrupt(paths[0].read_text()))
        rc, out, err = _cli(["plan", *map(str, paths), "--json"])
        assert "Traceback" not in err
        if expect == "error":
            assert rc == 2 and paths[0].name in err and needle in err, (rc, err)
            return Outcome("error", err.strip().splitlines()[-1])
        assert rc == 0 and "warning:" in err and needle in err, (rc, err)
        assert json.loads(out)["stages"]
        return Outcome("survived", err.strip().splitlines()[0])

    return FaultCase(name, "log", expect, run)


def _nan_lines(text: str, every: int = 4) -> str:
    ls = text.splitlines()
    out = []
    for i, ln in enumerate(ls):
        if i % every == 1:
            d = json.loads(ln)
            d = {k: (float("nan") if isinstance(v, float) and k not in ("lr",) else v) for k, v in d.items()}
            ln = json.dumps(d)
        out.append(ln)
    return "\n".join(out) + "\n"


LOG_CASES += [
    _sweep_case(
        "plan_truncated_last_line", lambda t: t[:-30], "survived", "truncated last line", "canonical"
    ),
    _sweep_case("plan_trl_names_nan_quarter", _nan_lines, "survived", "non-finite", "trl"),
    _sweep_case(
        "plan_verl_names_corrupt_line",
        lambda t: "\n".join(t.splitlines()[:40] + ["\x00\x00garbage"] + t.splitlines()[40:]),
        "error",
        ":41",
        "verl",
    ),
    _sweep_case(
        "plan_killed_mid_write_then_resumed",
        lambda t: t[: len(t) // 2 - 7] + "\n" + t[len(t) // 2 :],
        "error",
        "not valid JSON",
        "canonical",
    ),
]


def _missing_path(tmp: Path) -> Outcome:
    rc, _, err = _cli(["fit", str(tmp / "nope.jsonl")])
    assert rc == 2 and "nope.jsonl" in err and "Traceback" not in err, err
    return Outcome("error", err.strip().splitlines()[-1])


def _empty_dir(tmp: Path) -> Outcome:
    d = tmp / "tb_empty"
    d.mkdir()
    rc, _, err = _cli(["fit", str(d)])
    assert rc == 2 and "tb_empty" in err, err
    return Outcome("error", err.strip().splitlines()[-1])


LOG_CASES += [
    FaultCase("missing_file", "log", "error", _missing_path),
    FaultCase("empty_log_directory", "log", "error", _empty_dir),
]


# --- invalid schedule configs (through `rlvr-schedule simulate --schedule` and load_schedule) ---------
def _config_case(name: str, text: str, needle: str, suffix: str = ".yaml") -> FaultCase:
    def run(tmp: Path) -> Outcome:
        p = tmp / f"{name}{suffix}"
        p.write_text(text)
        rc, _, err = _cli(["simulate", "--schedule", str(p), "--max-samples", "2000", "--constant"])
        assert rc == 2 and "Traceback" not in err, (rc, err)
        assert p.name in err and needle in err, err
        with pytest.raises(ConfigError):
            load_schedule(p)
        return Outcome("error", err.strip().splitlines()[-1])

    return FaultCase(name, "config", "error", run)


CONFIG_CASES = [
    _config_case("unknown_type", "type: cosine\nstages: []\n", "'type'"),
    _config_case(
        "stage_without_batch",
        "stages:\n  - {lr: 1.0e-6, until_samples: 100}\n  - {batch: 64, lr: 1.0e-6}\n",
        "stages[0].batch",
    ),
    _config_case("negative_lr", "stages:\n  - {batch: 64, lr: -1.0}\n", "stages[0].lr"),
    _config_case(
        "until_samples_decrease",
        "stages:\n  - {batch: 64, lr: 1.0e-6, until_samples: 500}\n"
        "  - {batch: 128, lr: 1.0e-6, until_samples: 400}\n  - {batch: 256, lr: 1.0e-6}\n",
        "stages[1].until_samples",
    ),
    _config_case(
        "open_stage_not_last",
        "stages:\n  - {batch: 64, lr: 1.0e-6, until_samples: null}\n  - {batch: 128, lr: 1.0e-6}\n",
        "stages[0].until_samples",
    ),
    _config_case(
        "batch_not_multiple_of_group",
        "constraints: {group_size: 8}\nstages:\n  - {batch: 60, lr: 1.0e-6}\n",
        "stages[0].batch",
    ),
    _config_case("yaml_syntax_error", "stages:\n  - {batch: 64, lr: 1.0e-6\n  - oops: [\n", ":"),
    _config_case("json_syntax_error", '{"stages": [{"batch": 64,, "lr": 1e-6}]}', ":1", suffix=".json"),
    _config_case("top_level_list", "- {batch: 64, lr: 1.0e-6}\n", "mapping"),
    _config_case("two_clock_unknown_key", "type: two_clock\ngrowht: 2.0\n", "'growht'"),
    _config_case("two_clock_growth_not_above_1", "type: two_clock\ngrowth: 1.0\n", "'growth'"),
    _config_case(
        "two_clock_fraction_wrong_side",
        "type: two_clock\nfailure_signal: entropy\nfailure_fraction: 3\n",
        "'failure_fraction'",
    ),
    _config_case(
        "constraints_max_below_min",
        "type: two_clock\nconstraints: {min_batch: 64, max_batch: 32}\n",
        "constraints.max_batch",
    ),
    _config_case("count_not_integral", "type: two_clock\nhysteresis_samples: 2.5\n", "'hysteresis_samples'"),
    _config_case("number_as_word", "stages:\n  - {batch: sixty-four, lr: 1.0e-6}\n", "stages[0].batch"),
]


# --- plugins that raise ----------------------------------------------------------------------------
def _env() -> SyntheticEnvironment:
    return SyntheticEnvironment(critical_batch=256, failure_samples=20_000, drift=3.0, seed=7)


def _policy(host: PluginHost | None = None) -> TwoClockScheduler:
    return TwoClockScheduler(
        PolicyConfig(
            initial_batch="auto",
            fallback_batch=32,
            base_batch=64,
            base_lr=1e-6,
            constraints=BatchConstraints(group_size=8),
        ),
        detectors=host.failure_detectors() if host is not None else (),
    )


def _driven(host: PluginHost, apply: Callable[[int, float], bool]) -> ScheduleDriver:
    """The policy under a driver, as a host runs it (the synthetic task applies every decision)."""
    sched = _policy(host)
    return ScheduleDriver(sched, apply, host, in_effect=(sched.current.batch, sched.current.lr))


def _baseline_decisions() -> list:
    env = _env()
    env.run(_policy(), 30_000)
    return env.decisions


class _Flaky:
    """Raises in ``hook`` on every ``every``-th call (1: always)."""

    def __init__(self, every: int) -> None:
        self.every, self.n = every, 0

    def _maybe(self) -> None:
        self.n += 1
        if self.n % self.every == 0:
            raise RuntimeError(f"injected fault #{self.n}")


def _plugin_case(
    name: str,
    plugin_factory: Callable[[Path], object],
    hook: str,
    *,
    same_decisions: bool,
    switches: bool = True,
) -> FaultCase:
    """Drive the policy with a faulty plugin (or a faulty host ``apply``, a plugin with ``apply``);
    faults are recorded and logged, the run completes; ``same_decisions``: the decisions match the
    run without the plugin."""

    def run(tmp: Path) -> Outcome:
        host = PluginHost(load_entrypoints=False)
        plugin = plugin_factory(tmp)
        apply = getattr(plugin, "apply", None) or (lambda b, lr: True)
        host.register(plugin, name=name)
        env = _env()
        handler = _Capture()
        logging.getLogger("rlvr_schedule").addHandler(handler)
        try:
            run_ = env.run(_driven(host, apply), 30_000)
        finally:
            logging.getLogger("rlvr_schedule").removeHandler(handler)
        assert run_.records[-1].samples >= 30_000  # the run went on to the end
        hooks = {h for _, h, _ in host.faults}
        assert host.faults and hook in hooks, hooks
        assert handler.count >= 1  # logged with the traceback
        n_sw = sum(d.switched for d in env.decisions)
        if same_decisions:
            assert env.decisions == _baseline_decisions()
        if switches:
            assert n_sw >= 1
        else:
            assert n_sw == 0
        return Outcome(
            "survived",
            f"{len(host.faults)} faults in {sorted(hooks)} logged; {n_sw} switches"
            + (", decisions as without the plugin" if same_decisions else ""),
        )

    return FaultCase(name, "plugin", "survived", run)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


class _FlakyObserver(_Flaky):
    @hookimpl
    def rlvr_schedule_on_record(self, record):
        self._maybe()


class _RaisingOnDecision(_Flaky):
    @hookimpl
    def rlvr_schedule_on_decision(self, decision, record):
        self._maybe()


class _RaisingApply(_Flaky):
    """A host whose ``apply`` raises (the driver's callback, not a hook)."""

    def apply(self, batch, lr):
        self._maybe()
        return True


def _dead_sink(tmp: Path) -> JsonlSink:
    """A sink whose file is gone (closed): every write raises, as on a lost disk."""
    sink = JsonlSink(tmp / "sink.jsonl")
    sink.close()
    return sink


class _RaisingDetectorHook:
    @hookimpl
    def rlvr_schedule_failure_detectors(self):
        raise ValueError("cannot build detectors")


class _BadDetector(_Flaky):
    name = "bad_detector"

    def update(self, record):
        self._maybe()


class _FlakyDetectorPlugin:
    def __init__(self, every: int) -> None:
        self.det = _BadDetector(every)

    @hookimpl
    def rlvr_schedule_failure_detectors(self):
        return [self.det]


class _GarbageDetectorPlugin:
    @hookimpl
    def rlvr_schedule_failure_detectors(self):
        return [object()]  # no update(): every call raises AttributeError


PLUGIN_CASES = [
    _plugin_case(
        "observer_raises_every_7th_record",
        lambda t: _FlakyObserver(7),
        "rlvr_schedule_on_record",
        same_decisions=True,
    ),  # policy v2: an observer fault is only logged
    _plugin_case(
        "on_decision_always_raises",
        lambda t: _RaisingOnDecision(1),
        "rlvr_schedule_on_decision",
        same_decisions=True,
    ),
    _plugin_case(
        "apply_always_raises", lambda t: _RaisingApply(1), "apply", same_decisions=False, switches=False
    ),
    _plugin_case("apply_raises_once_in_3", lambda t: _RaisingApply(3), "apply", same_decisions=False),
    _plugin_case(
        "failure_detectors_hook_raises",
        lambda t: _RaisingDetectorHook(),
        "rlvr_schedule_failure_detectors",
        same_decisions=True,
    ),
    _plugin_case(
        "detector_update_raises_every_5th", lambda t: _FlakyDetectorPlugin(5), "update", same_decisions=False
    ),
    _plugin_case(
        "detector_without_update",
        lambda t: _GarbageDetectorPlugin(),
        "update",
        same_decisions=False,
        switches=False,
    ),
    _plugin_case(
        "jsonl_sink_loses_its_file", _dead_sink, "rlvr_schedule_on_record", same_decisions=True
    ),  # policy v2: a dead sink no longer freezes the schedule
]


def _sink_on_directory(tmp: Path) -> Outcome:
    with pytest.raises(IsADirectoryError) as e:
        JsonlSink(tmp)
    assert str(tmp) in str(e.value)
    return Outcome("error", f"IsADirectoryError: {e.value}")


PLUGIN_CASES.append(FaultCase("jsonl_sink_path_is_a_directory", "plugin", "error", _sink_on_directory))


# --- checkpoint states --------------------------------------------------------------------------
def _state_case(name: str, make: Callable[[], object], state: Callable[[], dict], needle: str) -> FaultCase:
    def run(tmp: Path) -> Outcome:
        sched = make()
        with pytest.raises((ConfigError, KeyError, TypeError, ValueError)) as e:
            sched.load_state_dict(state())
        assert needle in str(e.value), str(e.value)
        return Outcome("error", f"{type(e.value).__name__}: {e.value}")

    return FaultCase(name, "state", "error", run)


def _static() -> StaticSchedule:
    return StaticSchedule([{"batch": 64, "lr": 1e-6, "until_samples": 1000}, {"batch": 128, "lr": 1.4e-6}])


STATE_CASES = [
    _state_case(
        "two_clock_state_into_static", _static, lambda: _policy().state_dict(), "not a StaticSchedule"
    ),
    _state_case(
        "static_state_of_other_stages",
        _static,
        lambda: StaticSchedule([{"batch": 32, "lr": 1e-6}]).state_dict(),
        "different schedule",
    ),
    _state_case(
        "static_index_out_of_range", _static, lambda: {**_static().state_dict(), "index": 9}, "out of range"
    ),
    _state_case(
        "adaptive_state_of_other_cost_model",
        lambda: NoiseScaleAdaptiveSchedule(32, base_lr=1e-6, t0=1.0, t1=0.1),
        lambda: NoiseScaleAdaptiveSchedule(32, base_lr=1e-6, t0=2.0, t1=0.1).state_dict(),
        "t0",
    ),
    _state_case(
        "two_clock_state_without_stages",
        _policy,
        lambda: {**_policy().state_dict(), "stages": []},
        "at least one stage",
    ),
]

CASES: list[FaultCase] = LOG_CASES + CONFIG_CASES + PLUGIN_CASES + STATE_CASES


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fault_is_a_clear_error_or_a_logged_survived_fault(case: FaultCase, tmp_path: Path) -> None:
    out = case.run(tmp_path)
    assert out.kind == case.expect, out


def test_every_group_is_covered() -> None:
    assert {c.group for c in CASES} == {"log", "config", "plugin", "state"}
    assert len({c.name for c in CASES}) == len(CASES)
