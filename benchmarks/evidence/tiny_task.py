"""Issue 5 on the reference trainer's tiny task (CPU): the per-update cost model and kill/resume.

``cost``: short constant-batch runs; fits seconds per update = t0 + t1 x batch to the logged
``rollout_s + update_s`` (first update of each run dropped: warm-up), the cost model the
synthetic comparison uses (``schedules_vs_baselines.py --t0 --t1``).

``killresume``: the two-clock policy live in the loop (thresholds set so it switches within the
small budget), once uninterrupted and once SIGKILLed at random points and resumed each time
(``rlvr_trainer`` resumes from ``checkpoint.pt`` and cuts its logs back to it). Checks: no lost or
repeated samples, the same decisions, the same rewards.

``sweep``: the part-1 measurement (a 16x batch range at three base LRs, several seeds) - long on
a shared 2-core machine; printed as the command to run, or run with ``--run``; ``--summarize``
fits each LR's sweep (seeds pooled) and prints the tables of ``results/tiny_p1_*.md``.

Needs a venv with the trainer installed (``nox -s trainer`` or ``pip install -r requirements/trainer.txt``):

    python benchmarks/evidence/tiny_task.py cost --out /tmp/tiny
    python benchmarks/evidence/tiny_task.py killresume --out /tmp/tiny --kills 3
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine

ENV = {"OMP_NUM_THREADS": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
       "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _cfg(args: argparse.Namespace, **kw):
    from rlvr_trainer.config import preset

    base = {"rollout": args.rollout, "max_samples": args.max_samples, "checkpoint_every": 1}
    base.update(kw)
    return preset("tiny", **base)


def _policy(cfg):
    from rlvr_trainer.experiments import policy_config

    # collapse level 0.97 x the early entropy and short stages: the forecast fires within a few
    # hundred rollouts, so the resumed run must restore the scheduler's state to decide the same
    return policy_config(cfg, batches=[16, 64], failure_fraction=0.97, hysteresis=1, min_stage_steps=3,
                         horizon_steps=2, margin=1.0, max_stages=3, forecast_window=8, detectors=())


def cmd_cost(args: argparse.Namespace) -> None:
    import numpy as np
    from rlvr_trainer.experiments import sweep

    t_start = time.perf_counter()
    runs = sweep(_cfg(args, checkpoint_every=0), args.batches, args.out / "cost", seeds=[0], progress=False)
    xs, ys = [], []
    print(f"# per-update cost on the tiny task ({args.rollout} rollouts); {machine()}\n")
    print("| batch | updates timed | median rollout_s | median update_s | median total s | mean total s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        ro, up = run.array("rollout_s")[1:], run.array("update_s")[1:]
        tot = ro + up
        xs.append(run.batch)
        ys.append(float(np.median(tot)))  # medians: the shared machine's load spikes hit single updates
        print(f"| {run.batch} | {len(tot)} | {np.median(ro):.3f} | {np.median(up):.3f} | {np.median(tot):.3f} | "
              f"{np.mean(tot):.3f} |")
    t1, t0 = np.polyfit(np.array(xs, float), np.array(ys, float), 1)
    print(f"\nfit to the medians: seconds per update = {t0:.3f} + {t1:.5f} x batch (t0/t1 = {t0 / t1:.0f} rollouts)")
    print(f"# wall time {time.perf_counter() - t_start:.0f} s")


def cmd_child(args: argparse.Namespace) -> None:
    from rlvr_trainer.experiments import run_one

    cfg = _cfg(args, batch=16, seed=args.seed)
    run_one(cfg, args.out, policy=_policy(cfg), resume=True, progress=False)


def _lines(p: Path) -> list[dict]:
    if not p.exists():
        return []
    out = []
    for ln in p.read_text().splitlines():
        try:
            out.append(json.loads(ln))
        except json.JSONDecodeError:
            pass  # a line cut by the kill
    return out


def _child(args: argparse.Namespace, out: Path) -> subprocess.Popen:
    cmd = [sys.executable, __file__, "_child", "--out", str(out), "--rollout", args.rollout,
           "--max-samples", str(args.max_samples), "--seed", str(args.seed)]
    return subprocess.Popen(cmd, env={**os.environ, **ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def cmd_killresume(args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    t_start = time.perf_counter()
    ref, cut = args.out / "uninterrupted", args.out / "killed"
    for d in (ref, cut):
        if d.exists():
            import shutil

            shutil.rmtree(d)
    p = _child(args, ref)
    _, err = p.communicate()
    if p.returncode:
        raise SystemExit(f"uninterrupted run failed:\n{err.decode()[-2000:]}")
    n_ref = len(_lines(ref / "metrics.jsonl"))
    kills = []
    for _ in range(args.kills):
        # kill after a random number of *new* updates (1 .. a third of the run) are logged
        before = len(_lines(cut / "metrics.jsonl"))
        at = before + rng.randint(1, max(1, n_ref // 3))
        if at >= n_ref:
            break
        p = _child(args, cut)
        while p.poll() is None and len(_lines(cut / "metrics.jsonl")) < at:
            time.sleep(0.05)
        if p.poll() is None:
            extra = rng.uniform(0, 0.8)  # also kill mid-update, not only right after a log line
            time.sleep(extra)
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills.append((at, round(extra, 2)))
    p = _child(args, cut)
    _, err = p.communicate()
    if p.returncode:
        raise SystemExit(f"resumed run failed:\n{err.decode()[-2000:]}")
    a, b = _lines(ref / "metrics.jsonl"), _lines(cut / "metrics.jsonl")
    da, db = _lines(ref / "decisions.jsonl"), _lines(cut / "decisions.jsonl")
    samples_a, samples_b = [r["samples"] for r in a], [r["samples"] for r in b]
    steps_b = [r["step"] for r in b]
    same_rewards = [r.get("reward_mean") for r in a] == [r.get("reward_mean") for r in b]
    key = ("step", "samples", "batch", "lr", "stage", "switched")
    dec_a = [tuple(d.get(k) for k in key) for d in da]
    dec_b = [tuple(d.get(k) for k in key) for d in db]
    print(f"# kill/resume on the tiny task ({args.rollout} rollouts, two-clock policy live); {machine()}\n")
    print(f"- uninterrupted: {len(a)} updates, {samples_a[-1] if a else 0} rollouts, batches "
          f"{sorted({r['batch'] for r in a})}, {sum(d.get('switched', False) for d in da)} switches")
    print(f"- killed (SIGKILL) {len(kills)} times at (logged updates, extra seconds) {kills}, resumed each time")
    print(f"- resumed run: {len(b)} updates, {samples_b[-1] if b else 0} rollouts")
    print(f"- lost or repeated samples: steps strictly 1..n: {steps_b == list(range(1, len(b) + 1))}; "
          f"samples identical to uninterrupted: {samples_a == samples_b}")
    print(f"- same decisions (step, samples, batch, lr, stage, switched): {dec_a == dec_b}")
    print(f"- same rewards per update: {same_rewards}")
    print(f"# wall time {time.perf_counter() - t_start:.0f} s")


TRL_SCHEDULE = {  # two-clock; the collapse level sits above the entropy (3.4 nats on this task), so the
    # forecast fires on every record and the switches are paced by the scheduler's own counters
    # (hysteresis, min_stage_steps): a resumed run must restore them to switch at the same steps
    "type": "two_clock", "initial_batch": 8, "base_lr": 1e-3, "base_batch": 8, "growth": 2.0,
    "failure_signal": "entropy", "failure_threshold": 100.0, "hysteresis": 2, "min_stage_steps": 5,
    "forecast_window": 4, "horizon_steps": 1, "margin": 1.0, "max_stages": 3, "detectors": [],
    "failure_exponent": 1.0,  # two-clock v2 grows the batch on a failure forecast only when alpha > 0
    "constraints": {"group_size": 4, "divisor": 8, "max_batch": 32}}


def _trl(out: Path, steps: int, resume: bool) -> subprocess.Popen:
    example = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_cpu.py"
    cmd = [sys.executable, str(example), "--out", str(out), "--steps", str(steps), "--save-steps", "2",
           "--schedule", str(out.parent / "trl_schedule.json")] + (["--resume"] if resume else [])
    return subprocess.Popen(cmd, env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _has_checkpoint(out: Path) -> bool:
    """Whether a resume has something to start from (else TRL raises 'No valid checkpoint')."""
    return any((out / "run").glob("checkpoint-*"))


def _by_step(rows: list[dict], kind: str) -> dict[int, dict]:
    """Last row of ``kind`` per step (a resumed run re-logs the updates after its checkpoint)."""
    return {r["step"]: r for r in rows if r.get("kind") == kind}


def cmd_trl(args: argparse.Namespace) -> None:
    import shutil

    rng = random.Random(args.seed)
    t_start = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "trl_schedule.json").write_text(json.dumps(TRL_SCHEDULE))
    ref, cut = args.out / "trl_uninterrupted", args.out / "trl_killed"
    for d in (ref, cut):
        shutil.rmtree(d, ignore_errors=True)
    p = _trl(ref, args.steps, False)
    _, err = p.communicate()
    if p.returncode:
        raise SystemExit(f"uninterrupted TRL run failed:\n{err.decode()[-3000:]}")
    kills, started, pruned = [], False, []

    def prune() -> None:
        """A kill during a checkpoint write leaves a directory without trainer_state.json, which
        ``resume_from_checkpoint=True`` picks (and fails on); remove such directories first."""
        for ck in sorted((cut / "run").glob("checkpoint-*")):
            if not (ck / "trainer_state.json").exists():
                shutil.rmtree(ck)
                pruned.append(ck.name)

    for _ in range(args.kills):
        done = len(_by_step(_lines(cut / "schedule.jsonl"), "decision"))
        at = done + rng.randint(2, 4)
        if at >= args.steps:
            break
        if started and args.prune_incomplete:
            prune()
        p = _trl(cut, args.steps, started and _has_checkpoint(cut))
        started = True
        while p.poll() is None and len(_by_step(_lines(cut / "schedule.jsonl"), "decision")) < at:
            time.sleep(0.05)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            p.wait()
            kills.append(at)
    if started and args.prune_incomplete:
        prune()
    p = _trl(cut, args.steps, started and _has_checkpoint(cut))
    _, err = p.communicate()
    if p.returncode:
        print(f"- killed (SIGKILL) {len(kills)} times after {kills} logged updates; the resumed run failed")
        raise SystemExit(f"resumed TRL run failed:\n{err.decode()[-3000:]}")
    ra, rb = _lines(ref / "schedule.jsonl"), _lines(cut / "schedule.jsonl")
    da, db = _by_step(ra, "decision"), _by_step(rb, "decision")
    key = ("samples", "batch", "lr", "stage", "switched")
    same = {s: tuple(da[s].get(k) for k in key) == tuple(db.get(s, {}).get(k) for k in key) for s in da}
    relogged = sum(1 for r in rb if r.get("kind") == "decision") - len(db)
    print(f"# kill/resume of the TRL example (GRPOTrainer + RlvrScheduleCallback, two-clock schedule); "
          f"{machine()}\n")
    print(f"- uninterrupted: {len(da)} updates, {max(d['samples'] for d in da.values())} rollouts, batches "
          f"{sorted({d['batch'] for d in da.values()})}, {sum(d['switched'] for d in da.values())} switches")
    print(f"- killed (SIGKILL) {len(kills)} times after {kills} logged updates; resumed with --resume "
          f"(checkpoint every 2 updates)")
    print(f"- incomplete checkpoints removed before resuming: {pruned or 'none'}")
    print(f"- resumed run: {len(db)} updates; {relogged} updates re-done after a checkpoint (logged twice, "
          f"the later kept)")
    print(f"- samples per update identical to uninterrupted (no lost or repeated rollouts in the count): "
          f"{[da[s]['samples'] for s in sorted(da)] == [db.get(s, {}).get('samples') for s in sorted(da)]}")
    print(f"- same decisions (samples, batch, lr, stage, switched) at every step: {all(same.values())} "
          f"({sum(same.values())}/{len(same)})")
    print(f"# wall time {time.perf_counter() - t_start:.0f} s")


LRS = [1e-4, 2e-4, 4e-4, 1.6e-3]  # the highest is past where the trainer notes saw reward fall


def cmd_sweep(args: argparse.Namespace) -> None:
    seeds = " ".join(map(str, args.seeds))
    cmd = (f"rlvr-trainer sweep --batches {' '.join(map(str, args.batches))} --seeds {seeds} "
           f"--base-lr {{LR}} --max-samples {args.max_samples} --no-progress --out {args.out}/lr{{LR}}")
    if args.run:
        for lr in LRS:
            subprocess.run(cmd.replace("{LR}", str(lr)).split(), check=True, env={**os.environ, **ENV})
    elif not args.summarize:
        print("# part 1: for LR in " + " ".join(map(str, LRS)) + f"; do {cmd.replace('{LR}', '$LR')}; done")
        print(f"# then: python {Path(__file__).name} sweep --summarize --out {args.out}")
        return
    summarize(args.out)


def _tenth(x, last: bool) -> float:
    import numpy as np

    k = max(1, len(x) // 10)
    return float(np.nanmean(x[-k:] if last else x[:k]))


CRASH_WINDOW = 512  # rollouts: the same sample window at every batch, so the noise is comparable


def reward_crash_samples(run, level: float) -> float | None:
    """Rollouts consumed when the trailing ``CRASH_WINDOW``-rollout mean reward first falls below
    ``level`` (None if it never does). A second failure clock beside the core's detectors, whose
    ``RewardCrash`` smooths over 4000 rollouts and so cannot fire within a 4096-rollout run."""
    import numpy as np

    rew, samples = run.array("reward_mean"), run.array("samples")
    for i in range(len(rew)):
        lo = np.searchsorted(samples, samples[i] - CRASH_WINDOW, side="right")
        if samples[i] >= CRASH_WINDOW and np.nanmean(rew[lo:i + 1]) < level:
            return float(samples[i])
    return None


def summarize(out: Path) -> None:
    """Per base LR (seeds pooled): ``fit_sweep`` (what ``rlvr-schedule fit --json`` prints) + a per-run table."""
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.clocks.failure import FailureScalingFit
    from rlvr_schedule.ingest import load_runs

    def g(v, f="{:.3g}"):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f.format(v)

    def iv(t):
        return "[" + ", ".join(g(v) if v not in (float("inf"),) else "inf" for v in t) + "]"

    print(f"# part 1 on the tiny task: sweeps per base LR; {machine()}\n")
    summary = []
    for d in sorted(out.glob("lr*"), key=lambda p: float(p.name[2:])):
        logs = sorted((d / "sweep").glob("b*-s*/metrics.jsonl"),
                      key=lambda p: tuple(int(x) for x in p.parent.name[1:].split("-s")))
        if not logs:
            continue
        base_lr = float(d.name[2:])
        runs = load_runs([str(p) for p in logs])
        fit = fit_sweep(runs)
        (out / f"fit-{d.name}.json").write_text(json.dumps(fit.to_dict(), default=str, indent=1))
        seeds = sorted({p.parent.name.split("-s")[-1] for p in logs})
        print(f"## base LR {base_lr:g} at batch 32 (seeds {', '.join(seeds)}; {len(runs)} runs)\n")
        print(f"target reward {g(fit.target)} (initial {g(fit.initial_reward)}); B* {g(fit.critical_batch)} "
              f"{iv(fit.critical_batch_interval)}; failure samples {g(fit.failure_samples)} "
              f"{iv(fit.failure_samples_interval)}; failure exponent {g(fit.failure_exponent)} "
              f"{iv(fit.failure_exponent_interval)}\n")
        level = 0.5 * fit.initial_reward
        crash = [reward_crash_samples(r, level) for r in runs]
        cfit = FailureScalingFit().fit(runs, failure_samples=crash)
        print(f"reward-crash clock ({CRASH_WINDOW}-rollout mean reward < {level:.3f} = half the initial): "
              f"{sum(c is not None for c in crash)}/{len(runs)} runs crashed; pooled {g(cfit.failure_samples_)} "
              f"{iv(cfit.failure_samples_interval_)} rollouts; exponent {g(cfit.alpha_)} {iv(cfit.alpha_interval_)}\n")
        print("| run | lr | reward first 10% | last 10% | entropy first -> last 10% | rollouts to target | "
              "rate (reward/rollout) | failure at (rollouts, signal) | reward crash at (rollouts) |")
        print("|---|---:|---:|---:|---|---:|---:|---|---:|")
        for r, rf, c in zip(runs, fit.runs, crash):
            rew, ent = r.array("reward_mean"), r.array("entropy")
            fail = "-" if rf.failure_samples is None or math.isnan(rf.failure_samples) else \
                f"{rf.failure_samples:.0f} ({rf.failure_signal})"
            print(f"| {rf.name} | {r.lr:.3g} | {_tenth(rew, False):.3f} | {_tenth(rew, True):.3f} | "
                  f"{_tenth(ent, False):.3f} -> {_tenth(ent, True):.3f} | {g(rf.samples_to_target, '{:.0f}')} | "
                  f"{g(rf.rate)} | {fail} | {g(c, '{:.0f}')} |")
        print()
        summary.append((base_lr, fit, cfit))
    print("## summary\n")
    print("| base LR | B* [interval] | B* x base LR | failure samples [interval] | failure exponent [interval] | "
          "reward-crash samples [interval] | reward-crash exponent [interval] |")
    print("|---:|---|---:|---|---|---|---|")
    for lr, f, cf in summary:
        prod = f.critical_batch * lr if f.critical_batch is not None else None
        print(f"| {lr:g} | {g(f.critical_batch)} {iv(f.critical_batch_interval)} | {g(prod)} | "
              f"{g(f.failure_samples)} {iv(f.failure_samples_interval)} | {g(f.failure_exponent)} "
              f"{iv(f.failure_exponent_interval)} | {g(cf.failure_samples_)} {iv(cf.failure_samples_interval_)} | "
              f"{g(cf.alpha_)} {iv(cf.alpha_interval_)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["cost", "killresume", "trl", "sweep", "_child"])
    ap.add_argument("--out", type=Path, default=Path("/tmp/rlvr-evidence-tiny"))
    ap.add_argument("--rollout", default="hf", choices=["hf", "vllm"])
    ap.add_argument("--max-samples", type=int, default=None, help="default: 4096 for sweep, else 384")
    ap.add_argument("--batches", type=int, nargs="+", default=None,
                    help="default: 8 16 32 64 128 for sweep, 8 32 128 for cost")
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--steps", type=int, default=16, help="TRL updates")
    ap.add_argument("--prune-incomplete", action="store_true",
                    help="TRL: delete checkpoints cut by a kill (no trainer_state.json) before resuming")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--summarize", action="store_true", help="sweep: fit and tabulate the runs under --out")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="sweep seeds")
    args = ap.parse_args()
    sweep = args.command == "sweep"
    if args.max_samples is None:
        args.max_samples = 4096 if sweep else 384
    if args.batches is None:
        args.batches = [8, 16, 32, 64, 128] if sweep else [8, 32, 128]
    os.environ.update(ENV)
    {"cost": cmd_cost, "killresume": cmd_killresume, "trl": cmd_trl, "sweep": cmd_sweep, "_child": cmd_child}[args.command](args)


if __name__ == "__main__":
    main()
