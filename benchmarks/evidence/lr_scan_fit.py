"""The LR scan's side figures (LR_SCAN_PLAN.md, scan v2: "also reported"), from ``scan.json``.

- the log-log slope of the rate against the LR over the LRs where fewer than ``min_failures`` runs
  failed: ordinary least squares over every run's (log LR, log rate), with a 95% t-interval
  (the regime has slope 1);
- the fixed part: rollouts to the target implied by each LR's mean rate, E = (target - initial) /
  rate, fitted as E = E0 + K / lr (least squares over the same LRs; lr at the scan's batch).

    python -m benchmarks.evidence.lr_scan_fit runs/scan_v2/scan.json
"""

from __future__ import annotations

import json
import math
import sys

import numpy as np


def side_figures(scan: dict, *, min_failures: int = 2) -> dict:
    from rlvr_schedule.clocks._stats import t_quantile

    rows = [r for r in scan["rows"] if r["runs"] and r["failures"] < min_failures]
    x, y = [], []
    for r in rows:
        for rate in r["rates"]:
            if rate is not None and rate > 0:
                x.append(math.log(r["lr_at_batch"]))
                y.append(math.log(rate))
    out: dict = {"lrs": [r["base_lr"] for r in rows]}
    if len(set(x)) >= 2 and len(x) >= 3:
        X = np.column_stack([np.ones(len(x)), x])
        coef, res, *_ = np.linalg.lstsq(X, np.array(y), rcond=None)
        dof = len(x) - 2
        s2 = float(res[0]) / dof if res.size and dof > 0 else math.nan
        se = math.sqrt(s2 * np.linalg.inv(X.T @ X)[1, 1]) if dof > 0 else math.nan
        hw = float(t_quantile(0.975, dof)) * se if dof > 0 else math.nan
        out["slope"] = float(coef[1])
        out["slope_interval"] = [float(coef[1]) - hw, float(coef[1]) + hw]
        out["runs"] = len(x)
    climb = scan["fit"]["target"] - scan["fit"]["initial_reward"]
    pts = [
        (1.0 / r["lr_at_batch"], climb / r["rate_mean"])
        for r in rows
        if r["rate_mean"] and r["rate_mean"] > 0
    ]
    if len(pts) >= 2:
        A = np.column_stack([np.ones(len(pts)), [p[0] for p in pts]])
        e = np.array([p[1] for p in pts])
        (e0, k), *_ = np.linalg.lstsq(A, e, rcond=None)
        out.update(E0=float(e0), K=float(k), residuals=[float(v) for v in (e - A @ np.array([e0, k])) / e])
        out["E_by_lr"] = {f"{r['base_lr']:g}": climb / r["rate_mean"] for r in rows if r["rate_mean"]}
    return out


if __name__ == "__main__":
    print(json.dumps(side_figures(json.loads(open(sys.argv[1]).read())), indent=2))
