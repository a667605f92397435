"""The two-clock policy's state: what it holds between records, saved whole and versioned.

:class:`RunState` is everything the policy itself carries from one record to the next (counters,
flags); its parts (the B* tracker, the forecast, the failure clock, the detectors) save their own
state. :func:`save` writes all of it (a new field of :class:`RunState` is saved with no further
code); :func:`load` reads this version's layout and, through
:func:`~rlvr_schedule.policy.legacy.state_v3_to_v4`, the named counters of version 3 and earlier.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.policy.base import decode_floats, encode_floats
from rlvr_schedule.policy.legacy import saved_config, state_v3_to_v4

#: A :class:`~rlvr_schedule.policy.TwoClockScheduler` (not imported: the scheduler imports this module).
TwoClockScheduler = Any

__all__ = ["VERSION", "RunState", "load", "save"]

#: The layout :func:`save` writes (3: named counters at the top level; 4: :class:`RunState` whole).
VERSION = 4

log = logging.getLogger("rlvr_schedule.policy")


@dataclass
class RunState:
    """What the policy carries from record to record, besides its stages and its parts' state."""

    base_batch: int  # the LR rule's base batch (the config's, else the initial batch)
    streak: int = 0  # consecutive records with a trigger
    streak_samples: int = 0  # their rollouts
    records: int = 0
    samples: int = 0  # rollouts consumed, as of the last record
    last_switch: int = 0  # rollouts at the last switch
    last_switch_step: int = 0  # records then
    auto_pending: bool = False  # initial_batch auto with no known B*: the first estimate sets it
    floor: int = 0  # the batch of the last failure switch: tracking does not move below it
    holding: bool = False  # a failure trigger is being held (it cannot postpone the failure)
    failure_switch: bool = False  # the last proposal was a failure switch
    advised: bool = False  # an advisory forecast warned in this stage (logged once)


def _detector_key(i: int, det: Any) -> str:
    return f"{i}:{getattr(det, 'name', type(det).__name__)}"


def save(policy: TwoClockScheduler) -> dict[str, Any]:
    """The policy's state (before :func:`~rlvr_schedule.policy.base.encode_floats`)."""
    return {
        "config": policy.config.to_dict(),
        "stages": [s.to_dict() for s in policy.stages],
        "run": dataclasses.asdict(policy.run),
        "tracker": policy.tracker.state_dict(),
        "forecast": policy.forecast.state_dict(),
        "clock": policy.clock.state_dict() if policy.clock is not None else None,
        "price": policy.price.state_dict(),
        "detectors": {
            _detector_key(i, d): d.state_dict()
            for i, d in enumerate(policy.detectors)
            if hasattr(d, "state_dict")
        },
    }


def _warn_on_another_config(policy: TwoClockScheduler, saved: Any) -> None:
    """Log which knobs differ between the saved config and the policy's (an earlier version's keys as
    they load now)."""
    from rlvr_schedule.policy.policy_config import PolicyConfig

    saved, removed = saved_config(saved)
    mine = decode_floats(encode_floats(policy.config.to_dict()))
    if saved is not None and saved != mine:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                saved = decode_floats(encode_floats(PolicyConfig.from_dict(saved).to_dict()))
        except ConfigError:  # record-counted limits of an earlier v3: the state itself is v3's
            pass
    changed = set(removed)
    if saved is not None and saved != mine:
        changed |= {k for k, v in mine.items() if saved.get(k) != v}
    if changed:
        log.warning(
            "loading a TwoClockScheduler state saved under another config (changed: %s); "
            "decisions may differ from the uninterrupted run",
            ", ".join(sorted(changed)),
        )


def load(policy: TwoClockScheduler, state: Mapping[str, Any]) -> None:
    """Restore ``state`` (decoded) into ``policy``; a state saved under another config loads, with a
    warning naming what changed."""
    _warn_on_another_config(policy, state.get("config"))
    if int(state.get("version", 0)) < VERSION:
        state = state_v3_to_v4(state)
    policy._stages = policy._stages_from(state)
    names = {f.name for f in dataclasses.fields(RunState)}
    policy.run = RunState(**{k: v for k, v in state["run"].items() if k in names})
    policy.tracker.load_state_dict(state["tracker"])
    policy.forecast.load_state_dict(state["forecast"])
    if policy.clock is not None and state.get("clock"):
        policy.clock.load_state_dict(state["clock"])
    if state.get("price"):
        policy.price.load_state_dict(state["price"])
    saved = state.get("detectors", {})
    for i, det in enumerate(policy.detectors):
        key = _detector_key(i, det)
        if key in saved and hasattr(det, "load_state_dict"):
            det.load_state_dict(saved[key])
    policy._scale = policy._lr_scale(policy.current)
