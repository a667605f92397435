"""The reference trainer's tiny task (CPU): the per-update cost model and kill/resume.

``cost``: short constant-batch runs; fits seconds per update = t0 + t1 x batch to the logged
``rollout_s + update_s`` (first update of each run dropped: warm-up), the cost model the
trainer comparison's estimate uses (``rlvr_trainer.experiments.comparison.COST``).

``killresume``: the default two-clock policy live in the loop (its ``initial_batch: auto`` switch
at the 100th record falls inside the budget), once uninterrupted and once SIGKILLed at random points and resumed each time
(``rlvr_trainer`` resumes from ``checkpoint.pt`` and cuts its logs back to it). Checks: no lost or
repeated samples, the same decisions, the same rewards.

``sweep``: the part-1 measurement (a 16x batch range at three base LRs, several seeds) - long on
a shared 2-core machine; printed as the command to run, or run with ``--run``; ``--summarize``
fits each LR's sweep (seeds pooled) and prints the tables of ``results/tiny_p1_*.md``, then B* x lr
across the LRs and the rollouts to target per batch. ``--lrs`` picks the base LRs (with
``--summarize``: only those directories), ``--lr-batches LR=B,B,..`` / ``--lr-samples LR=N`` give
one LR its own batch range / budget. ``results/tiny_p1_lr.md``:

    python tiny_task.py sweep --run --lrs 2.5e-5 5e-5 1e-4 --batches 16 32 64 128 256 \
        --max-samples 16384 --seeds 0 1 2 --out runs/p1
    python tiny_task.py sweep --summarize --out runs/p1

Needs a venv with the trainer installed (``nox -s trainer`` or ``pip install -r requirements/trainer.txt``):

    python -m benchmarks.evidence.tiny_task cost --out /tmp/tiny
    python -m benchmarks.evidence.tiny_task killresume --out /tmp/tiny --kills 3
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

from benchmarks.evidence.common import machine

ENV = {
    "OMP_NUM_THREADS": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def _cfg(args: argparse.Namespace, **kw):
    from rlvr_trainer.config import preset

    base = {"rollout": args.rollout, "max_samples": args.max_samples, "checkpoint_every": 1}
    base.update(kw)
    return preset("tiny", **base)


def _policy(cfg):
    from rlvr_schedule.policy import BatchConstraints, PolicyConfig

    # the DEFAULT policy (the kill/resume evidence must cross a switch of it): only the
    # trainer's LR, group size and batch range are set. With no known B* it runs its fallback batch
    # until the gradient-noise estimate has 100 records (and 1600 rollouts), then switches to 0.18 x it:
    # a decision from state (the estimate's EMAs, the forecast) that a resumed run must restore
    return PolicyConfig(
        fallback_batch=cfg.batch,  # the trainer's own batch until the estimate is ready
        base_lr=cfg.base_lr,
        base_batch=cfg.base_batch,
        lr_rule=cfg.lr_rule,
        constraints=BatchConstraints(group_size=cfg.group_size, min_batch=8, max_batch=128),
    )


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
        print(
            f"| {run.batch} | {len(tot)} | {np.median(ro):.3f} | {np.median(up):.3f} | {np.median(tot):.3f} | "
            f"{np.mean(tot):.3f} |"
        )
    t1, t0 = np.polyfit(np.array(xs, float), np.array(ys, float), 1)
    print(
        f"\nfit to the medians: seconds per update = {t0:.3f} + {t1:.5f} x batch (t0/t1 = {t0 / t1:.0f} rollouts)"
    )
    print(f"# wall time {time.perf_counter() - t_start:.0f} s")


def cmd_child(args: argparse.Namespace) -> None:
    from rlvr_trainer.experiments import run_one

    # micro_batch below the batch: the micro-batch gradient norm feeds the policy's noise estimate
    cfg = _cfg(args, batch=16, micro_batch=4, seed=args.seed)
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
    cmd = [
        sys.executable,
        "-m",
        __spec__.name,
        "_child",
        "--out",
        str(out),
        "--rollout",
        args.rollout,
        "--max-samples",
        str(args.max_samples),
        "--seed",
        str(args.seed),
    ]
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
    print(
        f"- uninterrupted: {len(a)} updates, {samples_a[-1] if a else 0} rollouts, batches "
        f"{sorted({r['batch'] for r in a})}, {sum(d.get('switched', False) for d in da)} switches"
    )
    print(
        f"- killed (SIGKILL) {len(kills)} times at (logged updates, extra seconds) {kills}, resumed each time"
    )
    print(f"- resumed run: {len(b)} updates, {samples_b[-1] if b else 0} rollouts")
    print(
        f"- lost or repeated samples: steps strictly 1..n: {steps_b == list(range(1, len(b) + 1))}; "
        f"samples identical to uninterrupted: {samples_a == samples_b}"
    )
    print(f"- same decisions (step, samples, batch, lr, stage, switched): {dec_a == dec_b}")
    print(f"- same rewards per update: {same_rewards}")
    print(f"# wall time {time.perf_counter() - t_start:.0f} s")


TRL_SCHEDULE = {  # the DEFAULT two-clock policy: only the LR and the batch constraints
    # set. With no known B* it runs its fallback batch (base_batch) until the gradient-noise estimate
    # (the callback's grad_norm_micro) has 100 records (and 1600 rollouts), then switches to 0.18 x it: a
    # resumed run must restore the estimate's state to switch at the same step to the same batch
    "type": "two_clock",
    "base_lr": 1e-3,
    "base_batch": 16,  # the fallback batch; the auto switch moves off it unless 0.18 B_simple rounds to 16
    "constraints": {"group_size": 4, "divisor": 8, "max_batch": 64},
}


def _trl(out: Path, steps: int, resume: bool) -> subprocess.Popen:
    example = Path(__file__).resolve().parents[2] / "examples" / "trl_grpo_cpu.py"
    cmd = [
        sys.executable,
        str(example),
        "--out",
        str(out),
        "--steps",
        str(steps),
        "--save-steps",
        "2",
        "--prompts",
        "1024",  # 1024 micro-steps per epoch hold the 100 x 4 + 12 x 16 of the default policy's run
        "--schedule",
        str(out.parent / "trl_schedule.json"),
    ] + (["--resume"] if resume else [])
    # stdout (the Trainer's log dicts, the example's "resume:" lines) to a file: a pipe nobody reads
    # while the run goes on would fill and stall it
    out.mkdir(parents=True, exist_ok=True)
    n = len(list(out.glob("stdout-*.txt")))
    with (out / f"stdout-{n}.txt").open("wb") as f, (out / f"stderr-{n}.txt").open("wb") as e:
        p = subprocess.Popen(cmd, env={**os.environ, **ENV}, stdout=f, stderr=e)
    p.err_path = out / f"stderr-{n}.txt"  # type: ignore[attr-defined]
    return p


def _err(p: subprocess.Popen) -> str:
    return p.err_path.read_text(errors="replace")[-3000:]  # type: ignore[attr-defined]


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
    p.wait()
    if p.returncode:
        raise SystemExit(f"uninterrupted TRL run failed:\n{_err(p)}")
    kills, started, pruned = [], False, []

    def prune() -> None:
        """A kill during a checkpoint write leaves a directory without trainer_state.json, which
        ``resume_from_checkpoint=True`` picks (and fails on); remove such directories first."""
        for ck in sorted((cut / "run").glob("checkpoint-*")):
            if not (ck / "trainer_state.json").exists():
                shutil.rmtree(ck)
                pruned.append(ck.name)

    # kill after 2-4 new logged updates, or (--kill-at) after the given numbers of logged updates, e.g.
    # before and after the default policy's switch
    points = [int(x) for x in args.kill_at.split(",")] if args.kill_at else [None] * args.kills
    for point in points:
        done = len(_by_step(_lines(cut / "schedule.jsonl"), "decision"))
        at = point if point is not None else done + rng.randint(2, 4)
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
    p.wait()
    if p.returncode:
        print(f"- killed (SIGKILL) {len(kills)} times after {kills} logged updates; the resumed run failed")
        raise SystemExit(f"resumed TRL run failed:\n{_err(p)}")
    ra, rb = _lines(ref / "schedule.jsonl"), _lines(cut / "schedule.jsonl")
    da, db = _by_step(ra, "decision"), _by_step(rb, "decision")
    key = ("samples", "batch", "lr", "stage", "switched")
    same = {s: tuple(da[s].get(k) for k in key) == tuple(db.get(s, {}).get(k) for k in key) for s in da}
    relogged = sum(1 for r in rb if r.get("kind") == "decision") - len(db)
    print(
        f"# kill/resume of the TRL example (GRPOTrainer + RlvrScheduleCallback, two-clock schedule); "
        f"{machine()}\n"
    )
    print(
        f"- uninterrupted: {len(da)} updates, {max(d['samples'] for d in da.values())} rollouts, batches "
        f"{sorted({d['batch'] for d in da.values()})}, {sum(d['switched'] for d in da.values())} switches"
    )
    print(
        f"- killed (SIGKILL) {len(kills)} times after {kills} logged updates; resumed with --resume "
        f"(checkpoint every 2 updates)"
    )
    print(f"- incomplete checkpoints removed before resuming: {pruned or 'none'}")
    said = [
        ln.strip()
        for f in sorted(cut.glob("stdout-*.txt"), key=lambda f: int(f.stem.split("-")[1]))
        for ln in f.read_text(errors="replace").splitlines()
        if ln.startswith("resume:")
    ]
    print(f"- resumes: {'; '.join(ln.replace(str(cut) + '/', '') for ln in said) or 'none'}")
    print(
        f"- resumed run: {len(db)} updates; {relogged} updates re-done after a checkpoint (logged twice, "
        f"the later kept)"
    )
    print(
        f"- samples per update identical to uninterrupted (no lost or repeated rollouts in the count): "
        f"{[da[s]['samples'] for s in sorted(da)] == [db.get(s, {}).get('samples') for s in sorted(da)]}"
    )
    print(
        f"- same decisions (samples, batch, lr, stage, switched) at every step: {all(same.values())} "
        f"({sum(same.values())}/{len(same)})"
    )
    for name, d in (("uninterrupted", da), ("killed", db)):
        sw = [(s, d[s]["batch"], d[s]["reason"]) for s in sorted(d) if d[s].get("switched")]
        print(f"- switches ({name}): {sw or 'none'}")
    # the training metrics the noise estimate reads: bit-exact (JSON floats) or not, per update
    rec_a, rec_b = _by_step(ra, "record"), _by_step(rb, "record")
    metrics = ("reward_mean", "grad_norm", "grad_norm_micro", "entropy")
    exact = {  # compared as JSON text, so that NaN equals NaN
        s: json.dumps([rec_a[s].get(k) for k in metrics])
        == json.dumps([rec_b.get(s, {}).get(k) for k in metrics])
        for s in rec_a
    }
    differ = [s for s in sorted(exact) if not exact[s]]
    print(
        f"- same training metrics ({', '.join(metrics)}) at every update, bit for bit: {not differ} "
        f"({sum(exact.values())}/{len(exact)}{f'; first differing update {differ[0]}' if differ else ''})"
    )
    print(f"# wall time {time.perf_counter() - t_start:.0f} s")


LRS = [1e-4, 2e-4, 4e-4, 1.6e-3]  # the highest is past where the trainer notes saw reward fall


def _per_lr(items: list[str], cast, what: str) -> dict[float, object]:
    """``LR=VALUE`` options (``--lr-batches 5e-5=16,32,64``) as {lr: cast(VALUE)}."""
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"{what} expects LR=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[float(k)] = cast(v)
    return out


def _sweep_plan(args: argparse.Namespace) -> list[tuple[float, list[int], int]]:
    """(base LR, batches, rollouts per run) per LR: ``--batches``/``--max-samples`` unless
    ``--lr-batches``/``--lr-samples`` name that LR."""
    lb = _per_lr(args.lr_batches, lambda v: [int(b) for b in v.split(",")], "--lr-batches")
    ls = _per_lr(args.lr_samples, int, "--lr-samples")
    return [(lr, lb.get(lr, args.batches), ls.get(lr, args.max_samples)) for lr in args.lrs]


def cmd_sweep(args: argparse.Namespace) -> None:
    def cmd(lr: float, batches: list[int], n: int, seeds: str) -> str:
        return (
            f"rlvr-trainer sweep --batches {' '.join(map(str, batches))} --seeds {seeds} --base-lr {lr} "
            f"--max-samples {n} --no-progress --out {args.out}/lr{lr}"
        )

    plan = _sweep_plan(args)
    if args.run:
        walls = []
        for seed in args.seeds:  # seed-major: a partial run still covers every LR
            for lr, batches, n in plan:
                t = time.perf_counter()
                subprocess.run(cmd(lr, batches, n, str(seed)).split(), check=True, env={**os.environ, **ENV})
                walls.append(f"lr {lr:g} seed {seed}: {time.perf_counter() - t:.0f} s")
                print(f"# {time.strftime('%H:%M:%S', time.gmtime())} UTC: sweep {walls[-1]}", flush=True)
        print("# wall time per sweep: " + "; ".join(walls), flush=True)
    elif not args.summarize:
        seeds = " ".join(map(str, args.seeds))
        print("# part 1, one sweep per base LR:")
        for lr, batches, n in plan:
            print(cmd(lr, batches, n, seeds))
        print(f"# then: python {Path(__file__).name} sweep --summarize --out {args.out}")
        return
    summarize(args.out, lrs=args.lrs if args.lrs_given else None)


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
        if samples[i] >= CRASH_WINDOW and np.nanmean(rew[lo : i + 1]) < level:
            return float(samples[i])
    return None


def _lr_dirs(out: Path, lrs: list[float] | None) -> list[Path]:
    dirs = sorted(out.glob("lr*"), key=lambda p: float(p.name[2:]))
    if lrs is not None:
        dirs = [d for d in dirs if any(math.isclose(float(d.name[2:]), lr, rel_tol=1e-9) for lr in lrs)]
    return dirs


def summarize(out: Path, lrs: list[float] | None = None) -> None:
    """Per base LR (seeds pooled): ``fit_sweep`` (what ``rlvr-schedule fit --json`` prints) + a per-run
    table; then across LRs: B* x LR (the prediction B* ~ 1/lr says constant) and rollouts to target
    per batch. ``lrs``: only these LRs' directories (default: every ``lr*`` under ``out``)."""
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.clocks.failure import FailureScalingFit
    from rlvr_schedule.ingest import load_runs

    def g(v, f="{:.3g}"):
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f.format(v)

    def iv(t):
        return "[" + ", ".join(g(v) if v not in (float("inf"),) else "inf" for v in t) + "]"

    print(f"# part 1 on the tiny task: sweeps per base LR; {machine()}\n")
    summary = []
    for d in _lr_dirs(out, lrs):
        logs = sorted(
            (d / "sweep").glob("b*-s*/metrics.jsonl"),
            key=lambda p: tuple(int(x) for x in p.parent.name[1:].split("-s")),
        )
        if not logs:
            continue
        base_lr = float(d.name[2:])
        runs = load_runs([str(p) for p in logs])
        fit = fit_sweep(runs)
        (out / f"fit-{d.name}.json").write_text(json.dumps(fit.to_dict(), default=str, indent=1))
        seeds = sorted({p.parent.name.split("-s")[-1] for p in logs}, key=int)
        budget = sorted({int(r.samples[-1]) for r in runs})
        print(
            f"## base LR {base_lr:g} at batch 32 (seeds {', '.join(seeds)}; {len(runs)} runs; batches "
            f"{', '.join(str(b) for b in sorted({r.batch for r in runs}))}; rollouts per run "
            f"{', '.join(map(str, budget))})\n"
        )
        print(
            f"target reward {g(fit.target)} (initial {g(fit.initial_reward)}); B* {g(fit.critical_batch)} "
            f"{iv(fit.critical_batch_interval)}; failure samples {g(fit.failure_samples)} "
            f"{iv(fit.failure_samples_interval)}; failure exponent {g(fit.failure_exponent)} "
            f"{iv(fit.failure_exponent_interval)}\n"
        )
        level = 0.5 * fit.initial_reward
        crash = [reward_crash_samples(r, level) for r in runs]
        cfit = FailureScalingFit().fit(runs, failure_samples=crash)
        print(
            f"reward-crash clock ({CRASH_WINDOW}-rollout mean reward < {level:.3f} = half the initial): "
            f"{sum(c is not None for c in crash)}/{len(runs)} runs crashed; pooled {g(cfit.failure_samples_)} "
            f"{iv(cfit.failure_samples_interval_)} rollouts; exponent {g(cfit.alpha_)} {iv(cfit.alpha_interval_)}\n"
        )
        print(
            "| run | lr | reward first 10% | last 10% | best (512-rollout mean) | "
            "entropy first -> last 10% | rollouts to target | rate (reward/rollout) | "
            "failure at (rollouts, signal) | reward crash at (rollouts) |"
        )
        print("|---|---:|---:|---:|---:|---|---:|---:|---|---:|")
        for r, rf, c in zip(runs, fit.runs, crash, strict=True):
            rew, ent = r.array("reward_mean"), r.array("entropy")
            fail = (
                "-"
                if rf.failure_samples is None or math.isnan(rf.failure_samples)
                else f"{rf.failure_samples:.0f} ({rf.failure_signal})"
            )
            print(
                f"| {rf.name} | {r.lr:.3g} | {_tenth(rew, False):.3f} | {_tenth(rew, True):.3f} | "
                f"{_best_window(r):.3f} | {_tenth(ent, False):.3f} -> {_tenth(ent, True):.3f} | "
                f"{g(rf.samples_to_target, '{:.0f}')} | {g(rf.rate)} | {fail} | {g(c, '{:.0f}')} |"
            )
        print()
        summary.append((base_lr, fit, cfit, runs))
    print("## summary\n")
    print(
        "| base LR | B* [interval] | B* x base LR | failure samples [interval] | failure exponent [interval] | "
        "reward-crash samples [interval] | reward-crash exponent [interval] |"
    )
    print("|---:|---|---:|---|---|---|---|")
    for lr, f, cf, _ in summary:
        prod = f.critical_batch * lr if f.critical_batch is not None else None
        print(
            f"| {lr:g} | {g(f.critical_batch)} {iv(f.critical_batch_interval)} | {g(prod)} | "
            f"{g(f.failure_samples)} {iv(f.failure_samples_interval)} | {g(f.failure_exponent)} "
            f"{iv(f.failure_exponent_interval)} | {g(cf.failure_samples_)} {iv(cf.failure_samples_interval_)} | "
            f"{g(cf.alpha_)} {iv(cf.alpha_interval_)} |"
        )
    _across_lrs(summary, g, iv)


