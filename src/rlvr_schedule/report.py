"""Reports: PNG plots of both clocks and a summary page (Markdown + HTML).

matplotlib is imported inside the functions (Agg backend), so the core stays numpy-only.
The three plots answer the project's questions for a sweep: does reward per sample fall
with batch (reward vs samples), where is the critical batch (per-sample progress vs batch
with the fitted curve), and when does each run fail (failure signal vs samples).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlvr_schedule._format import column_formatter
from rlvr_schedule._format import fmt as _fmt
from rlvr_schedule.records import Run

__all__ = [
    "plot_reward_vs_samples",
    "plot_progress_vs_batch",
    "plot_failure_signal",
    "write_report",
]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _colors(n: int) -> list[Any]:
    plt = _pyplot()
    cmap = plt.get_cmap("viridis")
    return [cmap(i / max(n - 1, 1)) for i in range(n)]


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


def plot_reward_vs_samples(
    runs: Sequence[Run],
    path: Path,
    *,
    target: float | None = None,
    failure_samples: Sequence[float | None] | None = None,
) -> Path:
    """Reward mean against rollouts consumed, one line per run, sorted by batch."""
    plt = _pyplot()
    order = sorted(range(len(runs)), key=lambda i: runs[i].batch)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for c, i in zip(_colors(len(runs)), order):
        run = runs[i]
        x, y = run.samples, run.array("reward_mean")
        ok = np.isfinite(y)
        ax.plot(x[ok], _smooth(y[ok]), color=c, lw=1.4, label=_label(run, runs))
        fs = failure_samples[i] if failure_samples is not None else None
        if fs is not None and math.isfinite(_num(fs)):
            ax.axvline(float(fs), color=c, ls=":", lw=1)
    if target is not None and math.isfinite(_num(target)):
        ax.axhline(float(target), color="k", ls="--", lw=0.8, label="target")
    ax.set_xlabel("rollouts consumed (samples)")
    ax.set_ylabel("reward (smoothed)")
    ax.set_title("Progress clock: reward vs samples (dotted: detected failure)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _smooth(y: np.ndarray, frac: float = 0.03) -> np.ndarray:
    w = max(1, int(len(y) * frac))
    if w <= 1:
        return y
    kernel = np.ones(w) / w
    pad = np.concatenate([np.full(w - 1, y[0]), y])
    return np.convolve(pad, kernel, mode="valid")


def plot_progress_vs_batch(
    batches: Sequence[float],
    rates: Sequence[float],
    path: Path,
    *,
    critical_batch: float | None = None,
    rate_at_zero: float | None = None,
    interval: tuple[float, float] | None = None,
) -> Path:
    """Per-sample progress against rollout batch, with the theory's line p0 (1 - B / 2B*)."""
    plt = _pyplot()
    b = np.asarray(batches, dtype=float)
    r = np.asarray(rates, dtype=float)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(b, r, "o", color="C0", label="measured runs")
    bstar = _num(critical_batch)
    if math.isfinite(bstar) and bstar > 0:
        p0 = _num(rate_at_zero)
        if not math.isfinite(p0):  # fall back to the least-squares intercept with slope fixed by B*
            p0 = float(np.nanmean(r / np.clip(1 - b / (2 * bstar), 1e-9, None)))
        grid = np.linspace(0, max(b.max(), 2 * bstar) * 1.05, 200)
        ax.plot(
            grid, p0 * (1 - grid / (2 * bstar)), "-", color="C1", label=f"fit p0(1 - B/2B*), B* = {bstar:.0f}"
        )
        ax.axvline(bstar, color="C1", ls="--", lw=1)
        if interval is not None and all(math.isfinite(_num(v)) for v in interval):
            ax.axvspan(float(interval[0]), float(interval[1]), color="C1", alpha=0.12, label="B* interval")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rollout batch B (rollouts per update)")
    ax.set_ylabel("per-sample progress (reward / rollout)")
    ax.set_title("Critical batch: per-sample progress vs batch")
    ax.axhline(0, color="k", lw=0.6)
    ax.legend(fontsize=8)
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
) -> Path:
    """The failure signal (entropy by default) against samples, with the pooled failure point.

    ``forecast`` is ``(made_at_samples, predicted_failure_samples, half_width)`` from an online
    forecast, drawn as an arrow from where it was made to where it points.
    """
    plt = _pyplot()
    order = sorted(range(len(runs)), key=lambda i: runs[i].batch)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for c, i in zip(_colors(len(runs)), order):
        run = runs[i]
        y = run.array(signal)
        ok = np.isfinite(y)
        if ok.any():
            ax.plot(run.samples[ok], y[ok], color=c, lw=1.2, label=_label(run, runs))
    fs = _num(failure_samples)
    if math.isfinite(fs):
        ax.axvline(fs, color="C3", ls="--", lw=1.2, label=f"pooled failure ~ {fs:,.0f} samples")
        if failure_interval is not None and all(math.isfinite(_num(v)) for v in failure_interval):
            ax.axvspan(float(failure_interval[0]), float(failure_interval[1]), color="C3", alpha=0.1)
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
    ax.set_xlabel("rollouts consumed (samples)")
    ax.set_ylabel(signal)
    ax.set_title(f"Failure clock: {signal} vs samples")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
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
    cells = [[f(v) for f, v in zip(fmts, row)] for row in rows]
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
) -> Path:
    """Write the PNGs, ``summary.json``, ``index.md`` and ``index.html``; return the HTML path.

    ``fit`` is a :class:`rlvr_schedule.clocks.SweepFit` (computed here when None) and ``plan``
    a :class:`rlvr_schedule.planner.Plan` or None. ``extra_sections`` are (heading, markdown) pairs.
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
    pngs = [
        (
            "Reward vs samples",
            plot_reward_vs_samples(
                runs, out / "reward_vs_samples.png", target=fd.get("target"), failure_samples=fails
            ),
        ),
        (
            "Per-sample progress vs batch",
            plot_progress_vs_batch(
                [r.get("batch") for r in run_rows],
                [_num(r.get("rate")) for r in run_rows],
                out / "progress_vs_batch.png",
                critical_batch=fd.get("critical_batch"),
                rate_at_zero=fd.get("rate_at_zero"),
                interval=fd.get("critical_batch_interval"),
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
            ),
        ),
    ]
    summary: dict[str, Any] = {"fit": fd}
    if plan is not None:
        summary["plan"] = plan.to_dict()
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=_jsonable))

    head = [
        "run",
        "batch",
        "lr after warm-up",
        "rate (reward/rollout)",
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
            r.get("samples_to_target"),
            r.get("failure_samples"),
            r.get("failure_signal"),
        ]
        for r, lr in zip(run_rows, lrs)
    ]
    md_runs, html_runs = _table(head, rows)
    key = [
        ("critical batch B* (rollouts/update)", fd.get("critical_batch"), fd.get("critical_batch_interval")),
        ("failure samples (pooled)", fd.get("failure_samples"), fd.get("failure_samples_interval")),
        (
            "failure exponent alpha (0 = sample clock)",
            fd.get("failure_exponent"),
            fd.get("failure_exponent_interval"),
        ),
        ("target reward", fd.get("target"), None),
    ]
    md_key, html_key = _table(["quantity", "estimate", "interval"], key, by_column=False)
    sections_md = [f"# {title}", "", "## Fitted clocks", "", md_key, "", "## Runs", "", md_runs, ""]
    sections_html = [
        f"<h1>{html.escape(title)}</h1>",
        "<h2>Fitted clocks</h2>",
        html_key,
        "<h2>Runs</h2>",
        html_runs,
    ]
    if plan is not None:
        pd = plan.to_dict()
        md_plan, html_plan = _table(
            ["batch", "lr", "until samples"],
            [[s.get("batch"), s.get("lr"), s.get("until_samples")] for s in pd["stages"]],
        )
        sections_md += ["## Planned schedule", "", md_plan, ""]
        sections_html += ["<h2>Planned schedule</h2>", html_plan]
    for heading, body in extra_sections:
        sections_md += [f"## {heading}", "", body, ""]
        sections_html += [f"<h2>{html.escape(heading)}</h2>", f"<pre>{html.escape(body)}</pre>"]
    for name, p in pngs:
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


def _jsonable(o: Any) -> Any:
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return None if not np.isfinite(o) else float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    return str(o)
