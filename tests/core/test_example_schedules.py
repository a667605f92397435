"""The schedule files in examples/schedules load without a warning, and each two-clock file shows
PolicyConfig's defaults: every key it sets equals the default, except the keys its ``# changed:`` line
names, which differ from it."""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

from rlvr_schedule.policy import PolicyConfig, load_schedule, read_config
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.policy_config import GROUPS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "schedules"
FILES = sorted(p.name for p in EXAMPLES.glob("*.y*ml"))
#: The launchers' schedules: the verl file, and the OpenRLHF script's here-document (its shell
#: expansions filled with the script's defaults: group 8, 8 GPUs).
LAUNCHERS = ["../verl_qwen_math_two_clock.yaml", "../openrlhf_qwen_math_two_clock.sh"]


def _schedule_file(name: str, tmp_path: Path) -> Path:
    path = EXAMPLES / name
    if path.suffix != ".sh":
        return path
    text = path.read_text()
    body = text.split("<<YAML\n", 1)[1].split("\nYAML\n", 1)[0]
    body = body.replace("${GROUP}", "8").replace("$((GPUS * 4))", "32")
    assert "$" not in body, f"{name}: an unfilled shell expansion in the schedule"
    head = "\n".join(ln for ln in text.splitlines() if ln.startswith("# changed:"))
    out = tmp_path / "schedule.yaml"
    out.write_text(head + "\n" + body + "\n")
    return out


def _settings(spec: dict[str, Any]) -> dict[str, Any]:
    """The file's PolicyConfig fields, a group written as a mapping flattened."""
    out = {}
    for k, v in spec.items():
        if k in GROUPS and k != "constraints" and isinstance(v, dict):
            out.update(v)
        elif k != "type":
            out[k] = v
    return out


def _same(value: Any, default: Any) -> bool:
    if isinstance(default, BatchConstraints):
        return BatchConstraints(**(value or {})) == default
    if isinstance(default, tuple):
        return tuple(value) == default
    if isinstance(default, float) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return math.isclose(value, default, rel_tol=1e-4)
    return bool(value == default)


def _changed(path: Path) -> set[str]:
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("# changed:")]
    assert len(lines) <= 1, path
    return set(lines[0].split(":", 1)[1].split()) if lines else set()


def test_the_examples_are_there():
    assert {"two_clock.yaml", "two_clock_auto.yaml", "static_three_stage.yaml"} <= set(FILES)


@pytest.mark.parametrize("name", FILES + LAUNCHERS)
def test_every_example_loads_without_a_warning(name, tmp_path):
    from rlvr_schedule_adapters._common import host_keys, with_host_values

    spec, keys = host_keys(_schedule_file(name, tmp_path))
    if keys:  # what an adapter fills in at train start: the host's batch and LR
        spec = with_host_values(spec, keys, batch=8, lr=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a legacy key (sample_tolerance) warns: none is left
        load_schedule(spec)


@pytest.mark.parametrize(
    "name", [n for n in FILES if read_config(EXAMPLES / n).get("type") == "two_clock"] + LAUNCHERS
)
def test_a_two_clock_example_shows_the_defaults_it_claims(name, tmp_path):
    path = _schedule_file(name, tmp_path)
    spec = _settings(read_config(path))
    changed = _changed(path)
    defaults = PolicyConfig()
    fields = {f.name for f in dataclasses.fields(PolicyConfig)}
    assert changed <= set(spec), f"{name}: '# changed:' names keys the file does not set"
    assert set(spec) <= fields, set(spec) - fields
    assert "sample_tolerance" not in spec  # the operating batch comes from the price
    for key, value in spec.items():
        default = getattr(defaults, key)
        if key in changed:
            assert not _same(value, default), f"{name}: {key} is the default; drop it from '# changed:'"
        else:
            assert _same(value, default), f"{name}: {key} = {value!r}, the default is {default!r}"
