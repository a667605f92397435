"""The collapse watch beside rlwatch on the project's real runs, with the same records.

Both see each labelled run of ``tests/data/real/runs`` as the product's reader reads it
(``load_run``, one record per logged row): rlwatch's detectors (``rlwatch.detectors.DetectorSuite``
with its default config, fed entropy, KL, reward mean/std, loss and grad norm, as its TRL callback
feeds them) and the collapse watch (:class:`~rlvr_schedule.clocks.failure.alarms.CollapseWatch`).
Scored per run: the first alarm (rlwatch: any alert, and the first critical one; the watch: the first
raised alarm, and its failure), healthy runs with one, collapses with one at or before the labelled
collapse point, and the lead in logged rows. Needs ``pip install -r requirements/bench.txt``.

    python -m benchmarks.evidence.rlwatch_side_by_side [--part calibration|test|all]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys

from benchmarks.fixtures.real_runs import SPLIT, load_real  # the published logs, read by the product
from rlvr_schedule.clocks.failure.alarms import CollapseWatch


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def rlwatch_firsts(records) -> tuple[int | None, int | None]:  # type: ignore[no-untyped-def]
    """Rows of rlwatch's first alert and first critical alert (None: none)."""
    from rlwatch.config import RLWatchConfig
    from rlwatch.detectors import DetectorSuite

    suite = DetectorSuite(RLWatchConfig())
    first = critical = None
    for row, r in enumerate(records):
        alerts = suite.check_step(
            int(r.step),
            entropy=_num(r.entropy),
            kl_divergence=_num(r.kl),
            reward_mean=_num(r.reward_mean),
            reward_std=_num(r.reward_std),
            loss=_num(r.extra.get("loss", math.nan)),
            grad_norm=_num(r.grad_norm),
        )
        if alerts and first is None:
            first = row
        if critical is None and any(a.severity == "critical" for a in alerts):
            critical = row
    return first, critical


def rldoctor_firsts(records) -> tuple[int | None, int | None]:  # type: ignore[no-untyped-def]
    """Rows of rldoctor's live monitor's (``rl_doctor.live.LiveMonitor``, defaults) first finding at
    warning and at critical severity, fed each record as a TRL metrics dict (None: none)."""
    from rl_doctor.detectors.base import Severity
    from rl_doctor.live import LiveMonitor

    mon = LiveMonitor(on_finding=lambda f: None)
    warn = critical = None
    for row, r in enumerate(records):
        metrics = {
            k: v
            for k, v in {
                "reward": _num(r.reward_mean),
                "reward_std": _num(r.reward_std),
                "entropy": _num(r.entropy),
                "kl": _num(r.kl),
                "grad_norm": _num(r.grad_norm),
                "completion_length": _num(r.response_length),
                "learning_rate": _num(r.lr),
            }.items()
            if v is not None
        }
        for f in mon.log(metrics, step=int(r.step)):
            warn = row if warn is None else warn
            if critical is None and f.severity >= Severity.CRITICAL:
                critical = row
    return warn, critical


def watch_firsts(records) -> tuple[int | None, int | None, int | None]:  # type: ignore[no-untyped-def]
    """Rows of the collapse watch's first raised alarm, of its failure (where it is raised) and of the
    failure clock's onset (what section 5 scores; known only once raised) (None: none)."""
    from rlvr_schedule.clocks.failure import FailureClock

    clock = FailureClock().fit(records)
    onset = None
    if clock.failure_step_ is not None:
        onset = next(i for i, r in enumerate(records) if r.step >= clock.failure_step_)
    w = CollapseWatch()
    first = failure = None
    for row, r in enumerate(records):
        raised = w.update(r)
        if raised and first is None:
            first = row
        if failure is None and any(a.kind == "failure" for a in raised):
            failure = row
    return first, failure, onset


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("calibration", "test", "all"), default="all")
    p.add_argument(
        "--rldoctor", action="store_true", help="rldoctor's live monitor too (pip install rldoctor)"
    )
    a = p.parse_args(argv)
    logging.disable(logging.WARNING)
    names = [n for part in ("calibration", "test") if a.part in (part, "all") for n in SPLIT[part]]
    cols = (
        "rlwatch, first alert",
        "rlwatch, first critical alert",
        *(("rldoctor live, first warning", "rldoctor live, first critical") if a.rldoctor else ()),
        "watch, first raised alarm",
        "watch, failure raised",
        "failure clock, onset",
    )
    healthy = {c: 0 for c in cols}
    in_time = {c: 0 for c in cols}
    leads: dict[str, list[int]] = {c: [] for c in cols}
    n_h = n_c = 0
    rows = []
    for name in names:
        lab = SPLIT["labels"][name]
        recs = load_real(name).records
        doc = rldoctor_firsts(recs) if a.rldoctor else ()
        firsts = dict(zip(cols, (*rlwatch_firsts(recs), *doc, *watch_firsts(recs)), strict=True))
        if lab["label"] == "healthy":
            n_h += 1
            for c, f in firsts.items():
                healthy[c] += f is not None
            continue
        n_c += 1
        crow = next(i for i, r in enumerate(recs) if r.step >= lab["collapse_step"])
        for c, f in firsts.items():
            if f is not None:
                leads[c].append(crow - f)
                in_time[c] += f <= crow
        rows.append({"run": name, "collapse_row": crow, **firsts})
    print(f"{len(names)} runs ({a.part}): {n_h} healthy, {n_c} collapsed")
    print(
        "| | collapses flagged | at or before the collapse point | lead, logged rows: median (range) "
        "| healthy runs flagged |"
    )
    print("|---|---|---|---|---|")
    for c in cols:
        lead = leads[c]
        lr = f"{statistics.median(lead):g} ({min(lead)} .. {max(lead)})" if lead else "-"
        print(f"| {c} | {len(lead)}/{n_c} | {in_time[c]}/{n_c} | {lr} | {healthy[c]}/{n_h} |")
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
