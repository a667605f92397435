"""Record the two-clock policy's decisions on the reference trainer's tiny task (vLLM CPU rollouts),
for the regression test ``tests/core/test_policy_regression.py``.

The policy runs live in the trainer (``experiments.run_one``; the settings of the retired
``tiny_schedules.py``, last at commit f108f2e: base LR
1e-4 at batch 32, sqrt rule, micro_batch 4 so every update logs ``grad_norm_micro``, policy v3
defaults with the live forecast switching (``forecast: on``), ``critical_batch`` given). The v2
recordings it once wrote were dropped with policy v2 ( ``tests/data/regression/README.md``);
the file keeps the policy config, the trainer's records (metrics.jsonl) and the decisions (decisions.jsonl):

    python -m benchmarks.evidence.record_tiny_decisions OUT SEED CRITICAL_BATCH MAX_SAMPLES
"""

import gzip
import json
import sys
import time
from pathlib import Path

from rlvr_schedule.policy import TwoClockScheduler
from rlvr_trainer.config import preset
from rlvr_trainer.experiments import policy_config, run_one

out = Path(sys.argv[1])
seed = int(sys.argv[2])
bstar = float(sys.argv[3])
max_samples = int(sys.argv[4])
BATCHES = (8, 16, 32, 64, 128)


def cfg_for(batch):
    return preset(
        "tiny",
        rollout="vllm",
        base_lr=1e-4,
        base_batch=32,
        max_samples=max_samples,
        micro_batch=4,
        seed=seed,
        batch=batch,
        checkpoint_every=0,
    )


# policy v3 with the live forecast switching (v2's record-counted keys are gone)
v3 = dict(forecast="on", max_stages=16, growth=2.0, failure_exponent=0.0)
policy = policy_config(cfg_for(8), batches=BATCHES, critical_batch=bstar, **v3)
cfg = cfg_for(TwoClockScheduler(policy).current.batch)
t = time.perf_counter()
run_one(cfg, out / "run", policy=policy, resume=False, progress=False)
recs = [json.loads(line) for line in (out / "run" / "metrics.jsonl").read_text().splitlines()]
decs = [json.loads(line) for line in (out / "run" / "decisions.jsonl").read_text().splitlines()]
doc = {
    "scenario": "tiny",
    "seed": seed,
    "schedule": "two_clock",
    "config": policy.to_dict(),
    "records": recs,
    "decisions": decs,
    "note": f"reference trainer, tiny preset, vLLM CPU, {max_samples} rollouts, main @ recording",
}
with gzip.open(out / f"two_clock_tiny_seed{seed}.json.gz", "wt") as fh:
    json.dump(doc, fh)
print(
    len(recs), "records", sum(d["switched"] for d in decs), "switches", round(time.perf_counter() - t, 1), "s"
)
