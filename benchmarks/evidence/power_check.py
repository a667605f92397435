"""Power and size of the embedded experiment's criterion, before any sweep runs.

How often would the criterion pass if the theory held, and how often if it did not, with the
run-to-run spread the pilot measured and the seeds the plan chooses? Each replicate draws one
whole experiment (3 LRs x the sweep's batches x the seeds): a per-run rate from the theory's
line ``p0 max(0, 1 - B / 2B*)`` (or a null's), times ``1 + spread x e`` with ``e`` a relative
residual resampled from the pilot's runs (the default task's 45 recorded runs,
``results/tiny_evidence_heldout_fits.json``: each run's rate against the mean of its batch and
LR's seeds, scaled by sqrt(k / (k - 1)) for the k seeds that mean took; the plan's i-th LR draws
from the pilot's i-th LR, whose spread grows with the LR); a failure point at the highest LR
from the failure clock's batch law times a log residual resampled from the pilot's failed runs,
censored at the budget. The criterion is then read with the product's own estimators: B* and its
interval from the critical-batch fit's profile and wild bootstrap, the rate intervals as 95%
Student-t intervals over seeds, the slope from ``verdicts.lr_slope``, the failure exponent from
``FailureScalingFit``.

Truths: ``theory`` (B* ~ 1/lr, a sample clock: the criterion should pass, >= 80% wanted),
``flat`` (per-rollout progress does not fall with the batch), ``lr-free`` (B* does not move with
the LR) and ``step-clock`` (failure after a fixed number of updates, alpha = 1): each should pass
in at most 10%.

    python -m benchmarks.evidence.power_check [--reps 200] [--out results/power_check.md]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.evidence.common import machine, mean_ci
from rlvr_schedule.clocks.failure.scaling import FailureScalingFit
from rlvr_schedule.clocks.progress import CriticalBatchFit, _profile_bstar
from rlvr_schedule.records import Run, StepRecord
from rlvr_schedule.verdicts import lr_slope

__all__ = ["Design", "Pilot", "TRUTHS", "criterion", "pilot_spread", "power", "simulate"]

PILOT = Path(__file__).resolve().parent / "results" / "tiny_evidence_heldout_fits.json"
TRUTHS = ("theory", "flat", "lr-free", "step-clock")
ITEMS = ("2. B* inside", "3. rates separated", "4. B* ~ 1/lr", "5. failure clock", "all", "4 on plain B*")


@dataclass(frozen=True)
class Pilot:
    """The pilot's measured spread: relative rate residuals per pilot LR (ascending) and the log
    residuals of the failed runs' failure points."""

    lrs: tuple[float, ...]
    rate_residuals: tuple[np.ndarray, ...]
    failure_residuals: np.ndarray

    def describe(self) -> str:
        cv = ", ".join(
            f"{lr:g}: {float(np.std(r)):.2f}" for lr, r in zip(self.lrs, self.rate_residuals, strict=True)
        )
        return (
            f"rate spread (SD of the relative residual) by pilot LR {cv}; failure log spread "
            f"{float(np.std(self.failure_residuals)):.2f} over {self.failure_residuals.size} failed runs"
        )


def pilot_spread(fits: Mapping[str, Mapping[str, Any]]) -> Pilot:
    """The spread of a recorded sweep (``{lr: fit_sweep().to_dict()}``, one run per batch and seed)."""
    lrs, pools, fails = [], [], []
    for lr, fit in sorted(fits.items(), key=lambda kv: float(kv[0])):
        cells: dict[int, list[float]] = {}
        for r in fit["runs"]:
            rate = r.get("rate")
            if r.get("constant_batch", True) and rate is not None and math.isfinite(rate) and rate > 0:
                cells.setdefault(int(r["batch"]), []).append(float(rate))
        res = []
        for v in cells.values():
            if len(v) >= 2:
                a = np.asarray(v)
                res.extend((a / a.mean() - 1.0) * math.sqrt(a.size / (a.size - 1)))
        if not res:
            raise ValueError(f"LR {lr}: no batch with two or more runs with a rate")
        lrs.append(float(lr))
        pools.append(np.asarray(res))
        f = [float(r["failure_samples"]) for r in fit["runs"] if r.get("failure_samples")]
        if len(f) >= 2:
            lf = np.log(f)
            fails.extend((lf - lf.mean()) * math.sqrt(lf.size / (lf.size - 1)))
    if len(fails) < 2:
        raise ValueError("the pilot needs two or more failed runs for the failure spread")
    return Pilot(tuple(lrs), tuple(pools), np.asarray(fails))


