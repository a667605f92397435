"""Reports: PNG plots of both clocks and a summary page (Markdown + HTML).

matplotlib is imported inside the functions (Agg backend), so the core stays numpy-only.
The plots answer the project's questions for a sweep: does progress per sample fall with
batch (held-out accuracy vs samples where the runs logged it, else the training reward), where
is the critical batch (per-sample progress vs batch with the fitted curve), and when does each
run fail (failure signal vs samples). The page opens with what a newcomer needs first: the
verdicts, the progress curves with failures marked, the fitted clocks with their intervals, and
the schedule with why it was chosen.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlvr_schedule._format import column_formatter, plain_reason
from rlvr_schedule._format import fmt as _fmt
from rlvr_schedule.records import Run

#: Held-out accuracy, logged at evaluation steps (the reference trainer's ``eval_accuracy``).
EVAL_METRIC = "eval_accuracy"

__all__ = [
    "plot_reward_vs_samples",
    "plot_progress_vs_batch",
    "plot_failure_signal",
    "write_report",
    "EVAL_METRIC",
]


def _legend(ax: Any, **kw: Any) -> None:
    """A legend only where something is labelled (an empty one draws an empty box and warns)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _colors(n: int) -> list[Any]:
    plt = _pyplot()
    cmap = plt.get_cmap("viridis")
    return [cmap(i / max(n - 1, 1)) for i in range(n)]


def _count(v: Any) -> str:
    """A count of rollouts (or an interval of them) as ``fit`` prints it: whole, with thousands
    separators; '-' where missing."""
    if isinstance(v, (list, tuple)):
        return "-" if all(_count(x) == "-" for x in v) else "[" + ", ".join(_count(x) for x in v) + "]"
    x = _num(v)
    return f"{round(x):,}" if math.isfinite(x) else "-"


def _bstar_why(fit: Any, fd: Mapping[str, Any]) -> str | None:
    """Why the fit has no B* (None where it has one)."""
    if math.isfinite(_num(fd.get("critical_batch"))):
        return None
    why = fit.unidentified() if callable(getattr(fit, "unidentified", None)) else {}
    return why.get("critical_batch") or "too few runs at different batches"