def _best_window(run) -> float:
    """Best trailing ``CRASH_WINDOW``-rollout mean reward of a run (how high it got, noise-smoothed)."""
    import numpy as np

    rew, samples = run.array("reward_mean"), run.array("samples")
    best = -math.inf
    for i in range(len(rew)):
        if samples[i] >= CRASH_WINDOW:
            lo = np.searchsorted(samples, samples[i] - CRASH_WINDOW, side="right")
            best = max(best, float(np.nanmean(rew[lo : i + 1])))
    return best if math.isfinite(best) else float(np.nanmean(rew))


def _across_lrs(summary, g, iv) -> None:
    """B* x LR across base LRs (B* ~ 1/lr predicts one value) and rollouts to target per batch."""
    fin = [
        (lr, f) for lr, f, _, _ in summary if f.critical_batch is not None and math.isfinite(f.critical_batch)
    ]
    print("\n## B* across base LRs (prediction: B* ~ 1/lr, i.e. B* x lr constant)\n")
    print(
        "| base LR | B* [interval] | B* x base LR [interval] | B* / B*(lowest LR) | "
        "1/lr prediction of that ratio |"
    )
    print("|---:|---|---|---:|---:|")
    ref = fin[0] if fin else None
    for lr, f, _, _ in summary:
        b, (lo, hi) = f.critical_batch, f.critical_batch_interval
        ok = b is not None and math.isfinite(b)
        ratio = b / ref[1].critical_batch if ok and ref else None
        pred = ref[0] / lr if ok and ref else None
        print(
            f"| {lr:g} | {g(b)} {iv((lo, hi))} | {g(b * lr if ok else None)} "
            f"{iv((lo * lr, hi * lr))} | {g(ratio)} | {g(pred)} |"
        )
    if len(fin) >= 2:
        los = [f.critical_batch_interval[0] * lr for lr, f in fin]
        his = [f.critical_batch_interval[1] * lr for lr, f in fin]
        # an interval end that is nan (too few runs to bootstrap) constrains nothing
        lo = max([v for v in los if not math.isnan(v)], default=0.0)
        hi = min([v for v in his if not math.isnan(v)], default=math.inf)
        x = [math.log(lr) for lr, _ in fin]
        y = [math.log(f.critical_batch) for _, f in fin]
        mx, my = sum(x) / len(x), sum(y) / len(y)
        slope = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True)) / sum((a - mx) ** 2 for a in x)
        print(
            f"\nB* x lr constant within the intervals (one value inside every LR's interval): "
            f"{'yes' if lo <= hi else 'no'} (intersection [{g(lo)}, {g(hi)}]); log-log slope of the "
            f"point estimates, B* vs base LR: {slope:.2f} (1/lr predicts -1; over {len(fin)} LRs with a "
            "finite B*)"
        )
    print("\n## rollouts to target per batch (each LR's own target; seeds in order, '-' = not reached)\n")
    batches = sorted({r.batch for *_, runs in summary for r in runs})
    print("| base LR | target | " + " | ".join(f"b{b}" for b in batches) + " |")
    print("|---:|---:|" + "---|" * len(batches))
    for lr, f, _, runs in summary:
        cells = []
        for b in batches:
            v = [rf.samples_to_target for r, rf in zip(runs, f.runs, strict=True) if r.batch == b]
            cells.append(" / ".join(g(x, "{:.0f}") for x in v) if v else "")
        print(f"| {lr:g} | {g(f.target)} | " + " | ".join(cells) + " |")
    print(
        "\n## mean reward per eighth of the run (seeds averaged; the same prompts per eighth at every "
        "batch)\n"
    )
    print("| base LR | batch | seeds | " + " | ".join(f"{k}/8" for k in range(1, 9)) + " |")
    print("|---:|---:|---:|" + "---:|" * 8)
    for lr, _, _, runs in summary:
        for b in sorted({r.batch for r in runs}):
            rs = [r for r in runs if r.batch == b]
            print(f"| {lr:g} | {b} | {len(rs)} | " + " | ".join(f"{v:.3f}" for v in _eighths(rs)) + " |")


