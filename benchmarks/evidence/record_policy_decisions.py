"""Record the two-clock policy's decisions on the synthetic section 3a runs (RESULTS.md), for the
regression test ``tests/core/test_policy_regression.py``.

Each run is the closed loop of the synthetic comparison that ``schedules_v3`` replaced (the
retired ``schedules_vs_baselines.py``, last at commit f108f2e; two-clock, v3 defaults, the
task's failure exponent) on one scenario and seed; the file keeps the policy config, every record
the policy saw and every decision it answered. The test replays the records into a fresh policy and
asserts the same decisions, so a refactor that changes a decision fails it. Re-run this only when a
decision change is intended (and say why in the commit):

    python -m benchmarks.evidence.record_policy_decisions tests/data/regression
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_schedule.policy.baselines import LinearRampSchedule, NoiseScaleAdaptiveSchedule
from rlvr_schedule.synthetic import SyntheticEnvironment

BASE_BATCH, LR0, GROUP = 64, 1e-6, 8
# name: (B* at the start, failure samples, drift, smallest and largest batch, failure exponent)
SCENARIOS = {
    "drift15": (32, 20_000, 15.0, 8, 128, 0.0),
    "drift3": (256, 50_000, 3.0, 32, 512, 0.0),
    "static": (256, 50_000, 0.0, 32, 512, 0.0),
    "drift3-alpha": (256, 50_000, 3.0, 32, 512, 0.5),
}
SEEDS = (0, 1)


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, (bstar, fail, drift, lo, hi, alpha) in SCENARIOS.items():
        for seed in SEEDS:
            cfg = PolicyConfig(
                initial_batch="auto",
                fallback_batch=lo,
                base_batch=BASE_BATCH,
                base_lr=LR0,
                constraints=BatchConstraints(group_size=GROUP, max_batch=hi),
                failure_exponent=alpha,
            )
            env = SyntheticEnvironment(
                critical_batch=bstar,
                failure_samples=fail,
                drift=drift,
                lr0=LR0,
                base_batch=BASE_BATCH,
                seed=seed,
                failure_exponent=alpha,
            )
            run = env.run(TwoClockScheduler(cfg), 1.5 * fail)
            doc = {
                "scenario": name,
                "seed": seed,
                "config": cfg.to_dict(),
                "records": [r.to_dict() for r in run.records],
                "decisions": [d.to_dict() for d in env.decisions],
            }
            path = out / f"two_clock_3a_{name}_seed{seed}.json.gz"
            with gzip.open(path, "wt", encoding="utf-8") as fh:
                json.dump(doc, fh)
            n_sw = sum(d.switched for d in env.decisions)
            print(f"{path.name}: {len(run.records)} records, {n_sw} switches")
    # the baselines (section 3a's noise-scale rule with the AdaScale gain, and the linear ramp) on drift3
    bstar, fail, drift, lo, hi, alpha = SCENARIOS["drift3"]
    cons = BatchConstraints(group_size=GROUP, max_batch=hi)
    makers = {
        "noise_scale": lambda: NoiseScaleAdaptiveSchedule(
            lo, base_lr=LR0, t0=0.046, t1=0.00139, max_batch=hi, constraints=cons
        ),
        "linear_ramp": lambda: LinearRampSchedule(
            lo, lo, int(0.5 * fail), hi, base_lr=LR0, base_batch=BASE_BATCH, constraints=cons
        ),
    }
    for kind, make in makers.items():
        env = SyntheticEnvironment(
            critical_batch=bstar, failure_samples=fail, drift=drift, lr0=LR0, base_batch=BASE_BATCH, seed=0
        )
        run = env.run(make(), 1.5 * fail)
        doc = {
            "scenario": "drift3",
            "seed": 0,
            "schedule": kind,
            "records": [r.to_dict() for r in run.records],
            "decisions": [d.to_dict() for d in env.decisions],
        }
        path = out / f"{kind}_3a_drift3_seed0.json.gz"
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            json.dump(doc, fh)
        print(f"{path.name}: {len(run.records)} records, {sum(d.switched for d in env.decisions)} switches")


if __name__ == "__main__":
    record(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/data/regression"))
