"""Keys and states of earlier policy versions: translated into today's, or refused with what to give.

One code path runs the policy; what earlier versions wrote (config keys counted in records, policy
v2's horizon trigger, state version 3's named counters) is turned into today's form here, on load,
and nowhere else. To delete at 1.0.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from rlvr_schedule.errors import ConfigError

__all__ = ["OLD_COUNTS", "OLD_FLOATS", "REMOVED", "TRANSLATED", "V2", "translate_keys", "state_v3_to_v4"]

V2 = (
    "policy v2 (failure_switch_fraction 0 and its horizon trigger) was removed in policy v3; the "
    "forecast trigger is failure_switch_fraction (the part of the stage's way to the forecast "
    "collapse left, in (0, 1)) with forecast_samples (rollouts of evidence), or forecast: off"
)
#: Keys of earlier versions that no v3 knob means: a file (or a saved config) that gives them gets a
#: ConfigError naming the keys to give instead (``None``: an earlier ``to_dict``'s "unset" loads).
REMOVED = {
    "hysteresis": "it counted records; give hysteresis_samples, which counts rollouts "
    "(records x the batch: 3 records at batch 16 = 48, the default)",
    "min_stage_steps": "it counted updates; give min_stage_samples, which counts rollouts "
    "(updates x the batch: 10 updates at batch 16 = 160, the default)",
    "auto_records": "it counted records; give estimate_samples, which counts rollouts "
    "(records x the batch: 100 records at batch 16 = 1600, the default)",
    "margin": "the horizon trigger (margin x horizon_steps x the next batch) of " + V2,
    "horizon_steps": "the horizon trigger (margin x horizon_steps x the next batch) of " + V2,
    "forecast_window": "a forecast window counted in records, of " + V2,
}
#: Keys of earlier versions translated exactly into a v3 knob on load (with a ``FutureWarning``).
TRANSLATED = {
    "critical_fraction": "it duplicated sample_tolerance: a fraction f of B* is sample_tolerance "
    "f / (2 - f) (PolicyConfig.tolerance_for(f)); translated",
    "min_samples_between": "rate limits merged: it is min_stage_samples (rollouts a stage runs "
    "before the next switch); translated",
}
#: Policy v2's values of its horizon trigger and window: what configs saved by v3 before this
#: version carried, with no effect (they load quietly and are dropped; any other value is refused).
V2_DEFAULTS: dict[str, Any] = {"margin": 2.0, "horizon_steps": 10, "forecast_window": 200}
#: Old keys by kind, for the file loader's number coercion (so that its error is the one below).
OLD_COUNTS = frozenset(
    {
        "hysteresis",
        "min_stage_steps",
        "auto_records",
        "horizon_steps",
        "forecast_window",
        "min_samples_between",
    }
)
OLD_FLOATS = frozenset({"margin", "critical_fraction"})


def _finite(v: Any) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)


def translate_keys(kw: dict[str, Any], source: str | None, tolerance_for: Callable[[float], float]) -> None:
    """Turn the old keys of a flattened config mapping ``kw`` into today's knobs, in place.

    A previous version's ``legacy`` mapping is read as top-level keys; :data:`TRANSLATED` keys
    become their knob with a ``FutureWarning`` naming the file; :data:`REMOVED` ones raise a
    ConfigError naming the keys to give instead, except policy v2's ``margin``, ``horizon_steps``,
    ``forecast_window`` at v2's own values, which configs saved by v3 carried with no effect."""
    old_legacy = kw.pop("legacy", None)
    if old_legacy is not None:
        if not isinstance(old_legacy, Mapping):
            raise ConfigError(
                f"must be a mapping of old keys, got {old_legacy!r}", source=source, field="legacy"
            )
        for k, v in old_legacy.items():
            if k in kw:
                raise ConfigError(f"given twice (also as {k})", source=source, field=f"legacy.{k}")
            kw[k] = v

    def warn(k: str, why: str) -> None:
        where = f"{source}: " if source else ""
        warnings.warn(
            f"{where}schedule key {k!r} is deprecated (policy v3) and will be removed; {why}",
            FutureWarning,
            stacklevel=4,
        )

    old = {k: kw.pop(k) for k in list(kw) if k in REMOVED or k in TRANSLATED}
    old = {k: v for k, v in old.items() if v is not None}  # None: an earlier to_dict's "unset"
    if "critical_fraction" in old:
        f = old.pop("critical_fraction")
        if not _finite(f) or not 0 < f <= 1:
            raise ConfigError(
                f"must be a number in (0, 1] (the operating fraction of B*), got {f!r}",
                source=source,
                field="critical_fraction",
            )
        warn("critical_fraction", TRANSLATED["critical_fraction"])
        kw["sample_tolerance"] = tolerance_for(f)  # it overrode sample_tolerance
    between = old.pop("min_samples_between", 0)
    if between:
        if "min_stage_samples" in kw and kw["min_stage_samples"] != between:
            raise ConfigError(
                "give min_stage_samples alone (min_samples_between is its old name)",
                source=source,
                field="min_samples_between",
            )
        warn("min_samples_between", TRANSLATED["min_samples_between"])
        kw["min_stage_samples"] = between
    v2 = _finite(kw.get("failure_switch_fraction")) and kw.get("failure_switch_fraction") == 0
    for k, v in old.items():
        if k in V2_DEFAULTS and v == V2_DEFAULTS[k] and not v2:
            continue  # a v3 saved config's inert copy of v2's value
        raise ConfigError(f"removed: {REMOVED[k]}", source=source, field=k)


