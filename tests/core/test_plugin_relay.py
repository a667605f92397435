"""The plugin relay: a faulty plugin is one log line a fault, named, with its traceback once; what
hooks and detectors return is checked; sys.exit is contained; a detector faulting on every record
is taken out with one warning."""

from __future__ import annotations

import logging

import pytest

from benchmarks.fixtures.faults import _driven, _env
from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.plugins.manager import MAX_DETECTOR_FAULTS


class _AlwaysRaises:
    name = "always_raises"

    def update(self, record):
        raise RuntimeError("broken detector")


class _Detectors:
    def __init__(self, *dets) -> None:
        self.dets = list(dets)

    @hookimpl
    def rlvr_schedule_failure_detectors(self):
        return self.dets


class _ObserverRaises:
    @hookimpl
    def rlvr_schedule_on_record(self, record):
        raise ValueError("observer down")


def _run(host: PluginHost, caplog, samples: int = 30_000):
    env = _env()
    with caplog.at_level(logging.DEBUG, logger="rlvr_schedule"):
        env.run(_driven(host, lambda b, lr: True), samples)
    return env


def test_each_fault_is_one_line_with_the_traceback_once(caplog) -> None:
    host = PluginHost(load_entrypoints=False)
    host.register(_ObserverRaises(), name="obs")
    env = _run(host, caplog)
    n = len(env.decisions)
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == n == len(host.faults)  # one line per faulted record
    assert all("'obs'" in r.getMessage() and "observer down" in r.getMessage() for r in errors)
    assert sum(r.exc_info is not None for r in errors) == 1  # the traceback once
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info is not None]
    assert len(debug) == n - 1  # then at DEBUG


def test_a_plugin_registered_without_a_name_is_named_by_its_class(caplog) -> None:
    host = PluginHost(load_entrypoints=False)
    host.register(_ObserverRaises())
    _run(host, caplog, 2_000)
    assert host.faults[0][0] == "_ObserverRaises (registered without a name)"


def test_a_detector_faulting_on_every_record_is_taken_out_with_one_warning(caplog) -> None:
    host = PluginHost(load_entrypoints=False)
    host.register(_Detectors(_AlwaysRaises()), name="dets")
    env = _run(host, caplog)
    assert len(host.faults) == MAX_DETECTOR_FAULTS  # then no more calls
    warned = [r.getMessage() for r in caplog.records if "taken out" in r.getMessage()]
    assert len(warned) == 1 and "loses its alarms" in warned[0] and "'always_raises'" in warned[0]
    assert sum(d.switched for d in env.decisions) >= 1  # the schedule switches again


def test_what_a_hook_or_detector_returns_is_checked(caplog) -> None:
    class Strings:
        name = "strings"

        def update(self, record):
            return "alarm!"

    host = PluginHost(load_entrypoints=False)
    host.register(_Detectors(Strings()), name="dets")
    env = _run(host, caplog)
    assert not any("strings" in d.reason for d in env.decisions)  # never read as an alarm
    assert "returned a wrong type" in caplog.text and "expected None or an alarm" in caplog.text

    class Number:
        @hookimpl
        def rlvr_schedule_failure_detectors(self):
            return 3

    host = PluginHost(load_entrypoints=False)
    host.register(Number(), name="number")
    assert host.failure_detectors() == []
    assert host.faults[0][:2] == ("number", "rlvr_schedule_failure_detectors")


def test_sys_exit_in_a_hook_is_contained(caplog) -> None:
    class Exits:
        @hookimpl
        def rlvr_schedule_on_decision(self, decision, record):
            raise SystemExit(0)

    host = PluginHost(load_entrypoints=False)
    host.register(Exits(), name="exits")
    env = _run(host, caplog, 4_000)
    assert env.decisions and all(isinstance(e, SystemExit) for _, _, e in host.faults)
    assert "exited (sys.exit(0))" in caplog.text


def test_strict_hosts_still_raise() -> None:
    host = PluginHost(load_entrypoints=False, strict=True)
    host.register(_Detectors(_AlwaysRaises()), name="dets")
    (det,) = host.failure_detectors()
    with pytest.raises(RuntimeError, match="broken detector"):
        det.update(object())
