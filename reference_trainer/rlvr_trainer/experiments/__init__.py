"""The experiment harness on top of the trainer: batch sweeps, the live two-clock schedule, the
evidence runs and LR scan, the comparison against baselines, and their reports with verdicts.

It uses :mod:`rlvr_trainer.train`; the trainer never imports it. ``rlvr-trainer`` (the CLI) is
the one module above it. Inside, from the bottom: ``tables`` (number formats, strict JSON),
``rundirs`` (a run directory read back; finished or not), ``runs`` (run, sweep, schedule, compare,
evidence and their reports), ``scan`` (the LR scan), ``comparison`` (the recipe against baselines).
"""

from rlvr_trainer.experiments.rundirs import finished, read_run
from rlvr_trainer.experiments.runs import (
    compare,
    evidence,
    evidence_report,
    fits_by_lr,
    lr_grid,
    policy_config,
    report,
    run_one,
    schedule,
    summarize,
    sweep,
)
from rlvr_trainer.experiments.scan import SCAN_DESIGNS, SCAN_LRS, lr_scan, scan_design, scan_report

__all__ = [
    "run_one",
    "sweep",
    "schedule",
    "compare",
    "report",
    "evidence",
    "evidence_report",
    "fits_by_lr",
    "lr_scan",
    "scan_report",
    "SCAN_LRS",
    "SCAN_DESIGNS",
    "scan_design",
    "lr_grid",
    "policy_config",
    "read_run",
    "finished",
    "summarize",
]
