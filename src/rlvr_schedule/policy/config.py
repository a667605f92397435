"""Schedules from YAML or JSON files.

Two kinds, told apart by ``type`` (default: "static" when ``stages`` is present)::

    # static: batch and lr per stage; a stage without lr gets base_lr scaled by lr_rule
    type: static
    constraints: {group_size: 8}
    base_lr: 1.0e-6
    base_batch: 256
    lr_rule: sqrt
    stages:
      - {batch: 256, until_samples: 200000}
      - {batch: 1024, until_samples: null}

    # two_clock: the fields of PolicyConfig, at the top level or by group
    type: two_clock
    initial_batch: auto
    critical_batch: 900
    base_lr: 1.0e-6
    pacing: {hysteresis_samples: 48, min_stage_samples: 160}
    constraints: {group_size: 8, max_batch: 4096}

Every invalid case raises :class:`~rlvr_schedule.errors.ConfigError` naming the file and the
field (``stages[1].until_samples``). Numbers written as strings (YAML 1.1 reads ``1e-6`` as a
string) are accepted; counts must be integral. A key given twice in one mapping is an error naming
both lines (YAML and JSON would otherwise keep the last silently); YAML merge keys (``<<: *base``)
are not duplicates. A schedule file is a regular file of at most :data:`MAX_SCHEDULE_BYTES` (a FIFO,
a device or a larger file is refused before it is parsed).
"""

from __future__ import annotations

import json
import math
import re
import typing
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy.constraints import BatchConstraints
from rlvr_schedule.policy.legacy import OLD_COUNTS, OLD_FLOATS
from rlvr_schedule.policy.policy_config import GROUPS, PolicyConfig
from rlvr_schedule.policy.scheduler import TwoClockScheduler
from rlvr_schedule.policy.static import StaticSchedule
from rlvr_schedule.records import BatchSchedule, Stage
from rlvr_schedule.theory.scaling import RULES, lr_for_batch

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.plugins import PluginHost

__all__ = ["load_schedule", "read_config", "schedule_from_dict"]

#: A schedule is a few hundred bytes; 1 MiB leaves room for any hand-written or generated one.
MAX_SCHEDULE_BYTES = 2**20

TYPES = ("static", "two_clock")
_STATIC_KEYS = ("type", "stages", "constraints", "base_lr", "base_batch", "lr_rule")
_STAGE_KEYS = ("batch", "lr", "until_samples")


def _numeric_fields(*classes: type) -> tuple[frozenset[str], frozenset[str]]:
    """(count fields, float fields) of dataclasses, from their type hints: a field typed with
    ``float`` (alone or in a union) is a float field, one with ``int`` and no ``float`` a count."""
    ints: set[str] = set()
    floats: set[str] = set()
    for cls in classes:
        for name, tp in typing.get_type_hints(cls).items():
            args = set(typing.get_args(tp)) or {tp}
            if float in args:
                floats.add(name)
            elif int in args:
                ints.add(name)
    return frozenset(ints), frozenset(floats)


#: What numeric strings and integral floats are coerced to, per key: the fields of the config classes
#: (static files use Stage's fields and PolicyConfig's base_lr / base_batch).
_INT_FIELDS, _FLOAT_FIELDS = _numeric_fields(PolicyConfig, BatchConstraints, Stage)
_INT_FIELDS |= OLD_COUNTS  # old files' keys (PolicyConfig.from_dict translates or refuses them)
_FLOAT_FIELDS |= OLD_FLOATS
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


#: Keys bounded by :mod:`rlvr_schedule.bounds` (a batch, an LR) in any schedule file.
_BATCH_KEYS = frozenset(
    {
        "batch",
        "initial_batch",
        "base_batch",
        "critical_batch",
        "fallback_batch",
        "failure_batch",
        "max_batch",
        "min_batch",
        "group_size",
        "divisor",
    }
)
_LR_KEYS = frozenset({"lr", "base_lr", "critical_batch_lr", "failure_lr"})


def _bounded(key: str, value: Any, field: str, source: str | None) -> None:
    from rlvr_schedule.bounds import MAX_BATCH, MAX_LR, WHY

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if key in _BATCH_KEYS and value > MAX_BATCH:
        raise ConfigError(f"must be {WHY['batch']}, got {value!r}", source=source, field=field)
    if key in _LR_KEYS and value > MAX_LR:
        raise ConfigError(f"must be {WHY['lr']}, got {value!r}", source=source, field=field)


def _coerce(key: str, value: Any, field: str, source: str | None) -> Any:
    """Numeric strings to numbers; integral floats to ints for count fields; bounds checked."""
    if (
        isinstance(value, str)
        and (key in _INT_FIELDS or key in _FLOAT_FIELDS)
        and _NUMBER.match(value.strip())
    ):
        value = float(value)
    _bounded(key, value, field, source)
    if key in _INT_FIELDS and isinstance(value, float):
        if not (math.isfinite(value) and value == int(value)):
            raise ConfigError(f"must be an integer, got {value!r}", source=source, field=field)
        value = int(value)
    elif key in _FLOAT_FIELDS and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    return value


