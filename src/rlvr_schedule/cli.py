"""The ``rlvr-schedule`` command line: fit, plan, simulate, report.

One JSONL/CSV file (or TensorBoard directory) is one run; a run's batch comes from its records.
``--json`` output is the scripting contract:

- ``fit``: ``{"critical_batch", "failure_samples", "runs": [{"batch", "lr", "samples_to_target",
  "failure_samples", ...}], ...}``
- ``plan``: ``{"stages": [{"batch", "lr", "until_samples"}], ...}`` (``until_samples`` null on the last)

Bad input exits with status 2 and a message naming the file and line, without a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

from rlvr_schedule._format import clean_json as _clean
from rlvr_schedule._format import fmt as _fmt
from rlvr_schedule.errors import RlvrScheduleError

__all__ = ["main", "build_parser"]


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=_jsonable, allow_nan=False))


def _jsonable(o: Any) -> Any:
    try:
        f = float(o)
    except (TypeError, ValueError):
        return str(o)
    return f if math.isfinite(f) else None


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        widths = [max(len(h), *(len(_fmt(r[i])) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for r in rows:
            print("  ".join(_fmt(v).ljust(w) for v, w in zip(r, widths)))
        return
    t = Table(title=title)
    for h in header:
        t.add_column(h, justify="right")
    for r in rows:
        t.add_row(*(_fmt(v) for v in r))
    Console(width=None if sys.stdout.isatty() else 160).print(t)


def _load(paths: Sequence[str]) -> list:
    from rlvr_schedule.ingest import load_runs

    runs = load_runs(paths)
    if not runs:
        raise RlvrScheduleError("no runs given")
    return runs


# -- commands -----------------------------------------------------------------------------------

def cmd_fit(args: argparse.Namespace) -> int:
    from rlvr_schedule.clocks import fit_sweep

    fit = fit_sweep(_load(args.logs), target=args.target)
    d = _clean(fit.to_dict())
    if args.json:
        _print_json(d)
        return 0
    print(f"critical batch B*: {_fmt(d.get('critical_batch'))} rollouts/update "
          f"(interval {_fmt(d.get('critical_batch_interval'))})")
    print(f"failure samples:   {_fmt(d.get('failure_samples'))} "
          f"(interval {_fmt(d.get('failure_samples_interval'))})")
    print(f"failure exponent:  {_fmt(d.get('failure_exponent'))} (0 = fails on a sample schedule, 1 = on a step schedule)")
    print(f"target reward:     {_fmt(d.get('target'))}")
    _table("runs", ["run", "batch", "lr", "rate/rollout", "samples to target", "failure samples", "signal"],
           [[r.get("name"), r.get("batch"), r.get("lr"), r.get("rate"), r.get("samples_to_target"),
             r.get("failure_samples"), r.get("failure_signal")] for r in d.get("runs", [])])
    return 0


def _plan(args: argparse.Namespace):
    from rlvr_schedule.planner import plan_schedule

    kw: dict[str, Any] = {"target": args.target}
    if args.group_size is not None:
        kw["group_size"] = args.group_size
    return plan_schedule(_load(args.logs), **kw)


def cmd_plan(args: argparse.Namespace) -> int:
    plan = _plan(args)
    d = _clean(plan.to_dict())
    if args.out:
        # a schedule file that `load_schedule` (and `simulate --schedule`) reads back
        Path(args.out).write_text(json.dumps({"stages": d["stages"]}, indent=2))
    if args.json:
        _print_json(d)
        return 0
    _table("planned stages", ["stage", "batch", "lr", "until samples"],
           [[i, s.get("batch"), s.get("lr"), s.get("until_samples")] for i, s in enumerate(d["stages"])])
    pred = d.get("predicted") or {}
    if pred:
        print("predicted: " + ", ".join(f"{k} {_fmt(v)}" for k, v in pred.items()))
    for c in d.get("constant") or []:
        print("constant:  " + ", ".join(f"{k} {_fmt(v)}" for k, v in c.items()))
    return 0


def _schedule_for_simulation(args: argparse.Namespace):
    if args.schedule:
        from rlvr_schedule.policy import load_schedule

        return load_schedule(args.schedule)
    from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler

    initial: int | str = "auto" if args.initial_batch is None else args.initial_batch
    return TwoClockScheduler(PolicyConfig(initial_batch=initial, base_batch=args.base_batch, base_lr=args.lr,
                                          fallback_batch=args.base_batch))


def cmd_simulate(args: argparse.Namespace) -> int:
    from rlvr_schedule.synthetic import SyntheticEnvironment
    from rlvr_schedule.clocks import fit_sweep

    def env() -> SyntheticEnvironment:
        return SyntheticEnvironment(critical_batch=args.critical_batch, failure_samples=args.failure_samples,
                                    lr0=args.lr, base_batch=args.base_batch, noise=args.noise, seed=args.seed,
                                    drift=args.drift)

    runs = [env().run(_schedule_for_simulation(args), args.max_samples)]
    runs[0].name = "schedule"
    for b in args.constant:
        r = env().run_constant(b, args.max_samples)
        r.name = f"constant-{b}"
        runs.append(r)
    fit = fit_sweep(runs, target=args.target)
    d = _clean(fit.to_dict())
    rows = []
    for run, rd in zip(runs, d["runs"]):
        stt = rd.get("samples_to_target")
        steps = _steps_to(run, stt)
        rows.append({"run": run.name, "batches": sorted({r.batch for r in run.records}),
                     "samples_to_target": stt, "steps_to_target": steps,
                     "failure_samples": rd.get("failure_samples"),
                     "best_reward": _best(run)})
    out = {"target": d.get("target"), "runs": rows}
    if args.json:
        _print_json(out)
        return 0
    print(f"target reward {_fmt(d.get('target'))}")
    _table("simulation", ["run", "batches", "samples to target", "steps to target", "failure samples",
                          "best reward"],
           [[r["run"], r["batches"], r["samples_to_target"], r["steps_to_target"], r["failure_samples"],
             r["best_reward"]] for r in rows])
    return 0


def _steps_to(run, samples: float | None) -> int | None:
    if samples is None:
        return None
    for r in run.records:
        if r.samples >= samples:
            return r.step
    return None


def _best(run) -> float | None:
    import numpy as np

    y = run.array("reward_mean")
    return float(np.nanmax(y)) if np.isfinite(y).any() else None


def cmd_report(args: argparse.Namespace) -> int:
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.report import write_report

    runs = _load(args.logs)
    fit = fit_sweep(runs, target=args.target)
    plan = None
    try:
        from rlvr_schedule.planner import plan_schedule

        plan = plan_schedule(runs, target=args.target)
    except RlvrScheduleError as exc:  # too few runs to plan: the report still shows the fit
        print(f"note: no plan ({exc})", file=sys.stderr)
    index = write_report(runs, args.out, fit=fit, plan=plan)
    print(index)
    return 0


# -- parser -------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rlvr-schedule", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def logs_cmd(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help)
        sp.add_argument("logs", nargs="+", help="run logs: JSONL, CSV or TensorBoard dirs (one run each)")
        sp.add_argument("--target", type=float, default=None, help="target reward (default: from the sweep)")
        return sp

    sp = logs_cmd("fit", "critical batch, failure samples and a per-run table")
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_fit)

    sp = logs_cmd("plan", "a multi-step schedule from sweep logs")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--group-size", type=int, default=None, help="rollouts per prompt; batches are multiples")
    sp.add_argument("--out", default=None, help="also write the plan as JSON (a schedule file) here")
    sp.set_defaults(func=cmd_plan)

    sp = logs_cmd("report", "PNG plots and a summary page")
    sp.add_argument("--out", required=True, help="output directory")
    sp.set_defaults(func=cmd_report)

    sp = sub.add_parser("simulate", help="run a schedule in the closed-loop synthetic environment")
    sp.add_argument("--schedule", default=None, help="YAML/JSON schedule file (default: the two-clock policy)")
    sp.add_argument("--critical-batch", type=float, default=256.0,
                    help="the environment's critical batch at --lr, --base-batch (rollouts/update)")
    sp.add_argument("--failure-samples", type=float, default=50_000.0,
                    help="rollouts until collapse (at every batch, under the sqrt rule)")
    sp.add_argument("--lr", type=float, default=1e-6, help="LR at --base-batch")
    sp.add_argument("--base-batch", type=int, default=64)
    sp.add_argument("--initial-batch", type=int, default=None,
                    help="two-clock policy's first batch (default: auto, below the estimated critical batch)")
    sp.add_argument("--noise", type=float, default=1.0, help="metric-noise multiplier (0: exact clocks)")
    sp.add_argument("--drift", type=float, default=0.0, help="critical batch growth with progress")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument("--max-samples", type=int, default=80_000)
    sp.add_argument("--constant", type=int, nargs="*", default=[16, 64, 256, 1024],
                    help="constant batches to compare against")
    sp.add_argument("--target", type=float, default=None)
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_simulate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    fmt = warnings.formatwarning
    warnings.formatwarning = lambda msg, cat, *a, **k: f"warning: {msg}\n"  # type: ignore[assignment]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            return int(args.func(args) or 0)
    except (RlvrScheduleError, FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"rlvr-schedule {args.command}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = fmt


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