def saved_config(saved: Any) -> tuple[Any, list[str]]:
    """A saved state's config as today's keys would write it, and the removed keys it gave.

    A config with no ``forecast`` key was saved when the forecast switched the batch: "on" (today's
    default, advisory, would hide that it no longer switches). A policy v2 state is refused: its
    forecast state counted records."""
    if not isinstance(saved, Mapping):
        return saved, []
    if "forecast" not in saved:
        saved = {**saved, "forecast": "on"}
    if saved.get("failure_switch_fraction") == 0:
        raise ConfigError(
            "the schedule state was saved by policy v2 (failure_switch_fraction 0), removed in "
            "v3: its forecast state (a window counted in records) does not carry over; resume "
            "with a fresh schedule state (model and optimizer may still be restored)",
            source="saved state",
            field="config.failure_switch_fraction",
        )
    removed = sorted(k for k, v in saved.items() if k in REMOVED and v is not None)
    return saved, removed


def state_v3_to_v4(state: Mapping[str, Any]) -> dict[str, Any]:
    """A state of version 3 or earlier (named counters at the top level) in version 4's layout.

    Versions before 3 counted records only: their rollouts are those records at the stage's batch."""
    batch = int(state["stages"][-1]["batch"])
    records, streak = int(state["records"]), int(state["streak"])
    last, last_step = int(state["last_switch"]), int(state["last_switch_step"])
    noise = state["noise"]
    ps, pw = (float(x) for x in state.get("pos", (0.0, 0.0)))
    return {
        "kind": state.get("kind"),
        "version": 4,
        "config": state.get("config"),
        "stages": state["stages"],
        "run": {
            "base_batch": int(state["base_batch"]),
            "streak": streak,
            "streak_samples": int(state.get("streak_samples", streak * batch)),
            "records": records,
            "samples": int(state.get("samples", last + (records - last_step) * batch)),
            "last_switch": last,
            "last_switch_step": last_step,
            "auto_pending": bool(state["auto_pending"]),
            "floor": int(state.get("floor", 0)),
            "holding": bool(state.get("holding", False)),
            "failure_switch": bool(state.get("failure_switch", False)),
        },
        "tracker": {
            "noise": noise,
            "noise_samples": int(state.get("noise_samples", int(noise.get("n_updates", 0)) * batch)),
            "bs_ref": float(state.get("bs_ref", math.nan)),  # version 1 states: re-referenced
            "pos_ref": float(state.get("pos_ref", math.nan)),
            "b0": float(state.get("b0", math.nan)),
            "ps": ps,
            "pw": pw,
        },
        "forecast": state["forecast"],
        "clock": state.get("clock"),
        "detectors": state.get("detectors", {}),
    }