@dataclass(frozen=True)
class Design:
    """One planned experiment. ``lr_steps``: the LRs relative to the lowest (ascending);
    ``bstar_top``/``failure_top``: B* and the median failure point (rollouts) at the highest LR
    under the theory; ``spread``: a multiplier on the pilot's rate residuals (a less noisy
    evaluation: below 1); ``items_at``: items 2-3 at ``"each"`` LR or only the ``"highest"``;
    ``shift``: B~_noise / 2, the theory's ``B* + shift ~ 1/lr`` (0: plain ``B* ~ 1/lr``)."""

    batches: tuple[int, ...]
    bstar_top: float
    failure_top: float
    budget: float
    seeds: int = 3
    lr_steps: tuple[float, ...] = (1.0, 2.0, 4.0)
    spread: float = 1.0
    items_at: str = "each"
    shift: float = 0.0


def _bstar(design: Design, truth: str, k: int) -> float:
    top = design.lr_steps[-1]
    if truth == "flat":
        return math.inf
    lrs = design.lr_steps
    k = len(lrs) // 2 if truth == "lr-free" else k  # lr-free: the middle LR's B* at every LR
    return (design.bstar_top + design.shift) * top / lrs[k] - design.shift


def simulate(design: Design, pilot: Pilot, truth: str, rng: np.random.Generator):
    """One replicate: ``({lr: (batches, rates)}, (batches, failure samples or None))``."""
    if truth not in TRUTHS:
        raise ValueError(f"truth must be one of {TRUTHS}, got {truth!r}")
    b = np.repeat(np.asarray(design.batches, float), design.seeds)
    rates = {}
    for k, lr in enumerate(design.lr_steps):
        bs = _bstar(design, truth, k)
        true = lr * np.maximum(0.0, 1.0 - b / (2.0 * bs))
        pool = pilot.rate_residuals[min(k, len(pilot.rate_residuals) - 1)]
        noise = 1.0 + design.spread * rng.choice(pool, b.size)
        rates[lr] = (b, np.maximum(true * noise, 0.0))
    alpha = 1.0 if truth == "step-clock" else 0.0
    ref = math.exp(float(np.mean(np.log(design.batches))))
    f = design.failure_top * (b / ref) ** alpha * np.exp(rng.choice(pilot.failure_residuals, b.size))
    fails = [float(x) if x <= design.budget else None for x in f]
    return rates, (b, fails)


def _fit_bstar(b: np.ndarray, s: np.ndarray, n_boot: int, seed: int) -> tuple[float, tuple[float, float]]:
    """The critical-batch fit on per-run rates: its profile and wild bootstrap (``CriticalBatchFit``)."""
    f = CriticalBatchFit(n_boot=n_boot, seed=seed)
    f.critical_batch_, f.rate_at_zero_, _ = _profile_bstar(b, s)
    return f.critical_batch_, f._bootstrap(b, s)


def criterion(
    design: Design, rates: Mapping[float, tuple[np.ndarray, np.ndarray]], failures, *, n_boot=200, seed=0
) -> dict[str, bool]:
    """The criterion's items 2-5 (thresholds of the embedded-task plan) on one replicate."""
    lo_b, hi_b = min(design.batches), max(design.batches)
    top = max(rates)
    fits, inside, separated = {}, {}, {}
    for lr, (b, s) in rates.items():
        bstar, iv = _fit_bstar(b, s, n_boot, seed)
        fits[lr] = {"critical_batch": bstar, "critical_batch_interval": list(iv)}
        inside[lr] = all(math.isfinite(x) for x in iv) and lo_b <= iv[0] and iv[1] <= hi_b
        _, small_lo, _, _ = mean_ci(s[b == lo_b])
        _, _, big_hi, _ = mean_ci(s[b == hi_b])
        separated[lr] = math.isfinite(big_hi) and math.isfinite(small_lo) and big_hi < small_lo
    at = list(rates) if design.items_at == "each" else [top]

    def slope_ok(shift: float) -> bool:
        moved = {
            lr: {
                "critical_batch": f["critical_batch"] + shift,
                "critical_batch_interval": [x + shift for x in f["critical_batch_interval"]],
            }
            for lr, f in fits.items()
        }
        _, s_lo, s_hi, _ = lr_slope(moved)
        return bool(math.isfinite(s_lo) and s_lo <= -1.0 <= s_hi and s_hi < 0.0)

    b, fs = failures
    need = math.ceil(2 * design.seeds / 3)
    failing = sum(
        sum(f is not None for f, bb in zip(fs, b, strict=True) if bb == batch) >= need
        for batch in design.batches
    )
    runs = [
        Run([StepRecord(step=1, samples=int(design.budget), batch=int(x), lr=1.0)], name=f"r{i}")
        for i, x in enumerate(b)
    ]
    fsf = FailureScalingFit().fit(runs, fs, consumed=[design.budget] * len(runs))
    a_lo, a_hi = fsf.alpha_interval_
    item5 = (
        failing >= math.ceil(0.6 * len(design.batches))
        and math.isfinite(a_lo)
        and math.isfinite(a_hi)
        and a_lo <= 0.0 <= a_hi
        and (a_hi - a_lo) / 2 <= 0.5
    )
    out = {
        ITEMS[0]: all(inside[lr] for lr in at),
        ITEMS[1]: all(separated[lr] for lr in at),
        ITEMS[2]: slope_ok(design.shift),
        ITEMS[3]: bool(item5),
    }
    out[ITEMS[4]] = all(out.values())
    out[ITEMS[5]] = slope_ok(0.0)
    return out


