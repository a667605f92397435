"""How v3_states.json was recorded (run from the repository root at the commit in recorded_at, whose
state was version 3); kept for the record, it does not run against today's state version."""
import json
import subprocess

from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler
from rlvr_schedule.synthetic import SyntheticEnvironment

cases = []
base = dict(fallback_batch=32, base_batch=64, constraints={"group_size": 8, "max_batch": 512}, sample_tolerance=0.1)
configs = [
    ("auto_tracking", base),
    ("sweep_clock", dict(base, critical_batch=200.0, failure_samples=12000.0, failure_samples_interval=[9000.0, 16000.0], failure_batch=64.0)),
]
for name, c in configs:
    cfg = PolicyConfig.from_dict(c)
    env = SyntheticEnvironment(critical_batch=256, failure_samples=20_000, drift=3.0, seed=1)
    run = env.run(TwoClockScheduler(cfg), 30_000)
    full = [d.to_dict() for d in env.decisions]
    states = {}
    for k in (60, 150):
        a = TwoClockScheduler(cfg)
        for r in run.records[:k]:
            a.step(r)
        states[str(k)] = json.loads(json.dumps(a.state_dict()))
    cases.append({"name": name, "config": cfg.to_dict(), "env": {"critical_batch": 256, "failure_samples": 20000, "drift": 3.0, "seed": 1, "samples": 30000},
                  "switches": sum(d["switched"] for d in full), "states": states})
    print(name, sum(d["switched"] for d in full), len(full))
commit = subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
json.dump({"recorded_at": commit, "cases": cases}, open("tests/data/policy_state/v3_states.json", "w"), indent=1)
