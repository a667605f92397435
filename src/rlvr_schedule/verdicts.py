"""One-line verdicts on the seed's predictions from a sweep fit, for a report read at a glance.

The report's tables hold the numbers; these lines say what they mean for each prediction
("per-sample progress falls above B*: yes, by 61% from B=8 to B=128"), with the interval that
decides it, so a reader does not have to compare intervals by eye. Pure Python on
:meth:`rlvr_schedule.clocks.SweepFit.to_dict`'s JSON (no numpy needed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr_schedule._format import plain_reason

__all__ = ["verdicts", "progress_verdict", "failure_verdict", "lr_verdict", "lr_slope", "switch_verdict"]


def _fin(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _iv(iv: Any) -> str:
    if not iv or len(iv) != 2:
        return "[-, -]"
    return "[" + ", ".join(f"{x:.3g}" if _fin(x) else "-" for x in iv) + "]"


def _rates_by_batch(fit: Mapping[str, Any]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for r in fit.get("runs", []):
        if r.get("constant_batch", True) and _fin(r.get("rate")):
            out.setdefault(int(r["batch"]), []).append(float(r["rate"]))
    return out


def progress_verdict(fit: Mapping[str, Any]) -> str:
    """Prediction 1: per-rollout progress is flat below B* and falls above it.

    "yes" when B* is finite with a finite interval inside the sweep's range, and the mean rate at
    the largest batch is below the mean at the smallest; the fall is quoted in percent.
    """
    rates = _rates_by_batch(fit)
    if len(rates) < 2:
        return "per-sample progress falls above B*: not testable (fewer than 2 batches with a rate)"
    lo, hi = min(rates), max(rates)
    r_lo, r_hi = (sum(rates[b]) / len(rates[b]) for b in (lo, hi))
    cb, iv = fit.get("critical_batch"), fit.get("critical_batch_interval") or [None, None]
    fall = 1.0 - r_hi / r_lo if r_lo > 0 else math.nan
    by = (
        f"rate at B={hi} is {100 * (1 - fall):.0f}% of B={lo}'s"
        if _fin(fall)
        else "no progress at the small batch"
    )
    if not _fin(cb):
        return f"per-sample progress falls above B*: no (no finite B* in {lo}-{hi}; {by})"
    cbf = float(cb) if isinstance(cb, (int, float)) else math.nan
    below = [b for b in rates if b <= cbf and b not in (lo, hi)]
    if below:  # the other half of the prediction: roughly flat below B*
        b1 = max(below)
        r1 = sum(rates[b1]) / len(rates[b1])
        by += f"; below B*, B={b1} keeps {100 * r1 / r_lo:.0f}% of it" if r_lo > 0 else ""
    inside = all(_fin(x) for x in iv) and lo / 2 <= iv[0] and iv[1] <= 2 * hi
    ok = inside and _fin(fall) and fall > 0
    return (
        f"per-sample progress falls above B*: {'yes' if ok else 'not shown'} "
        f"(B* = {cb:.3g} {_iv(iv)} rollouts/update; {by})"
    )


def failure_verdict(fit: Mapping[str, Any]) -> str:
    """Prediction 2: failure arrives after a batch-independent number of rollouts (alpha ~ 0)."""
    runs = [r for r in fit.get("runs", []) if r.get("constant_batch", True)]
    failed = [r for r in runs if _fin(r.get("failure_samples"))]
    if not failed:
        return f"failure on a sample clock (alpha ~ 0): not testable (no run of {len(runs)} failed)"
    signals = sorted({str(r.get("failure_signal")) for r in failed})
    a, iv = fit.get("failure_exponent"), fit.get("failure_exponent_interval") or [None, None]
    diverged = sum(bool(r.get("diverging")) for r in runs)  # fell from the start: no failure reading
    where = (
        f"{len(failed)}/{len(runs)} runs failed ({', '.join(signals)}) after "
        f"{fit.get('failure_samples', math.nan):.4g} {_iv(fit.get('failure_samples_interval'))} rollouts"
        + (f", {diverged} diverged" if diverged else "")
    )
    if not _fin(a) or not all(_fin(x) for x in iv):
        return f"failure on a sample clock (alpha ~ 0): undetermined ({where}; no exponent interval)"
    zero, one = iv[0] <= 0 <= iv[1], iv[0] <= 1 <= iv[1]
    word = "yes" if zero and not one else "no, a step clock" if one and not zero else "undetermined"
    return f"failure on a sample clock (alpha ~ 0): {word} (alpha = {a:.2f} {_iv(iv)}; {where})"


def lr_slope(fits: Mapping[float, Mapping[str, Any]]) -> tuple[float, float, float, list]:
    """The log-log slope of B* on the base LR (-1 predicted) and its 95% interval, from fits at
    several base LRs; returns ``(slope, lo, hi, points)`` with ``points`` the (lr, B*, interval)
    used. The slope is weighted by each B*'s precision (its interval's width in log space, ~2 x
    1.96 standard errors) when every B* interval is finite, and has an interval only then
    (NaN bounds otherwise; NaN slope with fewer than 2 finite B*)."""
    pts = [
        (lr, f["critical_batch"], f.get("critical_batch_interval") or [None, None])
        for lr, f in sorted(fits.items())
        if _fin(lr) and lr > 0 and _fin(f.get("critical_batch")) and f["critical_batch"] > 0
    ]
    nan = math.nan
    if len(pts) < 2:
        return nan, nan, nan, pts
    xs = [math.log(lr) for lr, _, _ in pts]
    ys = [math.log(b) for _, b, _ in pts]
    ses = [
        (math.log(iv[1]) - math.log(iv[0])) / (2 * 1.96)
        if len(iv) == 2 and all(_fin(v) and v > 0 for v in iv) and iv[1] > iv[0]
        else math.nan
        for _, _, iv in pts
    ]
    weighted = all(_fin(se) and se > 0 for se in ses)
    ws = [1 / se**2 for se in ses] if weighted else [1.0] * len(xs)
    sw = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs, strict=True)) / sw
    my = sum(w * y for w, y in zip(ws, ys, strict=True)) / sw
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs, strict=True))
    if sxx <= 0:
        return nan, nan, nan, pts
    slope = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys, strict=True)) / sxx
    if not weighted:
        return slope, nan, nan, pts
    h = 1.96 / math.sqrt(sxx)
    return slope, slope - h, slope + h, pts


def lr_verdict(fits: Mapping[float, Mapping[str, Any]]) -> str:
    """Prediction 3: B* ~ 1/lr, from fits at several base LRs (:func:`lr_slope`; -1 predicted):
    "yes" when the slope's interval holds -1 and not 0, "no" when it excludes -1, else
    "undetermined". Without intervals the point slope decides (-1.5 to -0.5: yes).
    """
    slope, lo, hi, pts = lr_slope(fits)
    if len(pts) < 2:
        return f"B* ~ 1/lr: not testable (finite B* at {len(pts)} of {len(fits)} learning rates)"
    listing = ", ".join(f"{b:.3g} {_iv(iv)} at {lr:.3g}" for lr, b, iv in pts)
    if _fin(lo) and _fin(hi):
        word = (
            "yes" if lo <= -1 <= hi and not lo <= 0 <= hi else "no" if not lo <= -1 <= hi else "undetermined"
        )
        return f"B* ~ 1/lr: {word} (log-log slope {slope:.2f} [{lo:.2f}, {hi:.2f}], -1 predicted; B* = {listing})"
    word = "yes" if _fin(slope) and -1.5 <= slope <= -0.5 else "no"
    return f"B* ~ 1/lr: {word} (log-log slope {slope:.2f}, -1 predicted, no interval; B* = {listing})"


def _per_run(decisions: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Decisions split into runs (seeds): a new run starts where the step goes back."""
    runs: list[list[Mapping[str, Any]]] = []
    last = math.inf
    for d in decisions:
        step = d.get("step", 0)
        if not runs or (_fin(step) and step <= last):
            runs.append([])
        runs[-1].append(d)
        last = step if _fin(step) else last
    return runs