def _coerce_map(d: Mapping[str, Any], prefix: str, source: str | None) -> dict[str, Any]:
    return {k: _coerce(k, v, prefix + str(k), source) for k, v in d.items()}


def _read_text(p: Path) -> str:
    """The file's text: a regular file, at most MAX_SCHEDULE_BYTES, UTF-8 (else ConfigError)."""
    from rlvr_schedule.errors import IngestError
    from rlvr_schedule.ingest.textio import check_regular

    src = str(p)
    try:
        check_regular(p, "schedule")
        if p.is_dir():
            raise ConfigError("is a directory, not a schedule file", source=src)
        with open(p, "rb") as fh:
            raw = fh.read(MAX_SCHEDULE_BYTES + 1)
    except IngestError as exc:
        raise ConfigError(
            f"cannot read schedule file: {str(exc).removeprefix(src + ': ')}", source=src
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read schedule file: {exc.strerror or exc}", source=src) from None
    if len(raw) > MAX_SCHEDULE_BYTES:
        raise ConfigError(f"larger than {MAX_SCHEDULE_BYTES} bytes: not a schedule file", source=src)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"not UTF-8 text ({exc.reason} at byte {exc.start})", source=f"{src}:{line}"
        ) from None


def _json_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    dup = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
    if dup is not None:
        raise _DuplicateKey(dup)
    return dict(pairs)


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _json_duplicate_lines(text: str) -> tuple[str, int, int] | None:
    """``(key, first line, second line)`` of the first key given twice in one JSON object."""
    stack: list[dict[str, int]] = []
    i, n, line = 0, len(text), 1
    expect_key = False
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        elif c == "{":
            stack.append({})
            expect_key = True
        elif c == "}":
            stack.pop() if stack else None
        elif c == "[":
            stack.append({"": -1})  # a list: no keys
            expect_key = False
        elif c == "]":
            stack.pop() if stack else None
        elif c == ",":
            expect_key = bool(stack) and "" not in stack[-1]
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            word = text[i + 1 : j]
            if expect_key and stack:
                if word in stack[-1]:
                    return word, stack[-1][word], line
                stack[-1][word] = line
            expect_key = False
            line += text.count("\n", i, j)
            i = j
        i += 1
    return None


def _yaml_loader():  # the SafeLoader, refusing a key given twice in one mapping
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _ in node.value:  # the keys written here; a merge key's (<<) may be overridden
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = key_node.value if isinstance(key_node, yaml.ScalarNode) else id(key_node)
                    if key in seen:
                        raise ConfigError(
                            f"key {key!r} given twice (lines {seen[key]} and {key_node.start_mark.line + 1}; "
                            "YAML would keep the last silently)",
                            source=f"{self.name}:{key_node.start_mark.line + 1}",
                        )
                    seen[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    return Loader


def read_config(path: str | Path) -> dict[str, Any]:
    """Parse a YAML (``.yaml``/``.yml``) or JSON file into a mapping; errors say file and line."""
    p = Path(path)
    src = str(p)
    text = _read_text(p)
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text, object_pairs_hook=_json_pairs)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"invalid JSON: {exc.msg} (column {exc.colno})", source=f"{src}:{exc.lineno}"
            ) from exc
        except RecursionError:
            raise ConfigError("JSON nested too deeply to read", source=src) from None
        except _DuplicateKey as exc:
            dup_at = _json_duplicate_lines(text)
            key, first, second = dup_at if dup_at is not None else (exc.key, 0, 0)
            lines = f"lines {first} and {second}; " if first else ""
            raise ConfigError(
                f"key {key!r} given twice ({lines}JSON would keep the last silently)",
                source=f"{src}:{second}" if second else src,
            ) from None
    else:
        import yaml  # lazy: the core imports with numpy alone

        try:
            loader = _yaml_loader()(text)
            loader.name = src
            try:
                data = loader.get_single_data()
            finally:
                loader.dispose()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{src}:{mark.line + 1}" if mark is not None else src
            raise ConfigError(f"invalid YAML: {getattr(exc, 'problem', None) or exc}", source=where) from exc
        except RecursionError:
            raise ConfigError("YAML nested too deeply to read", source=src) from None
    if not isinstance(data, dict):
        raise ConfigError(f"the top level must be a mapping, got {type(data).__name__}", source=src)
    return data


def load_schedule(
    path: str | Path | Mapping[str, Any], *, plugins: PluginHost | None = None
) -> BatchSchedule:
    """A :class:`StaticSchedule` or :class:`TwoClockScheduler` from a YAML or JSON file, or from the
    same config as a mapping (what the adapters' callbacks take too).

    ``plugins``: the two-clock policy also runs the plugins' failure detectors (fault-isolated)."""
    if isinstance(path, Mapping):
        return schedule_from_dict(path, source="<schedule mapping>", plugins=plugins)
    return schedule_from_dict(read_config(path), source=str(path), plugins=plugins)