def _eighths(runs) -> list[float]:
    """Mean reward in each eighth of the rollout budget, averaged over ``runs``."""
    import numpy as np

    out = np.zeros(8)
    for r in runs:
        rew, samples = r.array("reward_mean"), r.array("samples")
        edges = np.linspace(0, samples[-1], 9)
        out += [
            np.nanmean(rew[(samples > a) & (samples <= b)])
            for a, b in zip(edges[:-1], edges[1:], strict=True)
        ]
    return list(out / len(runs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=["cost", "killresume", "trl", "sweep", "_child"])
    ap.add_argument("--out", type=Path, default=Path("/tmp/rlvr-evidence-tiny"))
    ap.add_argument("--rollout", default="hf", choices=["hf", "vllm"])
    ap.add_argument("--max-samples", type=int, default=None, help="default: 4096 for sweep, else 384")
    ap.add_argument(
        "--batches",
        type=int,
        nargs="+",
        default=None,
        help="default: 8 16 32 64 128 for sweep, 8 32 128 for cost",
    )
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--steps", type=int, default=16, help="TRL updates")
    ap.add_argument(
        "--kill-at",
        default="",
        help="TRL: kill after these numbers of logged updates (comma-separated, rising) instead of --kills",
    )
    ap.add_argument(
        "--prune-incomplete",
        action="store_true",
        help="TRL: delete checkpoints cut by a kill (no trainer_state.json) before resuming",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--run", action="store_true")
    ap.add_argument("--summarize", action="store_true", help="sweep: fit and tabulate the runs under --out")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="sweep seeds")
    ap.add_argument(
        "--lrs",
        type=float,
        nargs="+",
        default=None,
        help=f"sweep base LRs (default {' '.join(map(str, LRS))}); with --summarize only these",
    )
    ap.add_argument(
        "--lr-batches",
        nargs="+",
        default=[],
        metavar="LR=B,B,...",
        help="sweep: this LR's batches instead of --batches (e.g. 2.5e-05=32,64,128,256,512)",
    )
    ap.add_argument(
        "--lr-samples",
        nargs="+",
        default=[],
        metavar="LR=N",
        help="sweep: this LR's rollouts per run instead of --max-samples",
    )
    args = ap.parse_args()
    args.lrs_given = args.lrs is not None
    if args.lrs is None:
        args.lrs = LRS
    sweep = args.command == "sweep"
    if args.max_samples is None:
        args.max_samples = 4096 if sweep else 384
    if args.batches is None:
        args.batches = [8, 16, 32, 64, 128] if sweep else [8, 32, 128]
    os.environ.update(ENV)
    {"cost": cmd_cost, "killresume": cmd_killresume, "trl": cmd_trl, "sweep": cmd_sweep, "_child": cmd_child}[
        args.command
    ](args)


if __name__ == "__main__":
    main()
