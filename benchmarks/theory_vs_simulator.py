"""Closed forms of the local quadratic model vs the noisy-quadratic simulator.

Prints (1) predicted vs simulated per-sample progress of Adam on the sqrt rule over B = 1..1024,
(2) predicted vs simulated critical batch B* over a few base LRs (B* from a line fitted to
simulated per-sample progress), (3) Adam with an EMA second moment where the G^2 term matters,
against the noise-dominated line and the refined ("expected") closed form.

    python benchmarks/theory_vs_simulator.py [--trials 2000] [--dim 64] [--seed 0]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from rlvr_schedule.theory import LocalQuadratic, NoisyQuadratic

BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
B0 = 64


def problem(dim: int, seed: int, noise_batches: tuple[float, float] | None = None) -> LocalQuadratic:
    """Diagonal + rank-2 Hessian (eigenvalues 0.1..10), heterogeneous per-coordinate noise."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((dim, 2)) / np.sqrt(dim)
    hess = np.diag(np.logspace(-1, 1, dim)) + 3 * u @ u.T
    sig2 = np.logspace(-0.5, 0.5, dim)[rng.permutation(dim)]
    if noise_batches is None:
        grad = 0.1 * np.sqrt(sig2) * rng.standard_normal(dim)
    else:
        b_i = np.logspace(*noise_batches, dim)[rng.permutation(dim)]
        grad = np.sqrt(sig2 / b_i) * rng.choice([-1.0, 1.0], dim)
    return LocalQuadratic(grad, hess, sig2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    lq = problem(args.dim, args.seed)
    sim = NoisyQuadratic.from_local(lq)
    print(
        f"# d={args.dim}, trials={args.trials} (antithetic pairs), base batch {B0}, "
        f"numpy {np.__version__}, python {platform.python_version()}"
    )
    print(
        f"# eps~={lq.eps_tilde:.4g}  B~_noise={lq.b_noise_tilde:.4g}  "
        f"(SGD: B_noise={lq.b_noise:.4g}, B_simple={lq.b_simple:.4g})"
    )

    print("\n## 1. Per-sample progress p(B), Adam (v = diag(Sigma)/B), sqrt rule")
    for target in (1500.0, 300.0):
        lr0 = lq.lr_for_critical_batch(target, B0)
        est = sim.sweep(BATCHES, lr0=lr0, base_batch=B0, trials=args.trials, seed=args.seed)
        print(
            f"\nlr0={lr0:.4g} (predicted B*={lq.critical_batch(lr0, B0):.1f}, zero progress at "
            f"{lq.zero_progress_batch(lr0, B0):.0f})"
        )
        print("|    B | predicted p(B) | simulated p(B) | std err | rel. error |")
        print("|-----:|---------------:|---------------:|--------:|-----------:|")
        for b, e in zip(BATCHES, est, strict=True):
            p = lq.progress_per_sample(b, lr0, B0)
            print(
                f"| {b:4d} | {p:14.5e} | {e.per_sample:14.5e} | {e.per_sample_se:7.1e} | "
                f"{(e.per_sample - p) / abs(p):+10.4%} |"
            )

    print("\n## 2. Critical batch: predicted vs fitted to simulated p(B) on B in {1, 0.25..1.6 B*}")
    print("|      lr0 | predicted B* | simulated B* | rel. error | argmax per-step (grid) |")
    print("|---------:|-------------:|-------------:|-----------:|-----------------------:|")
    for target in (50.0, 150.0, 400.0, 1000.0, 3000.0):
        lr0 = lq.lr_for_critical_batch(target, B0)
        pred = lq.critical_batch(lr0, B0)
        grid = np.unique(np.round(np.concatenate([[1.0], pred * np.linspace(0.25, 1.6, 12)])).astype(int))
        est = sim.sweep(grid, lr0=lr0, base_batch=B0, trials=args.trials, seed=args.seed + 1)
        per_sample = np.array([e.per_sample for e in est])
        slope, intercept = np.polyfit(grid, per_sample, 1)
        fitted = intercept / (-2.0 * slope)
        peak = grid[np.argmax(per_sample * grid)]
        print(
            f"| {lr0:8.3g} | {pred:12.1f} | {fitted:12.1f} | {(fitted - pred) / pred:+10.4%} | {peak:22d} |"
        )
    lrs = [lq.lr_for_critical_batch(t, B0) for t in (50.0, 3000.0)]
    consts = [float((lq.critical_batch(x, B0) + lq.b_noise_tilde / 2) * x) for x in lrs]
    print(
        f"(B* + B~_noise/2) x lr0 at lr0={lrs[0]:.3g} and {lrs[1]:.3g}: {consts[0]:.6g}, {consts[1]:.6g} "
        f"(eps~ sqrt(B0) = {lq.eps_tilde * np.sqrt(B0):.6g})"
    )

    print(
        "\n## 3. Adam with an EMA second moment (beta2=0.99, 300 warm-up steps), B_i = Sigma_ii/G_i^2 in 30..30000"
    )
    lq2 = problem(32, args.seed + 1, noise_batches=(1.5, 4.5))
    lr0 = lq2.lr_for_critical_batch(2000.0, B0)
    est = NoisyQuadratic.from_local(lq2).sweep(
        BATCHES, lr0=lr0, base_batch=B0, trials=400, seed=args.seed, second_moment="ema", beta2=0.99
    )
    print("|    B | noise-dominated line | refined (v = G^2 + s^2/B) | simulated (EMA) | rel. to refined |")
    print("|-----:|---------------------:|--------------------------:|----------------:|----------------:|")
    for b, e in zip(BATCHES, est, strict=True):
        pn = lq2.progress_per_sample(b, lr0, B0)
        pr = lq2.progress_per_sample(b, lr0, B0, second_moment="expected")
        print(
            f"| {b:4d} | {pn:20.5e} | {pr:25.5e} | {e.per_sample:15.5e} | {(e.per_sample - pr) / pr:+15.4%} |"
        )
    print(f"\n# wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
