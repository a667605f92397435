"""Hindsight check for the fixed-fraction schedule bar: what a perfect B* tracker would reach.

Not a policy: the schedule reads the synthetic task's TRUE critical batch at the run's progress
(``ClockModel.critical_batch x (1 + drift x progress)``) and runs the nearest group of 8 to
``f`` x it (up only, 16-256), at the square-root LR (``--law sqrt``: ``B = (sqrt(1 + 2uk) - 1)/u x B*0``
with ``k`` the rise of B* and ``u`` set so that the start is ``f`` x B*0, the batch that minimises
updates plus a price on rollouts when B* rises). No failure switches. Against the best-reward
constant of the sweep's 16x range, with ``schedules_v3.py``'s smoothing, target and seeds; cells:
lower bound of the best-reward difference, updates ratio, rollouts ratio, seeds where both reached
the target, all three parts met. It shows where the operating point alone sets the trade between
updates and rollouts (docs/RESULTS.md 3a, fourth round).

    python -m benchmarks.evidence.schedule_oracle --tasks c2_drift3,h1_b48_f14k_drift5 --fractions 0.3,0.4
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.evidence import schedules_v3 as S
from rlvr_schedule.records import Decision, Stage, StepRecord
from rlvr_schedule.synthetic import SyntheticEnvironment
from rlvr_schedule.theory.scaling import lr_for_batch


class OracleTracker:
    """Batch = the nearest runnable batch to f x the task's true B* now (a ``BatchSchedule``)."""

    def __init__(self, env: SyntheticEnvironment, f: float, law: str = "linear", lo: int = 16, hi: int = 256):
        self.env, self.f, self.law, self.lo, self.hi = env, f, law, lo, hi
        self._batch = self._pick(0.0)

    def _pick(self, progress: float) -> int:
        m = self.env.model
        rise = 1.0 + m.drift * min(max(progress, 0.0), 1.0)
        if self.law == "sqrt":
            u = (2.0 - 2.0 * self.f) / (self.f * self.f)  # start at f x B*0
            b = (math.sqrt(1.0 + 2.0 * u * rise) - 1.0) / u * m.critical_batch
        else:
            b = self.f * m.critical_batch * rise
        return max(self.lo, min(self.hi, int(round(b / S.GROUP)) * S.GROUP))

    @property
    def current(self) -> Stage:
        return Stage(batch=self._batch, lr=lr_for_batch(self._batch, S.BASE, S.LR0))

    @property
    def stages(self) -> list[Stage]:
        return [self.current]

    def step(self, record: StepRecord) -> Decision:
        b = max(self._pick(self.env.progress), self._batch)
        switched, self._batch = b != self._batch, b
        c = self.current
        return Decision(record.step, record.samples, c.batch, c.lr, 0, switched, "oracle")

    def state_dict(self) -> dict[str, Any]:
        return {"batch": self._batch}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._batch = int(state["batch"])


def check(name: str, fractions: list[float], law: str, seeds: int) -> dict[str, Any]:
    kw = S.task_kw(name)
    F = kw["failure_samples"]
    curves: dict[str, list[dict[str, Any]]] = {}
    for seed in S.task_seeds(name, seeds):
        env = SyntheticEnvironment(seed=seed, **kw)
        for b in S.BATCHES:
            run = env.run_constant(b, 2 * F, lr=lr_for_batch(b, S.BASE, S.LR0))
            curves.setdefault(f"constant {b}", []).append(_curve(run, env, F))
        for f in fractions:
            run = env.run(OracleTracker(env, f, law), 2 * F)
            curves.setdefault(f"oracle f{f:g}", []).append(_curve(run, env, F))
    sweep = [f"constant {b}" for b in S.BATCHES]
    best = max(sweep, key=lambda k: np.mean([c["best"] for c in curves[k]]))
    target = 0.9 * float(np.mean([c["best"] for c in curves[best]]))
    tt = {k: np.array([S.to_target(c, target) for c in v]) for k, v in curves.items()}
    out: dict[str, Any] = {"task": name, "best_constant": best}
    for k in curves:
        if k in sweep:
            continue
        ok = ~np.isnan(tt[k][:, 0]) & ~np.isnan(tt[best][:, 0])
        lb = S.t_ci(np.array([a["best"] - b["best"] for a, b in zip(curves[k], curves[best], strict=True)]))[
            1
        ]
        u = float(tt[k][ok, 1].mean() / tt[best][ok, 1].mean()) if ok.any() else math.nan
        r = float(tt[k][ok, 0].mean() / tt[best][ok, 0].mean()) if ok.any() else math.nan
        out[k] = dict(
            best_lower=lb,
            updates=u,
            rollouts=r,
            paired=int(ok.sum()),
            ok=lb >= -0.01 and u <= 0.6 and r <= 1.15,
        )
    return out


def _curve(run, env: SyntheticEnvironment, F: float) -> dict[str, Any]:
    s, r = S.smoothed(run, 0.05 * F)
    fail = env.collapsed_at
    before = r[s <= fail] if fail is not None else r
    return dict(
        s=s,
        r=r,
        steps=np.arange(1, len(s) + 1),
        fail=fail,
        best=float(before.max()) if before.size else float(r[0]),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--fractions", default="0.3,0.4,0.5,0.6,0.8")
    ap.add_argument("--law", choices=("linear", "sqrt"), default="linear")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    fractions = [float(x) for x in args.fractions.split(",")]
    out = []
    for name in args.tasks.split(","):
        res = check(name, fractions, args.law, args.seeds)
        out.append(res)
        cells = [
            f"{k}: {v['best_lower']:+.3f}/{v['updates']:.2f}/{v['rollouts']:.2f}{' ok' if v['ok'] else ''}"
            for k, v in res.items()
            if isinstance(v, dict)
        ]
        print(f"{name} (best-reward {res['best_constant']}): " + "; ".join(cells), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
