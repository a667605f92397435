"""The default policy's failure forecast replayed on an evidence run's constant-batch runs (`rlvr-trainer
evidence --out runs/evidence`): per run, the first failure/forecast switch it would make at that run's
batch, against the run's failure (fit_sweep's detectors). Replay is valid up to the first switch.

    python benchmarks/evidence/forecast_replay.py runs/evidence
"""

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "reference_trainer"))
from rlvr_schedule.clocks import fit_sweep
from rlvr_schedule.policy import BatchConstraints, PolicyConfig, TwoClockScheduler
from rlvr_trainer.experiments import read_run

warnings.simplefilter("ignore")
root = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/evidence")
rows = []
for lrd in sorted(root.glob("lr*")):
    lr = float(lrd.name[2:])
    runs = [read_run(d, d.name) for d in sorted((lrd / "sweep").iterdir())]
    fit = fit_sweep(runs)
    fails = {r.name: r.failure_samples for r in fit.runs}
    for run in runs:
        # the run's own batch as the stage: a forecast switch is the first decision that grows it
        sched = TwoClockScheduler(
            PolicyConfig(
                initial_batch=run.batch,
                base_lr=run.lr,
                base_batch=run.batch,
                lr_rule="sqrt",
                constraints=BatchConstraints(group_size=8, min_batch=8, max_batch=256),
            )
        )
        first = None
        for r in run.records:
            d = sched.step(r)
            if d.switched and ("failure" in d.reason or "forecast" in d.reason):
                first = r.samples
                break
        rows.append((lr, run.name, fails[run.name], first))
for lr, name, f, s in rows:
    print(f"{lr:g} {name:8s} failure {f!s:>8} first forecast switch {s!s:>6}")
fail = [r for r in rows if r[2] is not None]
ok = [r for r in rows if r[2] is None]
print(
    "failed runs:",
    len(fail),
    "switched before failure:",
    sum(1 for r in fail if r[3] is not None and r[3] < r[2]),
)
print(
    "healthy runs:",
    len(ok),
    "with a forecast switch (false alarm within 14,336):",
    sum(1 for r in ok if r[3] is not None),
)
