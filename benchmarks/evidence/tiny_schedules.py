"""Issue 5, part 3 on the reference trainer's tiny task: the two-clock schedule against every
constant batch of a 16x range, a Megatron-style linear ramp-up and a Pollux/AdaptDL goodput rule.

Preset ``tiny`` (embedded tiny Qwen2, arithmetic task, group size 8), vLLM CPU rollouts, base LR
1e-4 at batch 32 with the square-root rule (the only LR at which the tiny task learns; part 1).
Per seed: constant batches 8..128 (``experiments.sweep`` layout), then three schedules passed to
the trainer live: the two-clock policy (``experiments.policy_config`` + ``run_one(policy=...)``,
policy v2 defaults, B* from ``fit_sweep`` over the constant runs), a linear ramp 8 -> 128 over half
the budget (``LinearRampSchedule``) and the gradient-noise-scale rule (``NoiseScaleAdaptiveSchedule``,
sqrt LR, cost model t0 + t1 x batch). All runs use ``micro_batch`` 4 so that every batch, 8
included, logs ``grad_norm_micro`` (the two schedules that adapt read B_simple from it).

Measures (``measure``): the core's ``ProgressClock`` at a common target (the core's ``fit_sweep``
target over the constant runs, or ``--target``); rollouts and updates consumed when the crossing
is observed; best smoothed reward before failure (the core's ``FailureClock``, default detectors,
and ``tiny_task.reward_crash_samples``); modelled seconds (t0 + t1 x batch per update) and measured
seconds (rollout_s + update_s from metrics.jsonl). The goal tables are
``schedules_vs_baselines.report`` (section 3's logic), fed with these measures.

    python benchmarks/evidence/tiny_schedules.py run --seeds 0 1 2 --max-samples 8192
    python benchmarks/evidence/tiny_schedules.py report --seeds 0 1 2 --json results/tiny_schedules.json
    python benchmarks/evidence/tiny_schedules.py estimate          # one short run, for the time budget

Resumable: finished runs (same config, same schedule settings) are read back, unfinished ones rerun.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import fmt_ci, machine, mean_ci, smoothed_reward
from schedules_vs_baselines import paired_ratio, report
from tiny_task import ENV, reward_crash_samples

BATCHES = (8, 16, 32, 64, 128)
BASE_LR, BASE_BATCH, GROUP, MICRO = 1e-4, 32, 8, 4
T0, T1 = 0.046, 0.00139  # measured tiny-task cost (RESULTS section 1, vLLM)
OUT = Path(os.environ.get("RLVR_EVIDENCE_OUT", "runs/evidence")) / "tiny_schedules"
SCHEDULES = ("two-clock", "linear ramp 8->128", "noise-scale (sqrt LR)")


def cfg_for(args: argparse.Namespace, seed: int, batch: int):
    from rlvr_trainer.config import preset

    return preset(
        "tiny",
        rollout="vllm",
        base_lr=BASE_LR,
        base_batch=BASE_BATCH,
        max_samples=args.max_samples,
        micro_batch=MICRO,
        seed=seed,
        batch=batch,
        checkpoint_every=args.checkpoint_every,
    )


def _prepare(out_dir: Path, cfg, settings: dict[str, Any]) -> bool:
    """True if ``out_dir`` holds this finished run; otherwise clear what cannot be resumed."""
    from rlvr_trainer.experiments import _finished

    side = out_dir / "schedule_settings.json"
    same = side.exists() and json.loads(side.read_text()) == settings
    if same and _finished(out_dir, cfg):
        return True
    if out_dir.exists() and (not same or not (out_dir / "checkpoint.pt").exists()):
        shutil.rmtree(out_dir)  # other settings, or killed before a checkpoint: start again
    out_dir.mkdir(parents=True, exist_ok=True)
    side.write_text(json.dumps(settings))
    return False


def run_constant(args: argparse.Namespace, seed: int, batch: int) -> None:
    from rlvr_trainer.experiments import run_one

    cfg = cfg_for(args, seed, batch)
    d = args.out / "sweep" / f"b{batch}-s{seed}"
    if not _prepare(d, cfg, {"schedule": "constant", "batch": batch}):
        t = time.perf_counter()
        run_one(cfg, d, resume=True, progress=False)
        print(f"  constant {batch} seed {seed}: {time.perf_counter() - t:.0f} s", flush=True)


def critical_batch(args: argparse.Namespace, seeds: list[int]) -> dict[str, Any]:
    """fit_sweep over the constant runs of ``seeds`` (pooled): B* and the common target."""
    from rlvr_schedule.clocks import fit_sweep

    runs = constant_runs(args, seeds)
    fit = fit_sweep([r for rs in runs.values() for r in rs])
    b = fit.critical_batch
    return {
        "critical_batch": b if b is not None and math.isfinite(b) else None,
        "critical_batch_interval": list(fit.critical_batch_interval),
        "target": fit.target,
        "initial_reward": fit.initial_reward,
        "seeds": seeds,
    }


def _policy(args: argparse.Namespace, cfg, bstar: float | None):
    from rlvr_trainer.experiments import policy_config

    # PolicyConfig's own defaults (policy_config's trainer overrides undone), sample clock
    v2 = dict(max_stages=16, growth=2.0, failure_exponent=0.0)
    if bstar is not None:
        return policy_config(cfg, batches=BATCHES, critical_batch=bstar, **v2)
    return policy_config(cfg, batches=BATCHES, initial_batch="auto", fallback_batch=BASE_BATCH, **v2)


def make_schedule(name: str, args: argparse.Namespace):
    from rlvr_schedule.policy import BatchConstraints
    from rlvr_schedule.policy.baselines import LinearRampSchedule, NoiseScaleAdaptiveSchedule
    from rlvr_schedule.theory.scaling import lr_for_batch

    lo, hi = BATCHES[0], BATCHES[-1]
    cons = BatchConstraints(group_size=GROUP, max_batch=hi)
    if name.startswith("linear ramp"):
        return LinearRampSchedule(
            lo,
            lo,
            args.max_samples // 2,
            hi,
            base_lr=BASE_LR,
            base_batch=BASE_BATCH,
            lr_rule="sqrt",
            constraints=cons,
        )
    return NoiseScaleAdaptiveSchedule(
        lo,
        base_lr=lr_for_batch(lo, BASE_BATCH, BASE_LR),
        t0=args.t0,
        t1=args.t1,
        lr_rule="sqrt",
        max_batch=hi,
        constraints=cons,
    )


def run_schedule(args: argparse.Namespace, seed: int, name: str, bstar: float | None) -> None:
    from rlvr_trainer.experiments import run_one
    from rlvr_trainer.train import Trainer

    d = args.out / "schedule" / f"{_slug(name)}-s{seed}"
    t = time.perf_counter()
    if name == "two-clock":
        policy = _policy(args, cfg_for(args, seed, BASE_BATCH if bstar is None else BATCHES[0]), bstar)
        # the run starts at the policy's own first batch: record it in the config
        from rlvr_schedule.policy import TwoClockScheduler

        cfg = cfg_for(args, seed, TwoClockScheduler(policy).current.batch)
        settings = {"schedule": name, "critical_batch": bstar, "policy": repr(policy)}
        if _prepare(d, cfg, settings):
            return
        run_one(cfg, d, policy=policy, resume=True, progress=False)
    else:
        sched = make_schedule(name, args)
        cfg = cfg_for(args, seed, sched.current.batch)
        settings = {"schedule": name, "repr": repr(sched), "t0": args.t0, "t1": args.t1}
        if _prepare(d, cfg, settings):
            return
        with Trainer(cfg, d, schedule=sched, progress=False) as trainer:
            trainer.train(resume=True)
    print(f"  {name} seed {seed}: {time.perf_counter() - t:.0f} s", flush=True)


def _slug(name: str) -> str:
    return name.split(" (")[0].replace(" ", "-").replace(">", "")


def constant_runs(args: argparse.Namespace, seeds: list[int]) -> dict[str, list]:
    from rlvr_trainer.experiments import read_run

    return {f"constant {b}": [read_run(args.out / "sweep" / f"b{b}-s{s}") for s in seeds] for b in BATCHES}


def schedule_runs(args: argparse.Namespace, seeds: list[int]) -> dict[str, list]:
    from rlvr_trainer.experiments import read_run

    return {n: [read_run(args.out / "schedule" / f"{_slug(n)}-s{s}") for s in seeds] for n in SCHEDULES}


def measure(run, out_dir: Path, target: float, crash_level: float, t0: float, t1: float) -> dict[str, Any]:
    """The per-run measures (see the module docstring)."""
    from rlvr_schedule.clocks import FailureClock, ProgressClock

    fc = FailureClock().fit(run)
    crash = reward_crash_samples(run, crash_level)
    fails = [f for f in (fc.failure_samples_, crash) if f is not None]
    failure = min(fails) if fails else None
    pc = ProgressClock(target=target).fit(run, failure_samples=failure)
    samples, batch = run.array("samples"), run.array("batch")
    measured = run.array("rollout_s") + run.array("update_s")
    # completions per update, read from metrics.jsonl itself (not from the decisions)
    rows = [json.loads(ln) for ln in (out_dir / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    per_update = np.diff([0] + [r["samples"] for r in rows])
    assert np.array_equal(per_update, [r["batch"] for r in rows]), f"{out_dir}: samples step != batch"
    m: dict[str, Any] = {
        "samples": None,
        "steps": None,
        "seconds": None,
        "measured_s": None,
        "best_reward": pc.best_reward_,
        "initial_reward": pc.initial_reward_,
        "core_samples_to_target": pc.samples_to_target_ if pc.reached_target_ else None,
        "failure_core": fc.failure_samples_,
        "failure_signal": fc.signal_,
        "reward_crash": crash,
        "failure": failure,
        "final_reward": float(np.nanmean(run.array("reward_mean")[-max(1, len(run) // 10) :])),
        "total_samples": float(samples[-1]),
        "total_updates": len(run),
        "total_measured_s": float(np.nansum(measured)),
        "total_modelled_s": float(np.sum(t0 + t1 * batch)),
    }
    if pc.reached_target_:
        # the crossing is at x = samples - batch (rollouts the policy was trained on); it is observed
        # with the rollouts of the next update: k = first record with x_k >= crossing
        x = samples - batch
        k = int(np.searchsorted(x, pc.samples_to_target_ - 1e-9, side="left"))
        m.update(
            samples=float(samples[k]),
            steps=float(k + 1),
            seconds=float(np.sum(t0 + t1 * batch[: k + 1])),
            measured_s=float(np.nansum(measured[: k + 1])),
        )
    traj, last = [], None
    for s, b in zip(samples, per_update, strict=True):
        if b != last:
            traj.append((int(s - b), int(b)))
            last = b
    m["trajectory"] = traj  # (rollouts before the update, completions in it) at every change
    return m


def window_measures(
    run, target: float, window: float, failure: float | None, t0: float, t1: float
) -> dict[str, Any]:
    """The section-3 measures on a less noisy curve: the reward averaged over the trailing ``window``
    rollouts (``common.smoothed_reward``), read only once ``window`` rollouts are in (no partial
    windows: a single small-batch update would cross any target); best value before ``failure``."""
    sm = smoothed_reward(run, window)
    samples, batch = run.array("samples"), run.array("batch")
    full = samples >= window
    before = full & (samples <= (failure if failure is not None else np.inf))
    out: dict[str, Any] = {
        "samples": None,
        "steps": None,
        "seconds": None,
        "measured_s": None,
        "best_reward": float(sm[before].max()) if before.any() else math.nan,
    }
    hit = np.flatnonzero(full & (sm >= target))
    if hit.size:
        k = int(hit[0])
        out.update(
            samples=float(samples[k]),
            steps=float(k + 1),
            seconds=float(np.sum(t0 + t1 * batch[: k + 1])),
            measured_s=float(np.nansum((run.array("rollout_s") + run.array("update_s"))[: k + 1])),
        )
    return out


def window_target(runs: list, window: float, fraction: float = 0.5) -> tuple[float, float, float]:
    """``fraction`` of the way from the mean reward of the first ``window`` rollouts to that of the
    last ``window`` rollouts, over the constant runs: (target, first, last)."""
    first, last = [], []
    for r in runs:
        rew, s = r.array("reward_mean"), r.array("samples")
        first.append(float(np.nanmean(rew[s <= max(window, s[0])])))
        last.append(float(np.nanmean(rew[s > s[-1] - window])))
    a, b = float(np.mean(first)), float(np.mean(last))
    return a + fraction * (b - a), a, b


def cmd_run(args: argparse.Namespace) -> None:
    os.environ.update(ENV)
    t_start = time.perf_counter()
    print(f"# run: seeds {args.seeds}, {args.max_samples} rollouts per run; {machine()}", flush=True)
    for seed in args.seeds:  # constants first (all seeds): the two-clock needs their fitted B*
        for b in BATCHES:
            run_constant(args, seed, b)
    fit = critical_batch(args, args.seeds)
    (args.out / f"fit-s{'-'.join(map(str, args.seeds))}.json").write_text(json.dumps(fit, default=str))
    print(f"# fit_sweep over the constant runs: {fit}", flush=True)
    for seed in args.seeds:
        for name in SCHEDULES:
            run_schedule(args, seed, name, fit["critical_batch"])
    print(f"# wall time {time.perf_counter() - t_start:.0f} s", flush=True)


def cmd_estimate(args: argparse.Namespace) -> None:
    """One short constant run per batch extreme: seconds per rollout for the time budget."""
    from rlvr_trainer.experiments import run_one

    os.environ.update(ENV)
    for b in (8, 128):
        cfg = cfg_for(args, 0, b)
        d = Path("/tmp/tiny_schedules_estimate") / f"b{b}"
        shutil.rmtree(d, ignore_errors=True)
        t = time.perf_counter()
        run = run_one(cfg, d, progress=False)
        tot = float(np.sum(run.array("rollout_s") + run.array("update_s")))
        print(
            f"batch {b}: {args.max_samples} rollouts in {time.perf_counter() - t:.1f} s wall "
            f"({tot:.1f} s in updates: {tot / args.max_samples * 1000:.2f} ms per rollout)",
            flush=True,
        )


def _fmt(v: Any, f: str = "{:.0f}") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f.format(v)


def _measured_ratios(res: dict[str, list[dict[str, Any]]], seeds: int) -> None:
    """Measured seconds to target, paired per seed, against the most sample-efficient constant."""
    eff = [k for k in res if k.startswith("constant") and all(r["samples"] is not None for r in res[k])]
    if eff:
        best = min(eff, key=lambda k: mean_ci([r["samples"] for r in res[k]])[0])
        print(
            f"\nMeasured seconds (rollout_s + update_s) to target / {best}'s, paired per seed: "
            + "; ".join(
                f"{name} {fmt_ci(paired_ratio(res[name], res[best], 'measured_s'), 3, seeds)}"
                for name in SCHEDULES
            )
        )


def cmd_report(args: argparse.Namespace) -> None:
    t_start = time.perf_counter()
    seeds = args.seeds
    fitf = args.out / f"fit-s{'-'.join(map(str, seeds))}.json"
    fit = json.loads(fitf.read_text()) if fitf.exists() else critical_batch(args, seeds)
    target = args.target if args.target is not None else fit["target"]
    crash_level = 0.5 * fit["initial_reward"]
    runs = {**constant_runs(args, seeds), **schedule_runs(args, seeds)}
    dirs = {
        **{f"constant {b}": [args.out / "sweep" / f"b{b}-s{s}" for s in seeds] for b in BATCHES},
        **{n: [args.out / "schedule" / f"{_slug(n)}-s{s}" for s in seeds] for n in SCHEDULES},
    }
    res = {
        name: [
            measure(r, d, target, crash_level, args.t0, args.t1) for r, d in zip(rs, dirs[name], strict=True)
        ]
        for name, rs in runs.items()
    }
    for name in SCHEDULES:  # switches in the format report() prints (from metrics: completions per update)
        for m, d in zip(res[name], dirs[name], strict=True):
            reasons = {
                dd["samples"]: dd.get("reason", "")
                for dd in map(json.loads, (d / "decisions.jsonl").read_text().splitlines())
                if dd.get("switched")
            }
            m["switches"] = [(s, b, reasons.get(s, "")) for s, b in m["trajectory"][1:]]
    bstar = fit["critical_batch"]
    print(
        f"# issue 5 part 3 on the tiny task (reference trainer, preset tiny, vLLM CPU rollouts); {machine()}\n"
    )
    print(
        f"Settings: base LR {BASE_LR:g} at batch {BASE_BATCH} (sqrt rule), micro_batch {MICRO}, "
        f"{int(runs['constant 8'][0].samples[-1])} rollouts per run, seeds {', '.join(map(str, seeds))}; "
        f"cost model {args.t0:g} + {args.t1:g} x batch s per update."
    )
    iv = ", ".join(_fmt(v, "{:.3g}") for v in fit["critical_batch_interval"])
    print(
        f"fit_sweep over the {len(BATCHES) * len(seeds)} constant runs (seeds pooled): B* "
        f"{_fmt(bstar, '{:.3g}')} [{iv}], target {fit['target']:.4f} (initial {fit['initial_reward']:.4f})."
    )
    how = (
        "critical_batch = that B* (finite)"
        if bstar is not None
        else "no finite B*: initial_batch auto from grad_norm_micro"
    )
    print(f"two-clock: {how}; policy v2 defaults, failure_exponent 0 (sample clock).")
    print(
        f"Target used: {target:.4f} ({'--target' if args.target is not None else 'fit_sweep'}); "
        f"reward-crash level {crash_level:.4f} (half the initial).\n"
    )
    out = {
        "scenario": {
            "name": "tiny",
            "note": f"reference trainer tiny preset, base LR {BASE_LR:g}, "
            f"{int(runs['constant 8'][0].samples[-1])} rollouts",
        },
        "target": target,
        "window": float("nan"),
        "results": res,
    }
    lines = report(out, len(seeds))
    lines = [
        ln.replace("(window nan rollouts)", "(core ProgressClock: centred window of 2% of the records)")
        for ln in lines
    ]
    print("\n".join(lines))
    # extra: measured wall-clock, failure, final reward, trajectories
    print("Measured seconds (rollout_s + update_s from metrics.jsonl), whole runs and to target; failures:\n")
    print(
        "| schedule | measured s to target | modelled s to target | measured s, whole run | updates, whole run "
        "| final reward (last 10%) | failure (core detectors) | reward crash |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for name, rows in res.items():
        fails = [
            f"{r['failure_core']:.0f} ({r['failure_signal']})" for r in rows if r["failure_core"] is not None
        ]
        crashes = [f"{r['reward_crash']:.0f}" for r in rows if r["reward_crash"] is not None]
        print(
            f"| {name} | {fmt_ci([r['measured_s'] for r in rows], 1, len(seeds))} | "
            f"{fmt_ci([r['seconds'] for r in rows], 1)} | {fmt_ci([r['total_measured_s'] for r in rows], 1)} | "
            f"{fmt_ci([r['total_updates'] for r in rows], 0)} | {fmt_ci([r['final_reward'] for r in rows], 3)} | "
            f"{len(fails)}/{len(rows)} {'; '.join(fails)} | {len(crashes)}/{len(rows)} {'; '.join(crashes)} |"
        )
    _measured_ratios(res, len(seeds))
    changed = {n: sum(len(m["trajectory"]) > 1 for m in res[n]) for n in SCHEDULES}
    print(
        f"\nCompletions per update, read from metrics.jsonl (steps of `samples`), equal its `batch` column in all "
        f"{sum(map(len, res.values()))} runs; schedule runs whose batch changed: "
        + ", ".join(f"{n} {k}/{len(seeds)}" for n, k in changed.items())
        + "."
    )
    print(
        "\nPer run (rollouts / updates to target; best reward; batch trajectory as (rollouts before, batch)):\n"
    )
    print("| run | seed | rollouts to target | updates | best reward | initial | trajectory |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, rows in res.items():
        for s, r in zip(seeds, rows, strict=True):
            tr = r["trajectory"]
            txt = (
                " -> ".join(f"{b}@{x}" for x, b in tr)
                if len(tr) <= 14
                else " -> ".join(f"{b}@{x}" for x, b in tr[:12])
                + f" ... ({len(tr)} changes) -> {tr[-1][1]}@{tr[-1][0]}"
            )
            print(
                f"| {name} | {s} | {_fmt(r['samples'])} | {_fmt(r['steps'])} | {r['best_reward']:.3f} | "
                f"{r['initial_reward']:.3f} | {txt} |"
            )
    # the same comparison on a less noisy curve (trailing window of --window rollouts, section 3's measure)
    w = args.window
    t2, r_first, r_last = window_target(
        [r for k, rs in runs.items() if k.startswith("constant") for r in rs], w
    )
    if args.window_target is not None:
        t2 = args.window_target
    res2 = {
        name: [
            dict(window_measures(r, t2, w, m["failure"], args.t0, args.t1), switches=m.get("switches", []))
            for r, m in zip(rs, res[name], strict=True)
        ]
        for name, rs in runs.items()
    }
    print(f"\n## The same on a less noisy curve: reward averaged over the trailing {w:.0f} rollouts\n")
    how = (
        "--window-target"
        if args.window_target is not None
        else f"half-way from the mean reward of the first {w:.0f} rollouts, {r_first:.4f}, to that of the last "
        f"{w:.0f}, {r_last:.4f}, over the constant runs"
    )
    print(
        f"Target {t2:.4f} ({how}); read from {w:.0f} rollouts on; best reward = best such average before "
        "failure.\n"
    )
    out2 = dict(out, target=t2, window=w, results=res2)
    print("\n".join(report(out2, len(seeds))[2:]))
    _measured_ratios(res2, len(seeds))
    print(f"\n# report wall time {time.perf_counter() - t_start:.1f} s")
    if args.json:  # strict JSON: NaN and inf become null
        args.json.write_text(
            json.dumps(
                _strict(
                    {
                        "settings": {
                            "base_lr": BASE_LR,
                            "base_batch": BASE_BATCH,
                            "micro_batch": MICRO,
                            "t0": args.t0,
                            "t1": args.t1,
                            "seeds": seeds,
                        },
                        "fit": fit,
                        "target": target,
                        "crash_level": crash_level,
                        "runs": res,
                        "window": {"rollouts": w, "target": t2, "runs": res2},
                    }
                ),
                indent=1,
                allow_nan=False,
                default=str,
            )
        )


def _strict(v: Any) -> Any:
    if isinstance(v, float) or isinstance(v, np.floating):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _strict(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_strict(x) for x in v]
    return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["run", "report", "estimate"])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--max-samples", type=int, default=8192)
    ap.add_argument(
        "--checkpoint-every", type=int, default=0, help="trainer checkpoints (0: at the end only)"
    )
    ap.add_argument("--target", type=float, default=None, help="default: fit_sweep's over the constant runs")
    ap.add_argument("--window", type=float, default=1024.0, help="trailing window of the second comparison")
    ap.add_argument(
        "--window-target", type=float, default=None, help="its target (default: half the mean rise)"
    )
    ap.add_argument("--t0", type=float, default=T0)
    ap.add_argument("--t1", type=float, default=T1)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    {"run": cmd_run, "report": cmd_report, "estimate": cmd_estimate}[args.command](args)


if __name__ == "__main__":
    main()