def switch_verdict(decisions: Sequence[Mapping[str, Any]], failure_samples: float | None = None) -> str:
    """The schedule acts: did each live run switch, and before the sweep's pooled failure point?"""
    runs = _per_run(decisions)
    sw_runs = [[d for d in r if d.get("switched")] for r in runs]
    sw = [r for r in sw_runs if r]
    if not sw:
        return "the schedule switched: no" + (f" (0 of {len(runs)} runs)" if len(runs) > 1 else "")
    firsts = [r[0].get("samples", math.nan) for r in sw]
    tail = ""
    if _fin(failure_samples):
        before = sum(1 for x in firsts if _fin(x) and x < failure_samples)
        tail = f", {before} of {len(sw)} before the sweep's failure point"
    paths = sorted({" -> ".join(str(b) for b in _batch_path(r)) for r in runs if len(_batch_path(r)) > 1})
    n_batch = sum(len(_batch_path(r)) - 1 for r in runs)
    n_lr = sum(len(r) for r in sw) - n_batch
    runs_txt = f"in {len(sw)} of {len(runs)} runs, " if len(runs) > 1 else ""
    first = (
        f"{min(firsts):.0f}-{max(firsts):.0f}"
        if len(firsts) > 1 and min(firsts) != max(firsts)
        else f"{firsts[0]:.0f}"
    )
    counts = f"{n_batch} batch switch{'es' if n_batch != 1 else ''}" + (
        f" and {n_lr} LR cut{'s' if n_lr != 1 else ''} at a held batch" if n_lr else ""
    )
    path = f"batch {' / '.join(paths)}; " if paths else ""
    return (
        f"the schedule switched: yes, {runs_txt}{counts} ({path}first at {first} rollouts{tail}; "
        f"{plain_reason(sw[0][0].get('reason', ''))})"
    )


def _batch_path(run: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The batches a run went through, from its start: an LR cut at a held batch adds none."""
    path: list[Any] = []
    for i, d in enumerate(run):
        if (i == 0 or d.get("switched")) and (not path or d.get("batch") != path[-1]):
            path.append(d.get("batch"))
    return path


def verdicts(
    fit: Mapping[str, Any],
    *,
    decisions: Sequence[Mapping[str, Any]] = (),
    fits_by_lr: Mapping[float, Mapping[str, Any]] | None = None,
) -> list[str]:
    """All verdicts that the given data can decide, one line each (markdown list items)."""
    out = [progress_verdict(fit), failure_verdict(fit)]
    if fits_by_lr:
        out.append(lr_verdict(fits_by_lr))
    else:
        out.append("B* ~ 1/lr: not testable with one learning rate (`rlvr-trainer evidence` runs three)")
    if decisions:
        out.append(switch_verdict(decisions, fit.get("failure_samples")))
    return [f"- {line}" for line in out]