def schedule_from_dict(
    d: Mapping[str, Any], *, source: str | None = None, plugins: PluginHost | None = None
) -> BatchSchedule:
    """A schedule from a config mapping (the parsed file); ConfigError names source and field.

    ``plugins``: the two-clock policy also runs the plugins' failure detectors (fault-isolated)."""
    if not isinstance(d, Mapping):
        raise ConfigError(f"must be a mapping, got {type(d).__name__}", source=source)
    kind = d.get("type", "static" if "stages" in d else None)
    if kind not in TYPES:
        raise ConfigError(
            f"must be one of {', '.join(TYPES)} (or give 'stages' for a static schedule), got {kind!r}",
            source=source,
            field="type",
        )
    if kind == "static":
        return _static(d, source)
    body = {k: v for k, v in d.items() if k != "type"}
    for group in GROUPS:  # constraints, and any group given as a mapping
        if isinstance(body.get(group), Mapping):
            body[group] = _coerce_map(body[group], f"{group}.", source)
    config = PolicyConfig.from_dict(_coerce_map(body, "", source), source=source)
    said = config.tolerance_warning()
    if said is not None:  # an older file's fixed fraction keeps working, priced in the warning
        warnings.warn(f"{source or 'schedule'}: {said}", UserWarning, stacklevel=2)
    return TwoClockScheduler(config, detectors=plugins.failure_detectors() if plugins is not None else ())


def _static(d: Mapping[str, Any], source: str | None) -> StaticSchedule:
    for k in d:
        if k not in _STATIC_KEYS:
            raise ConfigError(
                f"unknown key for a static schedule (allowed: {', '.join(_STATIC_KEYS)})",
                source=source,
                field=str(k),
            )
    top = _coerce_map({k: v for k, v in d.items() if k in ("base_lr", "base_batch")}, "", source)
    cons_raw = d.get("constraints")
    if isinstance(cons_raw, Mapping):
        cons_raw = _coerce_map(cons_raw, "constraints.", source)
    constraints = BatchConstraints.from_dict(cons_raw, source=source) if cons_raw is not None else None
    rule = d.get("lr_rule", "sqrt")
    if rule not in RULES:
        raise ConfigError(f"must be one of {', '.join(RULES)}, got {rule!r}", source=source, field="lr_rule")
    base_lr = top.get("base_lr")
    if base_lr is not None and (
        isinstance(base_lr, bool)
        or not isinstance(base_lr, (int, float))
        or not math.isfinite(base_lr)
        or base_lr <= 0
    ):
        raise ConfigError(
            f"must be a finite positive number, got {base_lr!r}", source=source, field="base_lr"
        )
    base_batch = top.get("base_batch")
    if base_batch is not None and (
        isinstance(base_batch, bool) or not isinstance(base_batch, int) or base_batch < 1
    ):
        raise ConfigError(
            f"must be a positive integer, got {base_batch!r}", source=source, field="base_batch"
        )
    raw = d.get("stages")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            "must be a non-empty list of {batch, lr, until_samples}", source=source, field="stages"
        )
    stages: list[Stage] = []
    for i, s in enumerate(raw):
        f = f"stages[{i}]"
        if not isinstance(s, Mapping):
            raise ConfigError(f"must be a mapping with {', '.join(_STAGE_KEYS)}", source=source, field=f)
        for k in s:
            if k not in _STAGE_KEYS:
                raise ConfigError(
                    f"unknown key (allowed: {', '.join(_STAGE_KEYS)})", source=source, field=f"{f}.{k}"
                )
        s = _coerce_map(s, f + ".", source)
        if "batch" not in s:
            raise ConfigError("is required", source=source, field=f + ".batch")
        if "until_samples" not in s and i != len(raw) - 1:
            raise ConfigError(
                "is required (null only on the last stage)", source=source, field=f + ".until_samples"
            )
        batch = s["batch"]
        lr = s.get("lr")
        if lr is None:
            if base_lr is None:
                raise ConfigError(
                    "is missing: give lr, or base_lr (and base_batch, lr_rule) to derive it",
                    source=source,
                    field=f + ".lr",
                )
            if isinstance(batch, int) and not isinstance(batch, bool) and batch >= 1:
                ref = base_batch if base_batch is not None else stages[0].batch if stages else batch
                lr = lr_for_batch(batch, ref, base_lr, rule=rule)
        # an lr still None here goes with an invalid batch, which validate_stages names
        stages.append(Stage(batch=batch, lr=cast(float, lr), until_samples=s.get("until_samples")))
    return StaticSchedule(stages, constraints, source=source)