def power(design: Design, pilot: Pilot, truth: str, reps: int = 200, seed: int = 0, n_boot: int = 200):
    """Share of ``reps`` replicates in which each item (and all) passes under ``truth``."""
    rng = np.random.default_rng([seed, TRUTHS.index(truth)])
    counts = dict.fromkeys(ITEMS, 0)
    for r in range(reps):
        rates, fails = simulate(design, pilot, truth, rng)
        for k, v in criterion(design, rates, fails, n_boot=n_boot, seed=r).items():
            counts[k] += v
    return {k: v / reps for k, v in counts.items()}


def _row(design: Design, truth: str, p: Mapping[str, float]) -> str:
    cells = " | ".join(f"{p[k]:.2f}" for k in ITEMS)
    return f"| {design.seeds} | {design.spread:g} | {design.items_at} | {truth} | {cells} |"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pilot", type=Path, default=PILOT)
    ap.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--bstar-top", type=float, default=64.0, help="B* at the highest LR (theory)")
    ap.add_argument("--failure-top", type=float, default=6000.0, help="median failure rollouts, highest LR")
    ap.add_argument("--budget", type=float, default=14336.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[3, 5])
    ap.add_argument("--spreads", type=float, nargs="+", default=[1.0, 0.5])
    ap.add_argument("--items-at", nargs="+", default=["each", "highest"])
    ap.add_argument("--lr-steps", type=float, nargs="+", default=[1.0, 2.0, 4.0], help="LRs / the lowest")
    ap.add_argument("--shift", type=float, default=0.0, help="B~_noise / 2 from the probe")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    pilot = pilot_spread(json.loads(args.pilot.read_text()))
    base = Design(
        tuple(args.batches),
        args.bstar_top,
        args.failure_top,
        args.budget,
        shift=args.shift,
        lr_steps=tuple(args.lr_steps),
    )
    t0 = time.perf_counter()
    lines = [
        "# Power and size of the criterion, from the pilot's spread",
        "",
        f"Pilot: `{args.pilot.name}` ({pilot.describe()}). Batches {list(base.batches)}, LRs x"
        f"{[round(x, 3) for x in base.lr_steps]}, B* at the highest LR {base.bstar_top:g} under the theory (B* + "
        f"{base.shift:g} ~ 1/lr at the lower LRs), median failure {base.failure_top:g} rollouts at the highest LR, budget "
        f"{base.budget:g} rollouts per run; {args.reps} replicates per row, {args.n_boot} bootstrap draws per fit.",
        "",
        "| seeds | spread x | items 2-3 at | truth | " + " | ".join(ITEMS) + " |",
        "|---:|---:|---|---|" + "---:|" * len(ITEMS),
    ]
    rows = []
    for seeds in args.seeds:
        for spread in args.spreads:
            for at in args.items_at:
                d = replace(base, seeds=seeds, spread=spread, items_at=at)
                for truth in TRUTHS:
                    p = power(d, pilot, truth, reps=args.reps, n_boot=args.n_boot)
                    rows.append({"seeds": seeds, "spread": spread, "items_at": at, "truth": truth, **p})
                    lines.append(_row(d, truth, p))
                    print(lines[-1], flush=True)
    lines += ["", f"{machine()}; {time.perf_counter() - t0:.0f} s."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
