"""The theory on the noisy-quadratic simulator and the online estimators' lead time.

(A) Predicted B* = (a - c) / (2d) against B* fitted to simulated per-sample progress of Adam on
    the square-root rule, over a grid of Hessian spectra x noise spectra x base LRs; also with
    v = G^2 + diag(Sigma)/B ("expected" second moment), where the noise-dominated prediction is not
    meant to hold; and B_simple / B*: how far the LR-free gradient noise scale is from B*.
(B) On the synthetic task (several seeds): after how many rollouts the online gradient-noise
    estimate (``GradientNoiseScale``) stays within 25% of the task's B*, and the online failure
    forecast (``FailureForecast``, as ``TwoClockScheduler`` configures it) stays within 15% of the
    real collapse point, as a fraction of the failure samples.

    python -m benchmarks.evidence.theory_grid [--trials 2000] [--seeds 10]
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np

from benchmarks.evidence.common import fmt_ci, machine
from rlvr_schedule.clocks import FailureForecast, GradientNoiseScale
from rlvr_schedule.synthetic import SyntheticEnvironment
from rlvr_schedule.theory import LocalQuadratic, NoisyQuadratic

B0 = 64
DIM = 64
HESSIANS = {"cond 10": (-0.5, 0.5), "cond 1e3": (-1.5, 1.5), "cond 1e5": (-2.5, 2.5)}
NOISES = {"flat": "flat", "aligned (var ~ h)": "aligned", "anti-aligned (var ~ 1/h)": "anti"}
TARGETS = (50.0, 200.0, 800.0, 3200.0)


def problem(hkey: str, nkey: str, seed: int = 0, grad_scale: float = 0.1) -> LocalQuadratic:
    rng = np.random.default_rng(seed)
    h = np.logspace(*HESSIANS[hkey], DIM)
    if NOISES[nkey] == "flat":
        s = np.ones(DIM)
    elif NOISES[nkey] == "aligned":
        s = h / h.mean()
    else:
        s = (1 / h) / (1 / h).mean()
    g = grad_scale * np.sqrt(s) * rng.standard_normal(DIM)
    return LocalQuadratic.from_spectra(g, h, s)


def fitted_bstar(sim: NoisyQuadratic, lr0: float, bstar: float, trials: int, seed: int, mode: str) -> float:
    grid = [1] + [max(2, round(f * bstar)) for f in (0.25, 0.5, 0.8, 1.2, 1.6)]
    est = sim.sweep(grid, lr0=lr0, base_batch=B0, trials=trials, seed=seed, second_moment=mode)
    x = np.array([e.batch for e in est], float)
    y = np.array([e.per_sample for e in est])
    slope, icpt = np.polyfit(x, y, 1)
    return float(icpt / (2 * -slope)) if slope < 0 else math.inf


def part_a(trials: int, seed: int) -> list[str]:
    lines = [
        "## A. Predicted vs simulated critical batch (Adam, sqrt rule, d = 64)",
        "",
        (
            f"{trials} trials per batch (antithetic pairs), batches {{1, 0.25, 0.5, 0.8, 1.2, 1.6}} x predicted "
            "B*, B* = intercept / (2 |slope|) of the fitted line. 'noise' = v = diag(Sigma)/B (the model's "
            "assumption); 'expected' = v = G^2 + diag(Sigma)/B."
        ),
        "",
        (
            "| Hessian | noise spectrum | lr0 | predicted B* | simulated B* (noise) | error | "
            "simulated B* (expected v) | error | B_simple / B* |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    errs, errs_exp = [], []
    sim_products = []
    for hk, nk in itertools.product(HESSIANS, NOISES):
        lq = problem(hk, nk, seed)
        sim = NoisyQuadratic.from_local(lq)
        for t in TARGETS:
            lr0 = lq.lr_for_critical_batch(t, B0)
            pred = lq.critical_batch(lr0, B0)
            b_n = fitted_bstar(sim, lr0, pred, trials, seed, "noise")
            b_e = fitted_bstar(sim, lr0, pred, trials, seed, "expected")
            e_n, e_e = b_n / pred - 1, b_e / pred - 1
            errs.append(abs(e_n))
            if (hk, nk) == ("cond 1e3", "flat"):
                sim_products.append((b_n + lq.b_noise_tilde / 2) * lr0)
            errs_exp.append(abs(e_e))
            lines.append(
                f"| {hk} | {nk} | {lr0:.3g} | {pred:.0f} | {b_n:.1f} | {e_n:+.2%} | {b_e:.1f} | {e_e:+.1%} | "
                f"{lq.b_simple / pred:.3g} |"
            )
    lines += [
        "",
        (
            f"Largest |error|, noise-dominated v: {max(errs):.2%} over {len(errs)} cells; with the G^2 "
            f"term in v: median {np.median(errs_exp):.1%}, largest {max(errs_exp):.1%}."
        ),
        "",
    ]
    # B* ~ 1/lr: (B* + B~_noise/2) x lr0 is the same at every LR, here from the *simulated* B*
    lines.append(
        "(simulated B* + B~_noise/2) x lr0 over the four LRs (cond 1e3, flat): "
        + ", ".join(f"{p:.5g}" for p in sim_products)
        + " (constant: B* moves as 1/lr up to the noise offset B~_noise/2)."
    )
    return lines


def first_stable(samples: np.ndarray, ok: np.ndarray) -> float:
    """Rollouts from which ``ok`` holds at every later record (nan: never)."""
    if ok.size == 0 or not ok[-1]:
        return math.nan
    bad = np.flatnonzero(~ok)
    k = 0 if bad.size == 0 else int(bad[-1]) + 1
    return float(samples[k])


def first_hit(samples: np.ndarray, ok: np.ndarray) -> float:
    hit = np.flatnonzero(ok)
    return float(samples[hit[0]]) if hit.size else math.nan


def part_b(seeds: int) -> list[str]:
    lines = [
        "## B. How early the online estimators get B* (within 25%) and the failure point (within 15%)",
        "",
        (
            f"Synthetic task, constant batch 64 on the sqrt rule, failure at 50k rollouts, {seeds} seeds; "
            "rollouts from which the estimate stays within the band until the collapse, as a fraction "
            "of the failure samples (mean [95% interval])."
        ),
        "",
        (
            "| task | B* (start -> end) | B_simple first within 25% | ... and stays from | "
            "failure forecast first within 15% | ... and stays from |"
        ),
        "|---|---|---:|---:|---:|---:|",
    ]
    for drift, bstar, noise, beta in (
        (0.0, 256.0, 1.0, 0.99),
        (3.0, 256.0, 1.0, 0.99),
        (0.0, 64.0, 1.0, 0.99),
        (0.0, 256.0, 3.0, 0.99),
        (0.0, 256.0, 1.0, 0.998),
        (3.0, 256.0, 1.0, 0.998),
    ):
        fr_b, fr_f, fi_b, fi_f = [], [], [], []
        for seed in range(seeds):
            env = SyntheticEnvironment(
                critical_batch=bstar, failure_samples=50_000, drift=drift, noise=noise, seed=seed
            )
            gns = GradientNoiseScale(beta=beta)
            fc = FailureForecast("entropy", fraction=0.1, window=200, min_points=20, warmup=10)
            s_, est, true, pred = [], [], [], []
            env.reset()
            while not env.collapsed:
                r = env.step(64)
                est.append(gns.update(r))
                stf = fc.update(r)
                pred.append(r.samples + stf)
                true.append(env.model.critical_batch_at(1.0, env.progress))
                s_.append(r.samples)
            s = np.array(s_, float)
            with np.errstate(invalid="ignore"):
                ok_b = np.abs(np.array(est) / np.array(true) - 1) <= 0.25
                ok_f = np.abs(np.array(pred) / env.collapsed_at - 1) <= 0.15
            fi_b.append(first_hit(s, ok_b) / env.collapsed_at)
            fi_f.append(first_hit(s, ok_f) / env.collapsed_at)
            fr_b.append(first_stable(s, ok_b) / env.collapsed_at)
            fr_f.append(first_stable(s, ok_f) / env.collapsed_at)
        end = bstar * (1 + drift)
        name = (
            f"drift {drift:g}"
            + (f", metric noise x{noise:g}" if noise != 1 else "")
            + (f", EMA beta {beta:g}" if beta != 0.99 else "")
        )
        lines.append(
            f"| {name} | {bstar:.0f} -> {end:.0f} | {fmt_ci(fi_b, 3, seeds)} | {fmt_ci(fr_b, 3, seeds)} | "
            f"{fmt_ci(fi_f, 3, seeds)} | {fmt_ci(fr_f, 3, seeds)} |"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"# theory grid and online estimators; {machine()}\n")
    print("\n".join(part_a(args.trials, args.seed)))
    print()
    print("\n".join(part_b(args.seeds)))
    print(f"\n# wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
