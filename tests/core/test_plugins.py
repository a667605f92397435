"""The plugin host: entry-point discovery, fault isolation, built-in sinks."""

from __future__ import annotations

import json
import logging
import textwrap

import pytest

from rlvr_schedule.plugins import PluginHost, hookimpl
from rlvr_schedule.plugins.sinks import JsonlSink, TensorBoardSink
from rlvr_schedule.records import Decision, StepRecord


def _rec(step: int = 1, batch: int = 8) -> StepRecord:
    return StepRecord(step=step, samples=step * batch, batch=batch, lr=1e-3, reward_mean=0.5, entropy=1.2)


class Recorder:
    def __init__(self) -> None:
        self.seen: list[int] = []

    @hookimpl
    def rlvr_schedule_on_record(self, record: StepRecord) -> None:
        self.seen.append(record.step)


class Raiser:
    @hookimpl
    def rlvr_schedule_on_record(self, record: StepRecord) -> None:
        raise RuntimeError("plugin bug")

    @hookimpl
    def rlvr_schedule_metric_aliases(self):
        raise RuntimeError("cannot name")


class Namer:
    @hookimpl
    def rlvr_schedule_metric_aliases(self):
        return {"my/reward": "reward_mean"}


def test_raising_plugin_is_logged_and_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    host = PluginHost(load_entrypoints=False)
    rec = Recorder()
    host.register(rec)
    host.register(Raiser())
    with caplog.at_level(logging.ERROR, logger="rlvr_schedule.plugins"):
        host.call("rlvr_schedule_on_record", record=_rec(3))
    assert rec.seen == [3]
    assert len(host.faults) == 1 and host.faults[0][1] == "rlvr_schedule_on_record"
    assert "plugin bug" in caplog.text and "Traceback" in caplog.text


def test_strict_mode_reraises() -> None:
    host = PluginHost(strict=True, load_entrypoints=False)
    host.register(Raiser())
    with pytest.raises(RuntimeError, match="plugin bug"):
        host.call("rlvr_schedule_on_record", record=_rec())


def test_a_raising_implementation_is_skipped_and_the_others_answer() -> None:
    host = PluginHost(load_entrypoints=False)
    host.register(Namer())
    host.register(Raiser())  # registered last, so called first
    assert host.call("rlvr_schedule_metric_aliases") == [{"my/reward": "reward_mean"}]
    assert [f[1] for f in host.faults] == ["rlvr_schedule_metric_aliases"]


def test_hooks_go_through_the_relay_so_monitoring_and_wrappers_see_them() -> None:
    host = PluginHost(load_entrypoints=False)
    rec = Recorder()
    host.register(rec)
    host.register(Raiser())
    seen: list[str] = []
    host.pm.add_hookcall_monitoring(lambda name, impls, kw: seen.append(name), lambda *a: None)

    class Wrapper:
        calls = 0

        @hookimpl(wrapper=True)
        def rlvr_schedule_on_record(self, record):
            Wrapper.calls += 1
            return (yield)

    host.register(Wrapper())
    host.hook.rlvr_schedule_on_record(record=_rec(4))  # the raising plugin is isolated: no exception
    assert seen == ["rlvr_schedule_on_record"] and Wrapper.calls == 1 and rec.seen == [4]
    assert len(host.faults) == 1


def _make_dist(tmp_path, module_source: str, name: str = "rlvrplug_demo") -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(module_source))
    dist = tmp_path / f"{name}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[rlvr_schedule]\n{name} = {name}\n")


def test_entry_point_plugins_are_discovered(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    _make_dist(
        tmp_path,
        """
        from rlvr_schedule.plugins import hookimpl

        @hookimpl
        def rlvr_schedule_metric_aliases():
            return {"my/reward": "reward_mean"}
        """,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    host = PluginHost()
    assert host.pm.get_plugin("rlvrplug_demo") is not None
    assert {"my/reward": "reward_mean"} in host.call("rlvr_schedule_metric_aliases")


def test_broken_entry_point_does_not_stop_the_host(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    _make_dist(tmp_path, "raise ImportError('broken plugin module')\n", name="rlvrplug_broken")
    monkeypatch.syspath_prepend(str(tmp_path))
    host = PluginHost()
    assert any("broken plugin module" in str(f[2]) for f in host.faults)
    with pytest.raises(ImportError):
        PluginHost(strict=True)


def test_jsonl_sink_appends_records_and_decisions(tmp_path) -> None:
    path = tmp_path / "log" / "sched.jsonl"
    host = PluginHost(load_entrypoints=False)
    sink = JsonlSink(path)
    host.register(sink)
    r = _rec(1)
    host.call("rlvr_schedule_on_record", record=r)
    host.call("rlvr_schedule_on_decision", decision=Decision(1, 8, 8, 1e-3, 0), record=r)
    sink.close()
    # a second sink on the same file appends rather than truncates
    sink2 = JsonlSink(path)
    sink2.rlvr_schedule_on_record(_rec(2))
    sink2.close()
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row["kind"] for row in rows] == ["record", "decision", "record"]
    assert rows[0]["reward_mean"] == 0.5 and rows[2]["step"] == 2
    assert "kl" not in rows[0]  # unlogged metrics stay absent, not NaN


def test_tensorboard_sink_writes_real_event_files(tmp_path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    sink = TensorBoardSink(tmp_path / "tb")
    for step in range(1, 4):
        r = _rec(step)
        sink.rlvr_schedule_on_record(r)
        sink.rlvr_schedule_on_decision(Decision(step, r.samples, 16, 2e-3, 1, switched=step == 2), r)
    sink.close()
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"rlvr/reward_mean", "rlvr/samples", "rlvr/decision/batch"} <= set(tags)
    assert "rlvr/kl" not in tags
    samples = [e.value for e in acc.Scalars("rlvr/samples")]
    assert samples == [8.0, 16.0, 24.0]
