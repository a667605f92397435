"""The report reads at a glance: verdicts first, a rate interval per run, the schedule's
switches found where the batch changed (tests/data/demo: the fresh-clone demo's sweep)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvr_schedule.records import Run, StepRecord
from rlvr_schedule.report import lr_steps, switches, write_report
from rlvr_schedule.verdicts import verdicts

DEMO = Path(__file__).parents[1] / "data" / "demo" / "demo_sweep_rewards.json"


def _demo_runs() -> list[Run]:
    d = json.loads(DEMO.read_text())
    return [
        Run(
            [
                StepRecord(step=i + 1, samples=s, batch=r["batch"], lr=r["lr"], reward_mean=y)
                for i, (s, y) in enumerate(zip(r["samples"], r["reward_mean"], strict=True))
            ],
            name=name,
        )
        for name, r in d["runs"].items()
    ]


def _schedule_run() -> Run:
    """16 -> 32 after 784 rollouts, 32 -> 64 after 8240 (the demo schedule's switch points)."""
    recs, samples, step = [], 0, 0
    while samples < 14336:
        b = 16 if samples < 784 else 32 if samples < 8240 else 64
        samples += b
        step += 1
        recs.append(
            StepRecord(step=step, samples=samples, batch=b, lr=3e-4, reward_mean=0.1 + samples / 30000)
        )
    return Run(recs, name="schedule s0")


def test_switches_are_where_the_batch_changed() -> None:
    assert switches(_schedule_run()) == [(784.0, 16, 32), (8240.0, 32, 64)]
    assert switches(_demo_runs()[0]) == []


def test_an_lr_step_at_an_unchanged_batch_is_found_and_a_warm_up_or_decay_is_not() -> None:
    # warm-up 1e-5 -> 3e-4 over 20 updates, linear decay to 2.4e-4, then the policy's LR / sqrt(2)
    # at 64 (its largest batch), then a decay toward 0 (a large ratio per update near the end)
    recs, samples = [], 0
    lrs = [3e-4 * (i + 1) / 20 for i in range(20)] + [3e-4 - 1e-6 * i for i in range(60)]
    lrs += [lrs[-1] / 2**0.5] * 40 + [lrs[-1] / 2**0.5 * (1 - i / 40) for i in range(40)]
    for i, lr in enumerate(lrs):
        samples += 64
        recs.append(StepRecord(step=i + 1, samples=samples, batch=64, lr=lr, reward_mean=0.3))
    (at, before, after), *rest = lr_steps(Run(recs, name="schedule s0"))
    assert at == 80 * 64 and after / before == pytest.approx(2**-0.5) and rest == []
    assert lr_steps(_schedule_run()) == []  # batch switches at one LR: none


def test_report_opens_with_verdicts_and_gives_every_run_a_rate_interval(tmp_path: Path) -> None:
    from rlvr_schedule.clocks import fit_sweep

    runs = [*_demo_runs(), _schedule_run()]
    fit = fit_sweep(runs)
    index = write_report(runs, tmp_path, fit=fit, verdicts=verdicts(fit.to_dict()))
    md = (tmp_path / "index.md").read_text()
    assert index.exists() and md.index("## Verdicts on the predictions") < md.index("## Fitted clocks")
    assert "per-sample progress falls above B*: yes" in md
    for png in ("reward_vs_samples.png", "progress_vs_batch.png", "failure_signal.png"):
        assert (tmp_path / png).stat().st_size > 10_000
    rows = json.loads((tmp_path / "summary.json").read_text())["fit"]["runs"]
    assert len(rows) == len(runs)
    for r in rows:
        lo, hi = r["rate_interval"]
        assert lo <= r["rate"] <= hi, r
    sched = next(r for r in rows if r["name"] == "schedule s0")
    assert sched["constant_batch"] is False


def _eval_run(batch: int, seed: int, fail_at: float | None) -> Run:
    """Held-out accuracy every 256 rollouts; entropy collapsing at ``fail_at`` (None: never)."""
    import numpy as np

    rng = np.random.default_rng([batch, seed])
    recs, s = [], 0
    while s < 12288:
        ent = 1.0 if fail_at is None or s < fail_at else max(0.02, 1.0 - (s - fail_at) / 800)
        extra = {}
        if s == 0 or s // 256 != (s + batch) // 256:
            extra["eval_accuracy"] = float(min(0.8, 0.05 + s * 6e-5 * (1 - batch / 256)))
        s += batch
        recs.append(
            StepRecord(
                step=len(recs) + 1,
                samples=s,
                batch=batch,
                lr=3e-4,
                reward_mean=float(0.3 + rng.normal(0, 0.05)),
                entropy=float(ent + rng.normal(0, 0.01)),
                extra=extra,
            )
        )
    return Run(recs, name=f"b{batch}-s{seed}")


def test_first_view_is_the_eval_story_and_plots_are_readable(tmp_path: Path, monkeypatch) -> None:
    """Eval curves first, then the clocks; no stacked failure labels, no empty legend, no warning."""
    import warnings

    import matplotlib.pyplot as plt

    from rlvr_schedule.clocks import fit_sweep

    runs = [
        _eval_run(b, s, 9000.0 + 40 * s if b <= 32 else None) for s in (0, 1) for b in (8, 16, 32, 64, 128)
    ]
    figs = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: figs.append(fig))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning (matplotlib's included) fails the test
        fit = fit_sweep(runs, n_boot=50)
        write_report(
            runs,
            tmp_path,
            fit=fit,
            verdicts=verdicts(fit.to_dict()),
            glance=[("The live schedule and why", "x")],
        )
    assert fit.metric == "eval_accuracy"
    md = (tmp_path / "index.md").read_text()
    order = [
        "## Verdicts",
        "## Held-out accuracy vs samples",
        "## Fitted clocks",
        "## The live schedule and why",
        "## Runs",
    ]
    assert [md.index(h) for h in order] == sorted(md.index(h) for h in order)
    assert "held-out accuracy" in md[md.index("## Fitted clocks") : md.index("## Runs")]
    for fig in figs:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        for ax in fig.axes:
            texts = [t for t in ax.texts if t.get_visible() and t.get_text()]
            boxes = [t.get_window_extent(renderer) for t in texts]
            for i, a in enumerate(boxes):  # no label on top of another
                for j in range(i):
                    assert not a.overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
            leg = ax.get_legend()
            assert leg is None or leg.get_texts()
        real_close(fig)
    fail_fig = next(f for f in figs if "Failure clock" in f.axes[0].get_title())
    assert not fail_fig.axes[0].texts  # failures go to the legend
    labels = [t.get_text() for t in fail_fig.axes[0].get_legend().get_texts()]
    assert any(lab.startswith("entropy_collapse: 6 runs, at") for lab in labels), labels