def _num(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _label(run: Run, runs: Sequence[Run] = ()) -> str:
    """``B=64``; with the run's name when another run has the same batch (seeds, LRs, models)."""
    same = sum(1 for r in runs if r.batch == run.batch) > 1
    return f"B={run.batch}" + (f" {run.name}" if same else "") + ("" if run.constant_batch else " (switched)")


#: failure detector name -> the record field it watches (what the failure plot should show).
SIGNAL_FIELDS = {
    "entropy_collapse": "entropy",
    "reward_crash": "reward_mean",
    "grad_norm_spike": "grad_norm",
    "kl_blowup": "kl",
    "zero_variance_groups": "frac_zero_std",
}


def fired_signal(run_rows: Sequence[dict[str, Any]], runs: Sequence[Run] = ()) -> str:
    """The field to plot for the failure clock: that of the detector that fired most often
    (entropy when none fired, or the first signal the runs log)."""
    counts: dict[str, int] = {}
    for r in run_rows:
        fld = SIGNAL_FIELDS.get(str(r.get("failure_signal")))
        if fld:
            counts[fld] = counts.get(fld, 0) + 1
    if counts:
        return max(counts, key=lambda k: counts[k])
    for fld in ("entropy", "reward_mean"):
        if any(np.isfinite(run.array(fld)).any() for run in runs):
            return fld
    return "entropy"


def _batch_colors(runs: Sequence[Run]) -> dict[int, Any]:
    """One colour per batch (viridis, small to large), shared by every plot of a report."""
    bs = sorted({r.batch for r in runs if r.constant_batch})
    return dict(zip(bs, _colors(len(bs)), strict=True))


def _curve(run: Run, field: str = "reward_mean") -> tuple[np.ndarray, np.ndarray]:
    """(samples, centered moving average of ``field``) over ~4% of the run's rollouts: no lag, so
    a curve and the failure marked on it line up."""
    from rlvr_schedule.clocks._stats import smooth_in_samples

    x, y, b = run.samples, run.array(field), run.array("batch")
    if field == EVAL_METRIC:  # measured before the update, on a fixed set: placed, not smoothed
        ok = np.isfinite(y)
        return (x - b)[ok], y[ok]
    ok = np.isfinite(y)
    x, y, b = x[ok], y[ok], b[ok]
    if x.size < 2:
        return x, y
    ys, _ = smooth_in_samples(x, y, b, (x[-1] - x[0] + b[-1]) / 25)
    return x, ys


def switches(run: Run) -> list[tuple[float, int, int]]:
    """(samples, batch before, batch after) at each batch change of a run: the samples are where
    the decision was taken (the last update at the old batch)."""
    b, x = run.array("batch"), run.samples
    return [(float(x[i - 1]), int(b[i - 1]), int(b[i])) for i in range(1, b.size) if b[i] != b[i - 1]]


def lr_steps(run: Run, *, step: float = 1.25, floor: float = 0.5) -> list[tuple[float, float, float]]:
    """(samples, LR before, LR after) where the LR stepped at an unchanged batch, e.g. the policy's
    LR / sqrt(2) at its largest batch. A step is a change by more than ``step`` either way between
    two records with both LRs at least ``floor`` x the run's largest LR, so a warm-up ramp or a
    smooth decay (a small change per update, or one near zero) is not marked."""
    b, lr, x = run.array("batch"), run.array("lr"), run.samples
    finite = lr[np.isfinite(lr)]
    top = float(finite.max()) if finite.size else math.nan
    out = []
    for i in range(1, b.size):
        lo, hi = float(lr[i - 1]), float(lr[i])
        if b[i] != b[i - 1] or not (math.isfinite(lo) and math.isfinite(hi)) or min(lo, hi) < floor * top:
            continue
        if lo > 0 and (hi / lo > step or lo / hi > step):
            out.append((float(x[i - 1]), lo, hi))
    return out


_SCHED_STYLES = ("-", "--", "-.", (0, (1, 1)))


def _sched_name(run: Run) -> str:
    return run.name if run.name.startswith("schedule") else f"schedule {run.name}"


def _at(x: np.ndarray, y: np.ndarray, at: float) -> float:
    return float(np.interp(at, x, y)) if x.size else math.nan


def plot_reward_vs_samples(
    runs: Sequence[Run],
    path: Path,
    *,
    target: float | None = None,
    failure_samples: Sequence[float | None] | None = None,
    metric: str = "reward_mean",
) -> Path:
    """Reward (or held-out accuracy: ``metric``) against rollouts consumed: one colour per batch,
    its seeds as a band (mean line, min-max band), runs whose batch changed (the live schedule)
    in black with each switch marked ("16->32 at 784", an LR step at an unchanged batch
    "LR x0.71 at 13,424"), and an x where each run's failure was detected."""
    plt = _pyplot()
    colors = _batch_colors(runs)
    fails = list(failure_samples) if failure_samples is not None else [None] * len(runs)
    fig, ax = plt.subplots(figsize=(8, 4.6))
    groups: dict[int, list[int]] = {}
    for i, r in enumerate(runs):
        if r.constant_batch:
            groups.setdefault(r.batch, []).append(i)
    for b, idx in sorted(groups.items()):
        curves = [c for c in (_curve(runs[i], metric) for i in idx) if c[0].size >= 2]
        if not curves:
            continue
        grid = np.linspace(max(float(x[0]) for x, _ in curves), min(float(x[-1]) for x, _ in curves), 300)
        ys = np.array([np.interp(grid, x, y) for x, y in curves])
        n = len(curves)
        ax.plot(
            grid, ys.mean(0), color=colors[b], lw=1.6, label=f"B={b}" + (f" ({n} seeds)" if n > 1 else "")
        )
        if n > 1:
            ax.fill_between(grid, ys.min(0), ys.max(0), color=colors[b], alpha=0.18, lw=0)
    first_fail = True
    n_sched, n_seen = sum(1 for r in runs if not r.constant_batch), 0
    for i, r in enumerate(runs):
        fs = _num(fails[i])
        x, y = _curve(r, metric)
        if not r.constant_batch:
            marks = [(at, f"{b0}->{b1}") for at, b0, b1 in switches(r)]
            marks = sorted(marks + [(at, f"LR x{l1 / l0:.2g}") for at, l0, l1 in lr_steps(r)])
            if n_sched > 1:  # several schedule runs: their switches in the legend, not in boxes
                where = ", ".join(f"{what} at {at:,.0f}" for at, what in marks) or "no switch"
                label = f"{_sched_name(r)}: {where}"
            else:
                stages = "->".join(str(v) for v in dict.fromkeys(int(v) for v in r.array("batch")))
                label = f"{_sched_name(r)} ({stages})"
            ax.plot(x, y, color="k", lw=2.0, ls=_SCHED_STYLES[n_seen % len(_SCHED_STYLES)], label=label)
            n_seen += 1
            for k, (at, what) in enumerate(marks):
                ax.axvline(at, color="k", ls=":", lw=1)
                ax.plot([at], [_at(x, y, at)], "o", color="k", ms=5)
                if n_sched == 1:
                    ax.text(
                        at,
                        0.03 + 0.06 * (k % 2),
                        f" {what} at {at:,.0f}",
                        transform=ax.get_xaxis_transform(),
                        fontsize=8,
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "0.6", "alpha": 0.9},
                    )
        if math.isfinite(fs) and x.size:
            c = "k" if not r.constant_batch else colors.get(r.batch, "k")
            if first_fail:  # a grey key: the first run's colour would read as that batch's alone
                ax.plot([], [], "X", color="0.6", mec="k", ms=10, mew=0.8, label="X: failure detected")
            ax.plot([fs], [_at(x, y, fs)], "X", color=c, mec="k", ms=10, mew=0.8)
            first_fail = False
    if target is not None and math.isfinite(_num(target)):
        ax.axhline(float(target), color="0.4", ls="--", lw=0.8, label="target")
    ax.set_xlabel("rollouts consumed (samples)")
    if metric == EVAL_METRIC:
        ax.set_ylabel("held-out accuracy (greedy)")
        ax.set_title("Progress clock: held-out accuracy vs rollouts (band: seeds min-max)")
    else:
        ax.set_ylabel(f"{'reward' if metric == 'reward_mean' else metric} (moving average)")
        ax.set_title(
            f"{'Training reward' if metric == 'reward_mean' else metric} vs rollouts (band: seeds min-max)"
        )
    # Below the axes: inside, the legend sat on the curves it names.
    _legend(ax, fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_progress_vs_batch(
    batches: Sequence[float],
    rates: Sequence[float],
    path: Path,
    *,
    critical_batch: float | None = None,
    rate_at_zero: float | None = None,
    interval: tuple[float, float] | None = None,
    rate_intervals: Sequence[Sequence[float | None] | None] | None = None,
    metric: str = "reward_mean",
    unidentified: str | None = None,
) -> Path:
    """Per-rollout progress of each run (its 95% interval as an error bar, one colour per batch)
    against the batch, with the fitted p0 max(0, 1 - B/2B*), B* and its interval; where B* is not
    identified, a note on the plot says why (``unidentified``)."""
    plt = _pyplot()
    b = np.asarray([_num(v) for v in batches], dtype=float)
    r = np.asarray([_num(v) for v in rates], dtype=float)
    ok = np.isfinite(b) & np.isfinite(r) & (b > 0)
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    ub = sorted(set(b[ok].tolist()))
    cmap = dict(zip(ub, _colors(len(ub)), strict=True))
    seen: dict[float, int] = {}
    for i in map(int, np.flatnonzero(ok)):
        k = seen.get(b[i], 0)
        seen[b[i]] = k + 1
        xi = b[i] * 2 ** (0.06 * (k - 0.5))  # seeds side by side
        iv = rate_intervals[i] if rate_intervals is not None else None
        lo, hi = (_num(iv[0]), _num(iv[1])) if iv else (math.nan, math.nan)
        yerr = None
        if math.isfinite(lo) and math.isfinite(hi):
            yerr = [[max(r[i] - lo, 0.0)], [max(hi - r[i], 0.0)]]
        ax.errorbar([xi], [r[i]], yerr=yerr, fmt="o", color=cmap[b[i]], capsize=3, ms=5)
    bstar = _num(critical_batch)
    if math.isfinite(bstar) and bstar > 0 and ok.any():
        p0 = _num(rate_at_zero)
        if not math.isfinite(p0):  # fall back to the least-squares intercept with slope fixed by B*
            p0 = float(np.nanmean(r[ok] / np.clip(1 - b[ok] / (2 * bstar), 1e-9, None)))
        grid = np.geomspace(b[ok].min() / 1.5, max(b[ok].max(), 2 * bstar) * 1.1, 200)
        fitted = p0 * np.maximum(0, 1 - grid / (2 * bstar))
        ax.plot(grid, fitted, "-", color="C3", label="fit p0 max(0, 1 - B/2B*)")
        ivtxt = ""
        if interval is not None and all(math.isfinite(_num(v)) for v in interval):
            lo_b, hi_b = float(interval[0]), float(interval[1])
            ax.axvspan(lo_b, hi_b, color="C3", alpha=0.12, label="B* 95% interval")
            ivtxt = f" [{lo_b:.0f}, {hi_b:.0f}]"
        ax.axvline(bstar, color="C3", ls="--", lw=1, label=f"B* = {bstar:.0f}{ivtxt}")
    else:
        import textwrap

        ax.text(
            0.03,
            0.05,
            textwrap.fill("B* not identified" + (f": {unidentified}" if unidentified else ""), 72),
            transform=ax.transAxes,
            ha="left",
            va="bottom",
            fontsize=7.5,
            bbox={"facecolor": "white", "alpha": 0.9, "edgecolor": "0.7"},
        )
    ax.set_xscale("log", base=2)
    if len(ub) == 1:  # one batch: centred, not at the plot's edge
        ax.set_xlim(ub[0] / 2, ub[0] * 2)
    ax.set_xlabel("rollout batch B (rollouts per update)")
    unit = "accuracy" if metric == EVAL_METRIC else "reward"
    ax.set_ylabel(f"progress ({unit} / rollout), 95% interval")
    ax.set_title("Critical batch: per-rollout progress vs batch")
    ax.axhline(0, color="k", lw=0.6)
    _legend(ax, fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_failure_signal(
    runs: Sequence[Run],
    path: Path,
    *,
    signal: str = "entropy",
    failure_samples: float | None = None,
    failure_interval: tuple[float, float] | None = None,
    forecast: tuple[float, float, float] | None = None,
    run_failures: Sequence[tuple[float | None, str | None]] | None = None,
) -> Path:
    """The failure signals against rollouts: one panel per signal that fired (``signal`` when
    none did), one colour per batch, an x where each run's detector fired (on the panel of its
    signal), the pooled failure point with its interval, and the online forecast.

    ``forecast`` is ``(made_at_samples, predicted_failure_samples, half_width)`` from an online
    forecast; ``run_failures`` is (failure samples, detector name) per run.
    """
    plt = _pyplot()
    colors = _batch_colors(runs)
    rf = list(run_failures) if run_failures is not None else [(None, None)] * len(runs)
    fired_fields = [SIGNAL_FIELDS[str(d)] for _, d in rf if str(d) in SIGNAL_FIELDS]
    fields = [
        f for f in dict.fromkeys([*fired_fields, signal]) if any(np.isfinite(r.array(f)).any() for r in runs)
    ]
    fields = fields[:2] or [signal]
    fig, axes = plt.subplots(len(fields), 1, figsize=(8, 3.3 * len(fields)), sharex=True, squeeze=False)
    order = sorted(range(len(runs)), key=lambda i: (not runs[i].constant_batch, runs[i].batch, runs[i].name))
    fs = _num(failure_samples)
    for ax, fld in zip(axes[:, 0], fields, strict=True):
        labelled: set[Any] = set()
        fired_at: dict[str, list[float]] = {}
        for i in order:
            run = runs[i]
            x, y = _curve(run, fld)
            if not x.size:
                continue
            key = run.batch if run.constant_batch else run.name
            c = colors.get(run.batch, "k") if run.constant_batch else "k"
            lab = None
            if key not in labelled:
                lab = f"B={run.batch}" if run.constant_batch else _sched_name(run)
            labelled.add(key)
            ax.plot(x, y, color=c, lw=1.1 if run.constant_batch else 1.8, label=lab)
            at, det = rf[i]
            if at is not None and math.isfinite(_num(at)) and SIGNAL_FIELDS.get(str(det)) == fld:
                ax.plot([at], [_at(x, y, float(at))], "X", color=c, mec="k", ms=10, mew=0.8)
                fired_at.setdefault(str(det), []).append(float(at))
        # one legend line per detector (runs failing close together would stack their labels)
        for det, ats in fired_at.items():
            where = f"{min(ats):,.0f}" if len(ats) == 1 else f"{min(ats):,.0f}-{max(ats):,.0f}"
            runs_txt = f"{len(ats)} run" + ("s" if len(ats) > 1 else "")
            ax.plot([], [], "X", color="0.6", mec="k", ms=8, mew=0.8, label=f"{det}: {runs_txt}, at {where}")
        if math.isfinite(fs):
            iv = failure_interval
            ok_iv = iv is not None and all(math.isfinite(_num(v)) for v in iv)
            ivtxt = f" [{_num(iv[0]):,.0f}, {_num(iv[1]):,.0f}]" if ok_iv and iv is not None else ""
            ax.axvline(fs, color="C3", ls="--", lw=1.2, label=f"pooled failure ~ {fs:,.0f}{ivtxt} rollouts")
            if ok_iv and iv is not None:
                ax.axvspan(float(iv[0]), float(iv[1]), color="C3", alpha=0.1)
            # a wide interval (its bounds are in the legend) does not squeeze the runs' curves
            ends = [float(r.samples[-1]) for r in runs if len(r)]
            if ends:
                ax.set_xlim(0, max(max(ends), fs) * 1.08)
        if forecast is not None and all(math.isfinite(_num(v)) for v in forecast):
            made, pred, hw = (float(v) for v in forecast)
            ax.errorbar(
                [pred],
                [ax.get_ylim()[0]],
                xerr=[[hw], [hw]],
                fmt="v",
                color="k",
                capsize=4,
                label=f"forecast made at {made:,.0f}",
            )
            forecast = None  # once, on the first panel
        ax.set_ylabel(f"{fld} (moving average)")
        _legend(ax, fontsize=7, ncol=2)
        ax.grid(alpha=0.3)
    fired = sum(1 for at, _ in rf if at is not None and math.isfinite(_num(at)))
    axes[0, 0].set_title(
        f"Failure clock: {', '.join(fields)} vs rollouts (x: a detector fired; {fired} runs)"
    )
    axes[-1, 0].set_xlabel("rollouts consumed (samples)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _forecast(
    runs: Sequence[Run], failure_samples: Any, signal: str = "entropy", at: float = 0.5
) -> tuple[float, float, float] | None:
    """The online failure forecast as it stood at ``at`` x the pooled failure point.

    Replays the smallest-batch run (the most records) through
    :class:`~rlvr_schedule.clocks.FailureForecast`, showing how early the failure clock is
    readable. Returns ``(made_at, predicted_failure_samples, half_width)`` or None.
    """
    fs = _num(failure_samples)
    if not runs or not math.isfinite(fs):
        return None
    from rlvr_schedule.clocks import FailureForecast

    run = min(runs, key=lambda r: r.batch)
    fc = FailureForecast(signal)
    for rec in run.records:
        if rec.samples > at * fs:
            break
        fc.update(rec)
    lo, hi = fc.interval
    pred = fc.failure_samples
    if not (math.isfinite(pred) and math.isfinite(lo) and math.isfinite(hi)):
        return None
    return float(fc.samples), float(pred), float(hi - lo) / 2


def _table(
    header: Sequence[str], rows: Sequence[Sequence[Any]], *, by_column: bool = True
) -> tuple[str, str]:
    """Markdown and HTML; ``by_column``: one number format per column (else per cell, for tables
    whose rows are different quantities)."""
    fmts = (
        [column_formatter(h, [r[i] for r in rows]) for i, h in enumerate(header)]
        if by_column
        else [_fmt] * len(header)
    )
    cells = [[f(v) for f, v in zip(fmts, row, strict=True)] for row in rows]
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(row) + " |" for row in cells]
    th = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in cells)
    return "\n".join(md), f"<table><tr>{th}</tr>{trs}</table>"


