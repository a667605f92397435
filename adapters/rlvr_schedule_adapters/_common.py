"""Framework-free helpers shared by the adapters: schedule specs, batch arithmetic, plan checks.

Adapters for TRL, verl and OpenRLHF all have to (1) rebuild a schedule from JSON-able data kept in
a checkpoint, (2) know the batches a schedule plans or can reach, (3) say what their set-up check
found in one warning class, (4) read numbers out of metric dicts that hold torch or numpy scalars,
and (5) apply a new base LR to a torch optimizer and its ``lr_scheduler`` so that neither undoes it
at the next step. The loop itself
(record -> schedule -> apply) is :class:`rlvr_schedule.driver.ScheduleDriver`'s. None of this needs
the frameworks: this module imports the core and nothing else (torch objects are duck-typed).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlvr_schedule.records import BatchSchedule, Stage

__all__ = [
    "FRAMEWORKS",
    "missing_framework",
    "require_framework",
    "HOST",
    "HOST_KEYS",
    "host_keys",
    "with_host_values",
    "WATCH_KEYS",
    "ALARM_PREFIX",
    "keep_alarm_checkpoint",
    "build_schedule",
    "split_watch",
    "ScheduleSetupWarning",
    "as_number",
    "planned_batches",
    "reachable_batches",
    "scale_base_lr",
    "schedule_spec",
    "warn_setup",
]


# --- frameworks ------------------------------------------------------------------------------
#: Per adapter: the modules it needs (the framework and what its entry point imports) and the extra
#: of this package that installs them.
FRAMEWORKS: dict[str, tuple[tuple[str, ...], str]] = {
    "trl": (("transformers", "trl"), "trl"),
    "verl": (("verl", "hydra"), "verl"),
    "openrlhf": (("openrlhf",), "openrlhf"),
}


def missing_framework(adapter: str) -> tuple[str, str] | None:
    """(the missing module, what to install) for ``adapter`` ("trl", "verl", "openrlhf"), or None
    when it is installed."""
    import importlib.util

    modules, extra = FRAMEWORKS[adapter]
    for m in modules:
        try:
            found = importlib.util.find_spec(m) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return m, (
                f"the {adapter} adapter needs {m!r}, which is not installed: "
                f'pip install -e ".[{extra}]" (from a clone; or pip install "rlvr-schedule[{extra}]")'
            )
    return None


def require_framework(adapter: str) -> None:
    """A launcher's check before it imports its framework: exit 2 naming the extra to install."""
    import sys

    said = missing_framework(adapter)
    if said is not None:
        print(f"rlvr-schedule: error: {said[1]}", file=sys.stderr)
        raise SystemExit(2)


