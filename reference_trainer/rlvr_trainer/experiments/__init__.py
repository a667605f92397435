"""The experiment harness on top of the trainer: batch sweeps, the live two-clock schedule, the
evidence runs and LR scan, the comparison against baselines, and their reports with verdicts.

It uses :mod:`rlvr_trainer.train`; the trainer never imports it. ``rlvr-trainer`` (the CLI) is
the one module above it.
"""

from rlvr_trainer.experiments.runs import (
    SCAN_DESIGNS,
    SCAN_LRS,
    compare,
    evidence,
    evidence_report,
    lr_grid,
    lr_scan,
    policy_config,
    read_run,
    report,
    run_one,
    scan_design,
    scan_report,
    schedule,
    summarize,
    sweep,
)

__all__ = [
    "run_one",
    "sweep",
    "schedule",
    "compare",
    "report",
    "evidence",
    "evidence_report",
    "lr_scan",
    "scan_report",
    "SCAN_LRS",
    "SCAN_DESIGNS",
    "scan_design",
    "lr_grid",
    "policy_config",
    "read_run",
    "summarize",
]