def write_report(
    runs: Sequence[Run],
    out_dir: str | Path,
    *,
    fit: Any = None,
    plan: Any = None,
    title: str = "rlvr-schedule report",
    extra_sections: Sequence[tuple[str, str]] = (),
    verdicts: Sequence[str] = (),
    glance: Sequence[tuple[str, str]] = (),
    price: float | None = None,
) -> Path:
    """Write the PNGs, ``summary.json``, ``index.md`` and ``index.html``; return the HTML path.

    ``fit`` is a :class:`rlvr_schedule.clocks.SweepFit` (computed here when None) and ``plan``
    a :class:`rlvr_schedule.planner.Plan` or None. ``extra_sections`` are (heading, markdown) pairs.
    ``verdicts`` (markdown list items, :func:`rlvr_schedule.verdicts.verdicts`) open the page, so
    it reads at a glance: what each prediction came to, then the progress curves with failures
    marked, the fitted clocks, the plan (or the ``glance`` sections: a live schedule and why),
    then the numbers behind them. ``price`` (rollouts per update; None: the plan's, else the runs'
    step times, else the default) prices the cost-to-target table and picture
    (:func:`cost_to_target_section`).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if fit is None:
        from rlvr_schedule.clocks import fit_sweep

        fit = fit_sweep(list(runs))
    fd = fit.to_dict()
    run_rows = fd.get("runs", [])
    fails = [r.get("failure_samples") for r in run_rows] if len(run_rows) == len(runs) else None

    signal = fired_signal(run_rows, runs)
    metric = str(fd.get("metric") or "reward_mean")
    if metric == EVAL_METRIC:  # the progress curve first, the training reward beside the failure clock
        curves = [
            (
                "Held-out accuracy vs samples",
                plot_reward_vs_samples(
                    runs,
                    out / "eval_vs_samples.png",
                    target=fd.get("target"),
                    failure_samples=fails,
                    metric=EVAL_METRIC,
                ),
            ),
            (
                "Training reward vs samples",
                plot_reward_vs_samples(runs, out / "reward_vs_samples.png", failure_samples=fails),
            ),
        ]
    else:
        curves = [
            (
                "Reward vs samples",
                plot_reward_vs_samples(
                    runs, out / "reward_vs_samples.png", target=fd.get("target"), failure_samples=fails
                ),
            )
        ]
    pngs = [
        *curves,
        (
            "Per-sample progress vs batch",
            plot_progress_vs_batch(
                [r.get("batch") for r in run_rows],
                [_num(r.get("rate")) if r.get("constant_batch", True) else math.nan for r in run_rows],
                out / "progress_vs_batch.png",
                critical_batch=fd.get("critical_batch"),
                rate_at_zero=fd.get("rate_at_zero"),
                interval=fd.get("critical_batch_interval"),
                rate_intervals=[r.get("rate_interval") for r in run_rows],
                metric=metric,
                unidentified=_bstar_why(fit, fd),
            ),
        ),
        (
            f"Failure signal ({signal}) vs samples",
            plot_failure_signal(
                runs,
                out / "failure_signal.png",
                signal=signal,
                failure_samples=fd.get("failure_samples"),
                failure_interval=fd.get("failure_samples_interval"),
                forecast=_forecast(runs, fd.get("failure_samples"), signal),
                run_failures=(
                    [(r.get("failure_samples"), r.get("failure_signal")) for r in run_rows]
                    if len(run_rows) == len(runs)
                    else None
                ),
            ),
        ),
    ]
    cost_md, cost_png, cost_rows = cost_to_target_section(runs, run_rows, plan, price, out)
    pngs.append(("Rollouts vs updates to target, iso-cost lines at the price", cost_png))
    extra_sections = [*extra_sections, ("Cost to target at the price", cost_md)]
    summary: dict[str, Any] = {"fit": fd, "cost_to_target": cost_rows}
    if plan is not None:
        summary["plan"] = plan.to_dict()
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=_jsonable))

    head = [
        "run",
        "batch",
        "lr after warm-up",
        "rate (accuracy/rollout)" if metric == EVAL_METRIC else "rate (reward/rollout)",
        "rate 95% interval",
        "samples to target",
        "failure samples",
        "signal",
    ]
    from rlvr_schedule.ingest.lr import training_lr

    lrs = (
        [training_lr(run).lr for run in runs]
        if len(runs) == len(run_rows)
        else [r.get("lr") for r in run_rows]
    )
    rows = [
        [
            r.get("name"),
            r.get("batch"),
            lr,
            r.get("rate"),
            _interval_text(r.get("rate_interval")),
            r.get("samples_to_target"),
            r.get("failure_samples"),
            r.get("signal", r.get("failure_signal")),  # names a divergence too
        ]
        for r, lr in zip(run_rows, lrs, strict=True)
    ]
    md_runs, html_runs = _table(head, rows)
    key = [  # counts of rollouts as whole numbers, as fit prints them
        (
            "critical batch B* (rollouts/update)",
            _count(fd.get("critical_batch")),
            _count(fd.get("critical_batch_interval")),
        ),
        (
            "failure samples (pooled)",
            _count(fd.get("failure_samples")),
            _count(fd.get("failure_samples_interval")),
        ),
        (
            "failure exponent alpha (0 = sample clock)",
            fd.get("failure_exponent"),
            fd.get("failure_exponent_interval"),
        ),
        ("target " + ("held-out accuracy" if metric == EVAL_METRIC else "reward"), fd.get("target"), None),
    ]
    md_key, html_key = _table(["quantity", "estimate", "interval"], key, by_column=False)
    how = (
        "Progress is read on held-out accuracy (greedy answers to a fixed prompt set never trained "
        "on); the failure clock on the training signals."
        if metric == EVAL_METRIC
        else "Progress is read on the training reward (no held-out accuracy logged)."
    )
    if (bstar_why := _bstar_why(fit, fd)) is not None:
        how += f" B* is not identified: {bstar_why}."
    sections_md = [f"# {title}", ""]
    sections_html = [f"<h1>{html.escape(title)}</h1>"]
    # the first view: verdicts, the progress curves with failures marked, both clocks with their
    # intervals, the schedule and why
    if verdicts:
        sections_md += ["## Verdicts on the predictions", "", *verdicts, ""]
        items = "".join(f"<li>{html.escape(v.lstrip('- '))}</li>" for v in verdicts)
        sections_html += ["<h2>Verdicts on the predictions</h2>", f"<ul>{items}</ul>"]
    first, rest = pngs[0], pngs[1:]
    sections_md += [f"## {first[0]}", "", f"![{first[0]}]({first[1].name})", ""]
    sections_html += [
        f"<h2>{html.escape(first[0])}</h2>",
        f'<img src="{first[1].name}" alt="{html.escape(first[0])}">',
    ]
    sections_md += ["## Fitted clocks", "", how, "", md_key, ""]
    sections_html += ["<h2>Fitted clocks</h2>", f"<p>{html.escape(how)}</p>", html_key]
    if plan is not None:
        pd = plan.to_dict()
        stages = pd["stages"]
        why_col = any(st.get("reason") for st in stages)
        md_plan, html_plan = _table(
            ["batch", "lr", "until samples", *(["why"] if why_col else [])],
            [
                [
                    st.get("batch"),
                    st.get("lr"),
                    st.get("until_samples"),
                    *([plain_reason(st.get("reason") or "")] if why_col else []),
                ]
                for st in stages
            ],
        )
        notes = [f"- {n}" for n in (*_plan_why(pd, fd), *pd.get("notes", []))]
        sections_md += ["## Planned schedule and why", "", *notes, "", md_plan, ""]
        sections_html += ["<h2>Planned schedule and why</h2>"]
        if notes:
            sections_html.append("<ul>" + "".join(f"<li>{html.escape(n[2:])}</li>" for n in notes) + "</ul>")
        sections_html.append(html_plan)
    for heading, body in glance:
        sections_md += [f"## {heading}", "", body, ""]
        sections_html += [f"<h2>{html.escape(heading)}</h2>", f"<pre>{html.escape(body)}</pre>"]
    sections_md += ["## Runs", "", md_runs, ""]
    sections_html += ["<h2>Runs</h2>", html_runs]
    for heading, body in extra_sections:
        sections_md += [f"## {heading}", "", body, ""]
        sections_html += [f"<h2>{html.escape(heading)}</h2>", f"<pre>{html.escape(body)}</pre>"]
    for name, p in rest:
        sections_md += [f"## {name}", "", f"![{name}]({p.name})", ""]
        sections_html += [f"<h2>{html.escape(name)}</h2>", f'<img src="{p.name}" alt="{html.escape(name)}">']
    (out / "index.md").write_text("\n".join(sections_md))
    style = (
        "body{font-family:sans-serif;max-width:960px;margin:auto}td,th{border:1px solid #ccc;padding:3px 6px}"
        "table{border-collapse:collapse}img{max-width:100%}"
    )
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>{''.join(sections_html)}</body></html>"
    )
    index = out / "index.html"
    index.write_text(page)
    return index


def _plan_why(pd: dict[str, Any], fd: dict[str, Any]) -> list[str]:
    """Why the plan looks as it does, in the clocks' terms: where it starts against B*, and where
    its first switch falls against the failure clock."""
    out = []
    stages = pd.get("stages") or []
    bstar = _num(pd.get("critical_batch", fd.get("critical_batch")))
    if stages and math.isfinite(bstar) and bstar > 0:
        b0 = _num(stages[0].get("batch"))
        keep = max(0.0, 1 - b0 / (2 * bstar))
        out.append(
            f"starts at batch {b0:.0f} = {b0 / bstar:.2g} x B* ({bstar:,.0f}): below the critical batch, "
            f"each rollout keeps {keep:.0%} of the small-batch progress"
        )
    f = _num(pd.get("failure_samples", fd.get("failure_samples")))
    first = _num(stages[0].get("until_samples")) if stages else math.nan
    if math.isfinite(f) and f > 0 and math.isfinite(first) and len(stages) > 1:
        out.append(
            f"first switch at {first:,.0f} rollouts = {first / f:.2g} of the failure clock ({f:,.0f}): "
            "larger batches from there on reach further before the failure arrives"
        )
    return out


def _interval_text(iv: Any) -> str:
    """``[lo, hi]`` with 3 significant digits (``-`` where unbounded or missing)."""
    if not iv or len(iv) != 2:
        return "-"
    return "[" + ", ".join(_fmt(_num(v)) if math.isfinite(_num(v)) else "-" for v in iv) + "]"


def _jsonable(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)


def cost_to_target_section(
    runs: Sequence[Run], run_rows: Sequence[dict[str, Any]], plan: Any, price: float | None, out: Path
) -> tuple[str, Path, dict[str, Any]]:
    """The cost to target at the price (rollouts + price x updates) of every constant run and of the
    plan's prediction, the cheapest marked: (markdown table, the picture's path, the rows for
    ``summary.json``). The price: ``price``, else the plan's, else the runs' step times, else the
    default (:mod:`rlvr_schedule.policy.price`)."""
    from rlvr_schedule.policy.price import DEFAULT_PRICE, StepTimeFit, run_cost

    source = "stated"
    if price is None and plan is not None and getattr(plan, "price", None):
        price, source = float(plan.price["rollouts_per_update"]), f"the plan's ({plan.price.get('source')})"
    if price is None:
        fit = StepTimeFit.from_runs(runs)
        price, source = (
            (float(fit.price_), "measured from the runs' step times")
            if fit.unidentified_ is None
            else (DEFAULT_PRICE, f"default (not identified: {fit.unidentified_})")
        )
    points: list[tuple[str, float, float]] = []
    for r in run_rows:
        stt, b = _num(r.get("samples_to_target")), _num(r.get("batch"))
        if math.isfinite(stt) and b > 0:
            points.append((f"{r.get('name')} (batch {int(b)})", stt, stt / b))
    pred = (plan.to_dict().get("predicted") or {}) if plan is not None else {}
    if pred.get("samples_to_target") and pred.get("steps_to_target"):
        points.append(("plan (predicted)", float(pred["samples_to_target"]), float(pred["steps_to_target"])))
    costs = [run_cost(s, u, price) for _, s, u in points]
    cheapest = int(np.argmin(costs)) if costs else -1
    rows = [
        [name + (" **cheapest**" if i == cheapest else ""), round(s), round(u), round(c)]
        for i, ((name, s, u), c) in enumerate(zip(points, costs, strict=True))
    ]
    md, _ = _table(["run", "rollouts to target", "updates to target", "cost (rollouts)"], rows)
    md = f"Price {price:.3g} rollouts per update ({source}); cost = rollouts + price x updates.\n\n" + md
    png = plot_cost_to_target(points, price, out / "cost_to_target.png", cheapest=cheapest)
    summary = dict(
        price=price,
        source=source,
        rows=[
            dict(name=n, rollouts=s, updates=u, cost=c, cheapest=i == cheapest)
            for i, ((n, s, u), c) in enumerate(zip(points, costs, strict=True))
        ],
    )
    return md, png, summary


def plot_cost_to_target(
    points: Sequence[tuple[str, float, float]], price: float, path: Path, *, cheapest: int = -1
) -> Path:
    """Rollouts against updates to the target, one point per run (and the plan), with iso-cost lines
    rollouts + price x updates = C: every point on a line costs the same GPU time."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.5, 4.6))
    if points:
        xs = np.array([p[1] for p in points])
        ys = np.array([p[2] for p in points])
        c_min = float(np.min(xs + price * ys))
        x_hi, y_hi = float(xs.max()) * 1.3, float(ys.max()) * 1.3
        grid = np.linspace(0.0, x_hi, 200)
        for k in (1.0, 1.25, 1.5, 2.0, 3.0):
            c = c_min * k
            ax.plot(
                grid, (c - grid) / price if price > 0 else np.full_like(grid, np.nan), color="0.8", lw=0.8
            )
            if price > 0:  # the label inside the axes, where the line leaves them (top or right)
                x_at = min(max(c - price * 0.95 * y_hi, 0.0), 0.97 * x_hi)
                y_at = (c - x_at) / price
                if 0 <= y_at <= y_hi and x_at < c:
                    ax.annotate(f"{k:g}x", (x_at, y_at), fontsize=7, color="0.45", ha="right", va="bottom")
        colors = _colors(len(points))  # the report's palette, as in its other plots
        for i, (name, x, y) in enumerate(points):  # named in the legend: seeds of one batch sit close
            marker = "*" if i == cheapest else ("s" if name.startswith("plan") else "o")
            ax.scatter(
                [x],
                [y],
                marker=marker,
                s=120 if i == cheapest else 40,
                zorder=3,
                color=colors[i],
                label=name + (" (cheapest)" if i == cheapest else ""),
            )
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        ax.set_xlim(0, x_hi)
        ax.set_ylim(0, y_hi)
    else:
        ax.text(0.5, 0.5, "no run reached the target", ha="center", transform=ax.transAxes)
    ax.set_xlabel("rollouts to target")
    ax.set_ylabel("updates to target")
    ax.set_title(
        f"cost to target at {price:.3g} rollouts/update (grey: iso-cost lines; star: the cheapest)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