# --- schedules -------------------------------------------------------------------------------
def schedule_spec(schedule: Any) -> dict[str, Any] | None:
    """The JSON-able config form of a schedule (what ``schedule_from_dict`` reads back), or None.

    A path is read (YAML/JSON) so that checkpoints hold the schedule itself, not a file that may
    change or move; a mapping is copied; a schedule object gives ``to_dict()`` (StaticSchedule) or
    its ``config.to_dict()`` with ``type: two_clock`` (TwoClockScheduler).
    """
    if schedule is None:
        return None
    if isinstance(schedule, (str, Path)):
        from rlvr_schedule.policy import read_config

        return dict(read_config(schedule))
    if isinstance(schedule, Mapping):
        return dict(schedule)
    to_dict = getattr(schedule, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    config = getattr(schedule, "config", None)
    if config is not None and callable(getattr(config, "to_dict", None)):
        return {"type": "two_clock", **config.to_dict()}
    return None


#: The schedule file's group for the collapse watch (read by the adapters, not by the schedule):
#: ``watch: {checkpoint_on_alarm: true}`` saves a checkpoint at each raised alarm (default: in
#: advisory mode only).
WATCH_KEYS = ("checkpoint_on_alarm",)


def split_watch(schedule: Any) -> tuple[Any, dict[str, Any]]:
    """(the schedule without its ``watch`` group, the group's options); ConfigError names the field."""
    from rlvr_schedule.errors import ConfigError

    source = None
    if isinstance(schedule, (str, Path)):
        from rlvr_schedule.policy import read_config

        source = str(schedule)
        d = read_config(schedule)
        if "watch" not in d:
            return schedule, {}
        schedule = d
    if not isinstance(schedule, Mapping) or "watch" not in schedule:
        return schedule, {}
    body = dict(schedule)
    group = body.pop("watch")
    if group is None:
        return body, {}
    if not isinstance(group, Mapping):
        raise ConfigError(f"must be a mapping, got {type(group).__name__}", source=source, field="watch")
    for k, v in group.items():
        if k not in WATCH_KEYS:
            raise ConfigError(
                f"unknown key (allowed: {', '.join(WATCH_KEYS)})", source=source, field=f"watch.{k}"
            )
        if not isinstance(v, bool):
            raise ConfigError(f"must be true or false, got {v!r}", source=source, field=f"watch.{k}")
    return body, dict(group)


#: A schedule value the host fills in at train start: its own rollouts per update
#: (``initial_batch``, ``base_batch``) and learning rate (``base_lr``), so that the run starts where
#: the host was set up to run.
HOST = "host"
HOST_KEYS = ("initial_batch", "base_batch", "base_lr")


def host_keys(schedule: Any) -> tuple[Any, list[str]]:
    """(the schedule, as a mapping where it names ``host`` values; those keys, in :data:`HOST_KEYS`)."""
    d = schedule
    if isinstance(schedule, (str, Path)):
        from rlvr_schedule.policy import read_config

        d = read_config(schedule)
    if not isinstance(d, Mapping):
        return schedule, []
    keys = [k for k in HOST_KEYS if d.get(k) == HOST]
    return (dict(d) if keys else schedule), keys


def with_host_values(
    spec: Mapping[str, Any], keys: Sequence[str], *, batch: int, lr: float
) -> dict[str, Any]:
    """``spec`` with its ``host`` values replaced by the host's batch and LR."""
    out = dict(spec)
    for k in keys:
        out[k] = float(lr) if k == "base_lr" else int(batch)
    return out


def build_schedule(schedule: Any, *, plugins: Any = None) -> BatchSchedule:
    """A schedule object from a path, a config mapping or an existing schedule (returned as is)."""
    from rlvr_schedule.policy import load_schedule, schedule_from_dict

    if isinstance(schedule, (str, Path)):
        return load_schedule(schedule, plugins=plugins)
    if isinstance(schedule, Mapping):
        return schedule_from_dict(schedule, source="<schedule spec>", plugins=plugins)
    if callable(getattr(schedule, "step", None)) and callable(getattr(schedule, "state_dict", None)):
        return schedule
    raise TypeError(
        f"schedule must be a path, a config mapping or a BatchSchedule, got {type(schedule).__name__}"
    )


def planned_batches(stages: Sequence[Stage], steps: int, *, samples: int = 0, start: int = 0) -> list[int]:
    """Rollout batch of each of the next ``steps`` updates if the stages run as written.

    Stage ``i`` runs while cumulative samples are below its ``until_samples`` (the last stage, or
    one without ``until_samples``, runs to the end). ``start`` is the current stage index and
    ``samples`` the rollouts consumed so far. An online schedule knows only its current stage, so
    its plan is that stage held to the end (a lower bound on what the run will need).
    """
    out: list[int] = []
    i = min(start, len(stages) - 1)
    for _ in range(max(steps, 0)):
        while (
            i < len(stages) - 1 and stages[i].until_samples is not None and samples >= stages[i].until_samples
        ):
            i += 1
        out.append(stages[i].batch)
        samples += stages[i].batch
    return out


def reachable_batches(
    schedule: Any, steps: int, *, samples: int | None = None, noise_estimate: bool = True
) -> list[float] | None:
    """The schedule's own :meth:`~rlvr_schedule.policy.TwoClockScheduler.reachable_batches` (the
    largest batch each of the next ``steps`` updates can run at), or None for a schedule without one
    (a static schedule's plan is known: :func:`planned_batches`)."""
    reach = getattr(schedule, "reachable_batches", None)
    if not callable(reach):
        return None
    return list(reach(steps, samples=samples, noise_estimate=noise_estimate))


# --- set-up checks and metric numbers ------------------------------------------------------------
class ScheduleSetupWarning(UserWarning):
    """The host's set-up cannot run the schedule as written (data too short, batch not runnable)."""


def warn_setup(reasons: Sequence[str], *, framework: str, stacklevel: int = 3) -> None:
    """Warn (:class:`ScheduleSetupWarning`) once per reason a set-up check found."""
    for reason in reasons:
        warnings.warn(
            f"rlvr-schedule {framework} adapter: {reason}", ScheduleSetupWarning, stacklevel=stacklevel
        )


def as_number(v: Any) -> float | None:
    """A metric value as a float (ints, floats, torch/numpy scalars), None for anything else (bools too)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    item = getattr(v, "item", None)
    if callable(item):
        try:
            return as_number(item())
        except (ValueError, RuntimeError, TypeError):
            return None
    return None


# --- learning rate ------------------------------------------------------------------------------
def _unwrap(obj: Any, attr: str, marker: str) -> Any:
    """Follow ``obj.<attr>`` (accelerate's AcceleratedOptimizer / AcceleratedScheduler, DeepSpeed's
    ZeRO optimizer) while the inner object has ``marker`` (``param_groups`` / ``step``); a few
    levels at most."""
    for _ in range(4):
        inner = getattr(obj, attr, None)
        if inner is None or inner is obj or not hasattr(inner, marker):
            break
        obj = inner
    return obj


def scale_base_lr(optimizer: Any, lr_scheduler: Any, lr: float) -> list[float]:
    """Make ``lr`` the peak (base) LR of a torch optimizer + LR-scheduler pair, effective next step.

    Multiplicative schedulers (torch ``LambdaLR`` as built by TRL/transformers, verl's FSDP engine
    and OpenRLHF) compute each group's LR as ``base_lrs[i] x lambda(step)``: writing only the
    optimizer's ``param_groups`` is undone at the next ``scheduler.step()``, and writing only
    ``base_lrs`` waits a step and leaves the logged last LR stale. So everything changes together:
    ``base_lrs`` (group 0 set to ``lr``, the other groups keep their ratio to it), each group's
    ``lr`` (keeping the scheduler's present warm-up/decay multiplier), ``initial_lr`` (what a
    resumed scheduler starts from) and the scheduler's last-LR value (what the frameworks log).

    ``lr_scheduler`` may be None (then the groups' ``initial_lr``, else their ``lr``, are the peak
    LRs). Wrappers exposing ``.optimizer`` / ``.scheduler`` (accelerate, DeepSpeed) are unwrapped.
    Duck-typed: torch is not imported. Nothing is changed when it raises:

    - ValueError: ``lr`` is not a finite non-negative number, or the scheduler has a different
      number of base LRs than the optimizer has param groups;
    - TypeError: the scheduler has no ``base_lrs`` (only torch LR schedulers are supported, not
      e.g. Megatron's OptimizerParamScheduler, which must be driven through its own max_lr).

    Returns the LR of each param group now in effect (``lr`` x ratio x the scheduler's factor).
    """
    try:
        value = float(lr)
    except (TypeError, ValueError):
        value = math.nan
    if isinstance(lr, bool) or not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"learning rate must be a finite non-negative number, got {lr!r}")
    sched = None if lr_scheduler is None else _unwrap(lr_scheduler, "scheduler", "step")
    opt = _unwrap(optimizer, "optimizer", "param_groups")
    groups = opt.param_groups
    if sched is not None:
        bases = getattr(sched, "base_lrs", None)
        if bases is None:
            raise TypeError(
                f"{type(sched).__name__} has no base_lrs: only torch LR schedulers (LambdaLR and the "
                "like) are supported, not e.g. Megatron's OptimizerParamScheduler"
            )
    else:  # no scheduler: the peak LRs are what a scheduler would start from, else the group LRs
        bases = [g.get("initial_lr", g["lr"]) for g in groups]
    bases = [float(b) for b in bases]
    if len(bases) != len(groups):
        raise ValueError(f"the scheduler has {len(bases)} base LRs for {len(groups)} param groups")
    ref = bases[0]
    new_bases = [value * b / ref if ref > 0 else value for b in bases]
    applied: list[float] = []
    for g, old_base, new_base in zip(groups, bases, new_bases, strict=True):
        factor = float(g["lr"]) / old_base if old_base > 0 else 1.0
        g["lr"] = new_base * factor
        if sched is not None or "initial_lr" in g:
            g["initial_lr"] = new_base
        applied.append(g["lr"])
    if sched is not None:
        sched.base_lrs = list(new_bases)
        sched._last_lr = list(applied)
    return applied


# --- checkpoints at an alarm ---------------------------------------------------------------------
#: Alarm checkpoints are named ``alarm-<the host's name>``: the hosts' rotations match their own
#: prefix at the start of a name (``checkpoint-*``, ``global_step_*``), so they never delete one.
ALARM_PREFIX = "alarm-"


def keep_alarm_checkpoint(src: str | os.PathLike[str], info: Mapping[str, Any]) -> Path:
    """Keep the host's checkpoint directory ``src`` apart from its rotation, as ``alarm-<name>``
    next to it, with ``alarm.json`` (``info``: the step, the rollouts it holds, the alarms).

    Files are hard-linked where the file system allows (no second copy on disk; the host writes
    new files for later checkpoints, never into old ones), else copied; the directory appears whole
    or not at all (built under a temporary name, then renamed). Returns the new directory.
    """
    src = Path(src)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: no such checkpoint directory")
    dst = src.with_name(ALARM_PREFIX + src.name)
    tmp = src.with_name(f".{dst.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)

    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)

    shutil.copytree(src, tmp, copy_function=link)
    (tmp / "alarm.json").write_text(json.dumps(dict(info), indent=1, default=str), encoding="utf-8")
    if dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)
    return dst
