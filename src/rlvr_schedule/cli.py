"""The ``rlvr-schedule`` command line: fit, plan, report, watch, replay, simulate.

One log file (or TensorBoard directory) is one run, in any format ``--help`` lists; a run's batch
comes from its records, the config its log prints, or ``--batch``. ``--json`` output is the
scripting contract (rollout counts are integers):

- ``fit``: ``{"critical_batch", "failure_samples", "runs": [{"batch", "lr", "samples_to_target",
  "failure_samples", ...}], ...}``
- ``plan``: ``{"stages": [{"batch", "lr", "until_samples"}], ...}`` (``until_samples`` null on the last)

Bad input exits with status 2 and a message naming the file and the line (a log) or the field (a
schedule), without a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rlvr_schedule import __version__
from rlvr_schedule._format import clean_json as _clean
from rlvr_schedule._format import column_formatter as _column_formatter
from rlvr_schedule._format import fmt as _fmt
from rlvr_schedule.bounds import MAX_BATCH, WHY
from rlvr_schedule.errors import ConfigError, RlvrScheduleError

if TYPE_CHECKING:
    from rlvr_schedule.clocks import FailureForecast
    from rlvr_schedule.clocks.failure.alarms import WatchAlarm
    from rlvr_schedule.records import StepRecord

__all__ = ["main", "build_parser"]


def _print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=_jsonable, allow_nan=False))


def _jsonable(o: Any) -> Any:
    try:
        f = float(o)
    except (TypeError, ValueError):
        return str(o)
    return f if math.isfinite(f) else None


_col_formatter = _column_formatter


def _table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    fmts = [_col_formatter(h, [r[i] for r in rows]) for i, h in enumerate(header)]
    cells = [[f(v) for f, v in zip(fmts, r, strict=True)] for r in rows]
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(title)
        widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        for c in cells:
            print("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))
        return
    t = Table(title=title)
    for h in header:
        t.add_column(h, justify="right")
    for c in cells:
        t.add_row(*c)
    Console(width=None if sys.stdout.isatty() else 200).print(t)


def _batch_options(items: Sequence[str] | None) -> tuple[int | None, dict[str, int]]:
    """``--batch N`` (every run) and ``--batch LOG=N`` (one log: its path, file name or run name)."""
    default: int | None = None
    per_log: dict[str, int] = {}
    for item in items or []:
        key, sep, value = item.rpartition("=")
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1:
            raise RlvrScheduleError(f"--batch {item!r}: expected N or LOG=N with N a whole number >= 1")
        if n > MAX_BATCH:
            raise RlvrScheduleError(f"--batch {item!r}: must be {WHY['batch']}")
        if sep:
            per_log[key] = n
        else:
            default = n
    return default, per_log


def _read_options(args: argparse.Namespace, batch: int | None = None):
    from rlvr_schedule.ingest.options import ReadOptions, parse_alias_options

    return ReadOptions(
        batch=batch,
        base_lr=getattr(args, "base_lr", None),
        aliases=parse_alias_options(getattr(args, "alias", None)) or None,
        format=getattr(args, "format", None),
        logging_steps=getattr(args, "logging_steps", None),
    )


#: fewer records than this and no clock can be fitted (a slope needs points on both sides).
MIN_RECORDS = 3


def _load(args: argparse.Namespace, paths: Sequence[str] | None = None) -> list:
    from rlvr_schedule.errors import IngestError
    from rlvr_schedule.ingest import load_runs
    from rlvr_schedule.ingest.lr import training_lr

    default, per_log = _batch_options(getattr(args, "batch", None))
    logs = list(paths if paths is not None else args.logs)
    keys = {
        log: next((k for k in (log, Path(log).name, Path(log).stem) if k in per_log), None) for log in logs
    }
    unused = set(per_log) - set(keys.values())
    if unused:
        raise RlvrScheduleError(
            f"--batch {', '.join(sorted(unused))}=...: no such log among {', '.join(logs)}"
        )
    runs: list[Any] = []
    seen: dict[Path, str] = {}
    for log in logs:
        key = keys[log]
        got = load_runs([log], options=_read_options(args, per_log[key] if key else default))
        for where in dict.fromkeys(Path(r.source).resolve() for r in got if r.source):  # a file's runs
            if where in seen:
                raise IngestError(f"given twice (also as {seen[where]}): each run once, please", source=log)
            seen[where] = log
        runs.extend(got)
    if not runs:
        raise RlvrScheduleError("no runs given")
    for run in runs:
        if len(run) < MIN_RECORDS:
            raise IngestError(
                f"run {run.name!r} has {len(run)} record(s); at least {MIN_RECORDS} are needed",
                source=run.source,
            )
        info = training_lr(run)
        run.meta["lr_info"] = info
        lrs = run.array("lr")
        lrs = lrs[~np.isnan(lrs)]
        pos = np.flatnonzero(lrs > 0)
        # 0 at the start (a warm-up from 0) or the end (a decay to 0) is an ordinary schedule; 0
        # between positive LRs, or no positive LR at all, is a log that lost it
        inner = bool(pos.size) and bool((lrs[pos[0] : pos[-1] + 1] <= 0).any())
        if inner or not pos.size or not math.isfinite(info.lr):
            zero = "LR 0 or below" if (lrs <= 0).any() else "no LR"
            warnings.warn(
                f"{run.source or run.name}: run {run.name!r} logs {zero} on some records "
                f"(lr after warm-up: {_fmt(info.lr)}); pass --base-lr if the log lost it",
                UserWarning,
                stacklevel=2,
            )
    _warn_setup_differs(runs)
    return runs


def _warn_setup_differs(runs: Sequence[Any]) -> None:
    """Runs of one sweep should differ only in batch and LR; say what else differs, as far as logs tell."""
    keys: dict[str, set[str]] = {}
    for run in runs:
        for k, v in (run.meta.get("setup") or {}).items():
            keys.setdefault(k, set()).add(str(v))
    differ = {k: sorted(v) for k, v in keys.items() if len(v) > 1}
    if differ:
        what = "; ".join(f"{k}: {', '.join(v)}" for k, v in differ.items())
        warnings.warn(
            f"the runs differ in more than batch and LR ({what}): one critical batch for all "
            "of them may not mean much",
            UserWarning,
            stacklevel=3,
        )


def _check_target(args: argparse.Namespace) -> None:
    t = getattr(args, "target", None)
    if t is not None and not math.isfinite(t):
        raise RlvrScheduleError(f"--target must be a finite reward, got {t!r}")


#: keys of JSON output that count rollouts (written as integers).
def _is_count_key(key: str) -> bool:
    return key.endswith(
        (
            "samples",
            "samples_to_target",
            "samples_interval",
            "samples_to_target_interval",
            "made_at_samples",
            "warmup_samples",
        )
    ) or key in ("until_samples", "start_samples")


def _int_counts(obj: Any, key: str = "") -> Any:
    """Rollout counts as integers in JSON output (they are counts, never fractions of a rollout)."""
    if isinstance(obj, dict):
        return {k: _int_counts(v, k) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_int_counts(v, key) for v in obj]
    if isinstance(obj, float) and _is_count_key(key) and math.isfinite(obj):
        return int(round(obj))
    return obj


#: Plausible ranges: an interval wider than these says the data cannot pin the estimate down.
PLAUSIBLE_EXPONENT = (-1.0, 2.0)  # 0: fails on a sample schedule, 1: on a step schedule
PLAUSIBLE_RATIO = 100.0  # critical batch / failure samples: interval over two decades wide


def _undetermined(d: dict[str, Any]) -> list[str]:
    """Estimates whose interval spans more than their plausible range."""
    out = []
    lo, hi = (d.get("failure_exponent_interval") or [None, None])[:2]
    if lo is not None and hi is not None and hi - lo > PLAUSIBLE_EXPONENT[1] - PLAUSIBLE_EXPONENT[0]:
        out.append("failure_exponent")
    for k in ("critical_batch", "failure_samples"):
        lo, hi = (d.get(k + "_interval") or [None, None])[:2]
        if lo is not None and hi is not None and (lo <= 0 or hi / lo > PLAUSIBLE_RATIO):
            out.append(k)
    return out


def _estimate(d: dict[str, Any], key: str, undetermined: list[str], count: bool = False) -> str:
    f = _fmt_count if count else _fmt
    iv = d.get(key + "_interval") or []
    has_iv = any(x is not None for x in iv)
    ivs = "[" + ", ".join(f(x) for x in iv) + "]" if has_iv else ""
    if key in undetermined:
        return f"undetermined (estimate {f(d.get(key))}, interval {ivs} wider than plausible)"
    return f"{f(d.get(key))} ({'interval ' + ivs if has_iv else 'no interval'})"


def _fmt_count(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    return f"{int(round(float(v))):,}"


# -- commands -----------------------------------------------------------------------------------


def _run_rows(runs: Sequence[Any], d: dict[str, Any]) -> list[dict[str, Any]]:
    """fit's per-run rows plus where each run's batch and LR came from (and its LR after warm-up)."""
    rows = []
    for run, r in zip(runs, d.get("runs", []), strict=False):
        info = run.meta.get("lr_info")
        r = dict(r)
        r["batch_source"] = run.meta.get("batch_source")
        if run.meta.get("step_rule"):  # console logs: how each record's step was found
            r["step_rule"] = run.meta["step_rule"]
            r["logging_interval"] = run.meta.get("logging_interval")
        if info is not None:
            r["lr"] = info.lr if math.isfinite(info.lr) else None
            r["lr_first"] = info.first_lr if math.isfinite(info.first_lr) else None
            r["lr_schedule"] = info.describe()
        rows.append(r)
    return rows


def cmd_fit(args: argparse.Namespace) -> int:
    from rlvr_schedule.clocks import fit_sweep

    _check_target(args)
    runs = _load(args)
    fit = fit_sweep(runs, target=args.target)
    d = _clean(fit.to_dict())
    d["runs"] = _run_rows(runs, d)
    und = _undetermined(d)
    d["undetermined"] = und
    why = fit.unidentified()
    d["unidentified"] = why
    d["price"] = _price(runs, args)
    _costs(d["runs"], d["price"]["rollouts_per_update"])
    if args.json:
        _print_json(_int_counts(d))
        return 0

    def said(key: str) -> str:
        return f"not identified: {why[key]}" if key in why else _estimate(d, key, und, count=True)

    print(
        f"critical batch B*: {said('critical_batch')}"
        + ("" if "critical_batch" in why else " rollouts/update")
    )
    print(f"failure samples:   {said('failure_samples')}")
    if d.get("failure_censored"):
        print(
            f"                   ({d['failure_censored']} runs that did not fail counted as right-censored; "
            f"P(failure within {_fmt_count(d.get('budget'))} rollouts) {_fmt(d.get('failure_probability'))})"
        )
    print(
        f"failure exponent:  {_estimate(d, 'failure_exponent', und)} "
        "(0 = fails on a sample schedule, 1 = on a step schedule)"
    )
    print(f"target reward:     {_fmt(d.get('target'))}")
    print(f"price:             {_said_price(d['price'])}")
    _table(
        "runs",
        [
            "run",
            "batch",
            "batch from",
            "lr after warm-up",
            "lr schedule",
            "rate/rollout",
            "samples to target",
            "failure samples",
            "signal",
            "cost to target",
        ],
        [
            [
                r.get("name"),
                r.get("batch"),
                (r.get("batch_source") or "-")
                + (
                    f"; a record every {r['logging_interval']} steps"
                    if (r.get("logging_interval") or 1) > 1
                    else ""
                ),
                r.get("lr"),
                r.get("lr_schedule") or "-",
                r.get("rate"),
                r.get("samples_to_target"),
                r.get("failure_samples"),
                r.get("signal", r.get("failure_signal")),
                _fmt_count(r.get("cost_to_target")) + (" (cheapest)" if r.get("cheapest") else ""),
            ]
            for r in d["runs"]
        ],
    )
    return 0


def _price(runs: Sequence[Any], args: argparse.Namespace) -> dict[str, Any]:
    """The price (rollouts per update) ``fit`` reports: ``--price`` where given (it wins), else fitted
    from the runs' step times at two or more batches, with its interval and source; where it is not
    identified (one batch, no step times) the default and the reason."""
    from rlvr_schedule.policy.price import DEFAULT_PRICE, StepTimeFit

    measured = StepTimeFit.from_runs(runs).to_dict()
    stated = getattr(args, "price", None)
    if stated is not None:
        return dict(rollouts_per_update=stated, interval=None, source="stated (--price)", measured=measured)
    if measured["unidentified"] is None:
        return dict(
            measured, source=f"measured: {measured['source']} at batches {measured['batches']}", measured=None
        )
    return dict(
        rollouts_per_update=DEFAULT_PRICE,
        interval=None,
        source="default",
        identified=False,
        unidentified=f"not identified: {measured['unidentified']}",
        measured=measured,
    )


def _said_price(p: dict[str, Any]) -> str:
    iv = p.get("interval") or [None, None]
    ivs = f" (interval [{_fmt(iv[0])}, {_fmt(iv[1])}])" if iv[0] is not None else ""
    out = f"{_fmt(p['rollouts_per_update'])} rollouts/update{ivs}, {p['source']}"
    return out + (f"; {p['unidentified']}" if p.get("unidentified") else "")


def _costs(rows: list[dict[str, Any]], rho: float) -> None:
    """Each run's cost to target at the price (rollouts + price x updates), the cheapest marked."""
    costs = []
    for r in rows:
        stt, b = r.get("samples_to_target"), r.get("batch")
        r["cost_to_target"], r["cheapest"] = None, False
        if isinstance(stt, (int, float)) and math.isfinite(stt) and isinstance(b, (int, float)) and b > 0:
            r["cost_to_target"] = float(stt) + rho * float(stt) / float(b)
            costs.append(r)
    if costs:
        min(costs, key=lambda r: r["cost_to_target"])["cheapest"] = True


def _plan(args: argparse.Namespace, runs: Sequence[Any] | None = None):
    from rlvr_schedule.planner import plan_schedule

    _check_target(args)
    config = None
    if getattr(args, "schedule", None):
        from rlvr_schedule.policy import TwoClockScheduler, load_schedule

        sched = load_schedule(args.schedule)
        if not isinstance(sched, TwoClockScheduler):
            raise ConfigError(
                "plan --schedule reads a two_clock schedule file (the live policy's config); this is "
                "a static schedule",
                source=args.schedule,
                field="type",
            )
        config = sched.config
    kw: dict[str, Any] = {"target": args.target}
    if getattr(args, "price", None) is not None:
        if config is not None and config.sample_tolerance is not None:
            raise ConfigError(
                "plan --price and the schedule's sample_tolerance both set the batch: drop one",
                source=args.schedule,
                field="sample_tolerance",
            )
        kw["rollouts_per_update"] = args.price
    if getattr(args, "group_size", None) is not None:
        cons = config.constraints if config is not None else None
        kw["constraints"] = {**(cons.to_dict() if cons else {}), "group_size": args.group_size}
    return plan_schedule(runs if runs is not None else _load(args), config, **kw)


#: plan's predicted rollouts to target worse than this multiple of the best constant run: warn.
PLAN_WORSE = 1.5


def _warn_plan_worse(d: dict[str, Any]) -> None:
    pred = (d.get("predicted") or {}).get("samples_to_target")
    measured = [c.get("samples_to_target") for c in d.get("constant") or [] if c.get("samples_to_target")]
    if pred and measured and pred > PLAN_WORSE * min(measured):
        warnings.warn(
            f"the plan is predicted to need {pred:,.0f} rollouts to the target, more than "
            f"{PLAN_WORSE:g}x the best constant run measured ({min(measured):,.0f}): its model does "
            "not fit this sweep well; prefer the best constant batch",
            UserWarning,
            stacklevel=2,
        )


def cmd_plan(args: argparse.Namespace) -> int:
    plan = _plan(args)
    d = _int_counts(_clean(plan.to_dict()))
    _warn_plan_worse(d)
    if args.out:
        # a schedule file that `load_schedule` (and `simulate --schedule`) reads back: the stages
        # the live policy's failure-clock trigger would switch at (docs/ARCHITECTURE.md)
        Path(args.out).write_text(json.dumps({"stages": d["stages"]}, indent=2))
    if args.json:
        _print_json(d)
        return 0
    _table(
        "planned stages",
        ["stage", "batch", "lr", "until samples"],
        [[i, s.get("batch"), s.get("lr"), s.get("until_samples")] for i, s in enumerate(d["stages"])],
    )
    pr = d.get("price") or {}
    if pr:
        print(f"price: {_fmt(pr.get('rollouts_per_update'))} rollouts/update ({pr.get('source')})")
    pred = d.get("predicted") or {}
    if pred:
        print("predicted: " + ", ".join(f"{k} {_fmt(v)}" for k, v in pred.items()))
    for c in d.get("constant") or []:
        print("constant:  " + ", ".join(f"{k} {_fmt(v)}" for k, v in c.items()))
    for n in d.get("notes") or []:
        print(f"note: {n}")
    return 0


def _schedule_batches(schedule: Any) -> list[int]:
    """The batches a schedule names up front (a static one's stages; a policy's first batch)."""
    stages = getattr(schedule, "stages", None)
    if stages:
        return [int(st.batch) for st in stages]
    current = getattr(schedule, "current", None)
    batch = getattr(current, "batch", None)
    return [int(batch)] if isinstance(batch, (int, float)) and batch >= 1 else []


def _schedule_for_simulation(args: argparse.Namespace, task: dict[str, Any]):
    if args.schedule:
        from rlvr_schedule.policy import load_schedule

        return load_schedule(args.schedule)
    from rlvr_schedule.policy import PolicyConfig, TwoClockScheduler

    initial: int | str = "auto" if args.initial_batch is None else args.initial_batch
    b0 = int(task["base_batch"])
    return TwoClockScheduler(
        PolicyConfig(initial_batch=initial, base_batch=b0, base_lr=float(task["lr0"]), fallback_batch=b0)
    )


#: The synthetic task ``simulate`` runs when given neither a sweep (--fit) nor its parameters.
DEFAULT_TASK = {"critical_batch": 256.0, "failure_samples": 50_000.0}


def _simulated_task(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """The task ``simulate`` runs (critical batch, failure samples, LR at the base batch) and where it
    comes from: the fit of the sweep logs in ``--fit``, stated parameters, or the default task."""
    task: dict[str, Any] = {"lr0": args.lr, "base_batch": args.base_batch}
    if args.fit:
        from rlvr_schedule.clocks import fit_sweep

        runs = _load(args, args.fit)
        fit = fit_sweep(runs, target=args.target)
        why = fit.unidentified()
        if "critical_batch" in why:
            raise RlvrScheduleError(
                f"--fit: the sweep's critical batch is not identified: {why['critical_batch']}"
            )
        smallest = min(runs, key=lambda r: r.batch)
        task.update(
            critical_batch=float(fit.critical_batch),
            base_batch=int(smallest.batch),
            lr0=float(smallest.meta["lr_info"].lr),
            failure_samples=(
                float(fit.failure_samples) if "failure_samples" not in why else 1000.0 * args.max_samples
            ),
        )
        origin = f"the fit of {len(runs)} sweep runs"
        if "failure_samples" in why:
            origin += "; no failure in the sweep: the simulated one at 1000x --max-samples"
    else:
        stated = {k: getattr(args, k) for k in DEFAULT_TASK if getattr(args, k) is not None}
        task.update({**DEFAULT_TASK, **stated})
        origin = (
            "stated parameters"
            if len(stated) == len(DEFAULT_TASK)
            else "the default synthetic task, not your sweep (give --fit LOGS, or --critical-batch and "
            "--failure-samples)"
            if not stated
            else "stated parameters and the default task's "
            + ", ".join(sorted(set(DEFAULT_TASK) - set(stated)))
        )
    for k in ("critical_batch", "failure_samples"):
        if not task[k] > 0:
            raise RlvrScheduleError(f"the simulated task's {k} must be positive, got {task[k]!r}")
    return task, origin


def cmd_simulate(args: argparse.Namespace) -> int:
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.synthetic import SyntheticEnvironment

    task, origin = _simulated_task(args)
    said = (
        f"task: critical batch {task['critical_batch']:.4g} at lr {task['lr0']:.3g} and batch "
        f"{task['base_batch']}, failure after {_fmt_count(task['failure_samples'])} rollouts ({origin})"
    )

    def env() -> SyntheticEnvironment:
        return SyntheticEnvironment(noise=args.noise, seed=args.seed, drift=args.drift, **task)

    from rlvr_schedule.bounds import MAX_SIMULATE_UPDATES

    schedule = _schedule_for_simulation(args, task)
    smallest = min([*args.constant, int(task["base_batch"]), *_schedule_batches(schedule)])
    updates = args.max_samples / smallest
    if updates > MAX_SIMULATE_UPDATES:
        raise RlvrScheduleError(
            f"--max-samples {args.max_samples:g} is {updates:.3g} updates at batch {smallest}: at most "
            f"{MAX_SIMULATE_UPDATES:,} updates a run are simulated (about 100 s each); lower --max-samples "
            "or raise the smallest batch"
        )
    progress = updates * (1 + len(args.constant)) > 100_000  # a run of many seconds: say where it is
    n_runs = 1 + len(args.constant)
    if progress:
        print(
            f"simulate: run 1/{n_runs} (the schedule), up to {args.max_samples:g} rollouts", file=sys.stderr
        )
    runs = [env().run(schedule, args.max_samples)]
    runs[0].name = "schedule"
    for i, b in enumerate(args.constant, start=2):
        if progress:
            print(f"simulate: run {i}/{n_runs} (constant batch {b})", file=sys.stderr, flush=True)
        r = env().run_constant(b, args.max_samples)
        r.name = f"constant-{b}"
        runs.append(r)
    fit = fit_sweep(runs, target=args.target)
    d = _clean(fit.to_dict())
    rows = []
    for run, rd in zip(runs, d["runs"], strict=False):
        stt = rd.get("samples_to_target")
        steps = _steps_to(run, stt)
        rows.append(
            {
                "run": run.name,
                "batches": sorted({r.batch for r in run.records}),
                "samples_to_target": stt,
                "steps_to_target": steps,
                "failure_samples": rd.get("failure_samples"),
                "best_reward": _best(run),
            }
        )
    out = {"task": {**_clean(task), "from": origin}, "target": d.get("target"), "runs": rows}
    if args.json:
        _print_json(out)
        return 0
    print(said)
    print(f"target reward {_fmt(d.get('target'))}")
    _table(
        "simulation",
        ["run", "batches", "samples to target", "steps to target", "failure samples", "best reward"],
        [
            [
                r["run"],
                r["batches"],
                r["samples_to_target"],
                r["steps_to_target"],
                r["failure_samples"],
                r["best_reward"],
            ]
            for r in rows
        ],
    )
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

    _check_target(args)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise RlvrScheduleError(f"--out {out}: is a file; give a directory (created if missing)")
    runs = _load(args)
    fit = fit_sweep(runs, target=args.target)
    plan = None
    try:
        plan = _plan(args, runs)
    except RlvrScheduleError as exc:  # too few runs to plan: the report still shows the fit
        print(f"note: no plan ({exc})", file=sys.stderr)
    index = write_report(runs, out, fit=fit, plan=plan, price=getattr(args, "price", None))
    print(index)
    return 0


# -- watch and replay -----------------------------------------------------------------------------


#: Records with entropy and reward before ``watch`` reports the entropy-limited reward ceiling.
CEILING_MIN_RECORDS = 20


class _Watch:
    """What ``watch`` prints, computed only from the records read so far (fed one by one)."""

    def __init__(self) -> None:
        from rlvr_schedule.clocks import GradientNoiseScale, OnlineProgress
        from rlvr_schedule.clocks.failure import default_detectors
        from rlvr_schedule.clocks.failure.alarms import CollapseWatch

        self.progress = OnlineProgress()
        self.noise = GradientNoiseScale()
        self.detectors = default_detectors()
        self.collapse = CollapseWatch(self.detectors)  # the raised alarms (--on-alarm, --exit-on-failure)
        self.raised: list[WatchAlarm] = []  # raised by the last update
        self.failure: WatchAlarm | None = None  # the first raised failure
        self.gap: int | None = None  # updates between two records, where the log skips some
        self.forecast: FailureForecast | None = None
        self.alarms: list[str] = []
        self.records = 0
        self.last: StepRecord | None = None
        self._entropy: list[float] = []  # (entropy, reward) pairs of the entropy-limited ceiling
        self._reward: list[float] = []

    def update(self, rec: StepRecord) -> None:
        from rlvr_schedule.clocks import FailureForecast

        if self.forecast is None:
            signal = "entropy" if math.isfinite(rec.entropy) else "reward_mean"
            self.forecast = FailureForecast(signal)
        self.progress.update(rec)
        self.noise.update(rec)
        self.forecast.update(rec)
        if self.last is not None and self.gap is None and rec.step - self.last.step > 1:
            self.gap = int(rec.step - self.last.step)  # the log keeps every k-th update
        self.raised = self.collapse.update(rec)  # feeds the detectors
        for a in self.raised:  # the first raised failure has its own place in the status line
            if self.failure is None and a.kind == "failure":
                self.failure = a
            else:
                self.alarms.append(f"{a.name} {a.kind} at step {a.step}")
        self.records += 1
        self.last = rec
        if math.isfinite(rec.entropy) and math.isfinite(rec.reward_mean):
            self._entropy.append(rec.entropy)
            self._reward.append(rec.reward_mean)

    def ceiling(self) -> tuple[float | None, list[float | None]]:
        """The entropy-limited reward ceiling so far (R = -a exp(H) + b at H = 0, Cui et al. 2025)
        and its interval; None until :data:`CEILING_MIN_RECORDS` records carry both signals, or
        while entropy has not moved."""
        from rlvr_schedule.clocks import RewardCeilingFit

        if len(self._entropy) < CEILING_MIN_RECORDS:
            return None, [None, None]
        try:
            fit = RewardCeilingFit().fit(self._entropy, self._reward)
        except ValueError:
            return None, [None, None]
        lo, hi = fit.ceiling_interval_
        return fit.ceiling_, [lo, hi]

    def status(self) -> dict[str, Any]:
        rec = self.last
        if rec is None:
            raise RuntimeError("no record yet")
        fc = self.forecast
        lo, hi = fc.interval if fc is not None else (math.nan, math.nan)  # rollouts left: low, high
        lo, hi = (fc.samples + lo, fc.samples + hi) if fc is not None else (lo, hi)
        # a forecast is a prediction only while a collapse is still ahead with an interval of some
        # width (a trend already past its threshold, or a degenerate fit, predicts nothing)
        forecast = (
            fc is not None
            and math.isfinite(fc.failure_samples)
            and fc.failure_samples > fc.samples
            and math.isfinite(lo)
            and math.isfinite(hi)
            and hi > lo
        )
        b_simple = self.noise.b_simple
        ceiling, ceiling_iv = self.ceiling()
        return _clean(
            {
                "records": self.records,
                "step": rec.step,
                "samples": rec.samples,
                "batch": rec.batch,
                "lr": rec.lr,
                "reward": rec.reward_mean,
                "rate_per_rollout": self.progress.rate,
                "b_simple": b_simple if math.isfinite(b_simple) else None,
                "failure_signal": fc.signal if fc is not None else None,
                "failure_samples": fc.failure_samples if fc is not None and forecast else None,
                "failure_samples_interval": [lo, hi] if forecast else [None, None],
                "failure_raised": None if self.failure is None else self.failure.to_dict(),
                "reward_ceiling": ceiling,
                "reward_ceiling_interval": ceiling_iv,
                "alarms": list(self.alarms),
            }
        )


def _watch_line(where: str, st: dict[str, Any]) -> str:
    iv = st.get("failure_samples_interval") or [None, None]
    raised = st.get("failure_raised")
    if raised is not None:
        fail = f"failure raised at step {raised['raised_step']} (onset step {raised['onset_step']})"
    elif st.get("failure_samples") is None:
        fail = "failure forecast: none"
    else:
        fail = (
            f"failure forecast at {_fmt_count(st['failure_samples'])} rollouts "
            f"[{_fmt_count(iv[0])}, {_fmt_count(iv[1])}] ({st['failure_signal']})"
        )
    b_simple = "-" if st.get("b_simple") is None else _fmt_count(st["b_simple"])
    rate = "-" if st.get("rate_per_rollout") is None else f"{st['rate_per_rollout']:.3g}"
    alarms = "; ".join(st["alarms"]) if st.get("alarms") else "none"
    ceiling = "-" if st.get("reward_ceiling") is None else _fmt(st["reward_ceiling"])
    return (
        f"[{where}] step {st['step']}  rollouts {_fmt_count(st['samples'])}  batch {st['batch']}  "
        f"lr {_fmt(st.get('lr'))}  reward {_fmt(st.get('reward'))} (ceiling {ceiling})  "
        f"rate/rollout {rate}  B_simple {b_simple}  {fail}  alarms: {alarms}"
    )


def cmd_watch(args: argparse.Namespace) -> int:
    import time

    from rlvr_schedule.ingest.follow import LogFollower
    from rlvr_schedule.ingest.textio import check_regular

    check_regular(args.log)  # missing, a FIFO, a device, a symlink loop: refused before any read
    watch = _Watch()
    shown_warnings = 0
    failed = False
    last_change = time.monotonic()
    hooks = _HookRunner(args)
    runs_seen = 0
    with LogFollower(args.log, _read_options(args, _batch_options(args.batch)[0])) as follower:
        while True:
            new = follower.poll()
            if args.max_records is not None:
                new = new[: max(args.max_records - watch.records, 0)]
            for w in follower.warnings[shown_warnings:]:
                print(f"warning: {w}", file=sys.stderr)
            shown_warnings = len(follower.warnings)
            hooks.poll()
            if follower.deleted:
                hooks.finish()
                print(f"rlvr-schedule watch: {args.log} was deleted: exiting", file=sys.stderr)
                return EXIT_DELETED
            if follower.new_runs != runs_seen:  # a restart from step 1: the clocks start over
                runs_seen = follower.new_runs
                watch = _Watch()
            if new:
                last_change = time.monotonic()
                raised_now: list[WatchAlarm] = []
                for i, rec in enumerate(new):
                    had_gap = watch.gap
                    watch.update(rec)
                    if had_gap is None and watch.gap is not None:
                        from rlvr_schedule.clocks.failure.alarms import logging_gap_note

                        print(f"warning: {args.log}: {logging_gap_note(watch.gap)}", file=sys.stderr)
                    raised_now += watch.raised
                    for alarm in watch.raised:
                        failed |= alarm.kind == "failure"
                        _on_alarm(args, alarm, rec, hooks)
                    if failed and args.exit_on_failure:
                        new = new[: i + 1]  # the state printed is the failure's
                        break
                where = f"line {follower.lines}" if follower.lines else f"step {new[-1].step}"
                st = watch.status()
                if args.json:
                    st["raised"] = [a.to_dict() for a in raised_now]
                    print(json.dumps(_int_counts({"at": where, **st}), default=_jsonable), flush=True)
                else:
                    print(_watch_line(where, st), flush=True)
            if args.max_records is not None and watch.records >= args.max_records:
                break
            if args.until_idle is not None and time.monotonic() - last_change > args.until_idle:
                break
            time.sleep(args.interval)
            if failed and args.exit_on_failure:
                break
        hooks.finish()
        if watch.records == 0:
            raise RlvrScheduleError(follower.error or f"{args.log}: no records")
    if failed and args.exit_on_failure:
        print(f"rlvr-schedule watch: failure in {args.log}: exiting (--exit-on-failure)", file=sys.stderr)
        return EXIT_FAILURE
    return 0


#: ``watch --exit-on-failure``: the exit status once the failure clock fired (2 is bad input).
EXIT_FAILURE = 3
#: ``watch``: the exit status when the log was deleted (and not replaced by the next read).
EXIT_DELETED = 4


class _HookRunner:
    """``--on-alarm CMD`` without blocking the watch: each alarm is queued and a worker thread runs
    ``CMD`` in a shell, one alarm at a time in the order raised, with the alarm as JSON on stdin, while
    the watch goes on reading. A command that exits non-zero or runs past ``--on-alarm-timeout`` (then
    killed) is reported on stderr. At the end the watch waits for the queued commands, each at most
    its timeout."""

    def __init__(self, args: argparse.Namespace) -> None:
        import queue

        self.cmd: str = getattr(args, "on_alarm", None) or ""
        self.timeout = float(getattr(args, "on_alarm_timeout", 30.0) or 30.0)
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.thread: Any = None

    def start(self, payload: str) -> None:
        import threading

        if self.thread is None:
            self.thread = threading.Thread(target=self._work, name="rlvr-on-alarm", daemon=True)
            self.thread.start()
        self.queue.put(payload)

    def _work(self) -> None:
        import subprocess

        while (payload := self.queue.get()) is not None:
            try:
                done = subprocess.run(
                    self.cmd, shell=True, input=payload, text=True, timeout=self.timeout, check=False
                )
            except subprocess.TimeoutExpired:
                print(f"warning: --on-alarm command timed out after {self.timeout:g} s", file=sys.stderr)
                continue
            except OSError as exc:
                print(f"warning: --on-alarm command could not start ({exc})", file=sys.stderr)
                continue
            if done.returncode != 0:
                print(f"warning: --on-alarm command exited with status {done.returncode}", file=sys.stderr)

    def poll(self) -> None:
        """Nothing to do: the worker reports as commands end (kept for the loop's symmetry)."""

    def finish(self) -> None:
        if self.thread is None:
            return
        pending = self.queue.qsize() + 1
        self.queue.put(None)
        self.thread.join(timeout=pending * (self.timeout + 1))
        self.thread = None


def _on_alarm(args: argparse.Namespace, alarm: WatchAlarm, rec: StepRecord, hooks: _HookRunner) -> None:
    """One raised alarm: a line on stderr, and ``--on-alarm CMD`` started with the alarm as JSON on
    stdin (:class:`_HookRunner`: a command that fails or hangs is reported, never stops the watch)."""
    print(alarm.line(), file=sys.stderr, flush=True)
    if not args.on_alarm:
        return
    payload = json.dumps({**alarm.to_dict(), "log": str(args.log), "batch": rec.batch, "lr": rec.lr})
    hooks.start(payload)


def cmd_replay(args: argparse.Namespace) -> int:
    from rlvr_schedule.policy import load_schedule

    run = _load(args, [args.log])[-1]  # a log holding several runs: its last, as watch reads it
    schedule = load_schedule(args.schedule)
    events: list[dict[str, Any]] = []
    prev = None
    for i, rec in enumerate(run.records):
        # advisory: the schedule sees what the run did; nothing it says is applied
        dec = schedule.step(rec)
        nxt = run.records[i + 1] if i + 1 < len(run.records) else None
        if dec.switched:
            events.append(
                {
                    "kind": "schedule",
                    "step": rec.step,
                    "samples": rec.samples,
                    "batch": dec.batch,
                    "lr": dec.lr,
                    "reason": dec.reason,
                    "run_batch": nxt.batch if nxt else rec.batch,
                    "run_lr": nxt.lr if nxt else rec.lr,
                }
            )
        if prev is not None and rec.batch != prev.batch:
            events.append(
                {
                    "kind": "run",
                    "step": rec.step,
                    "samples": rec.samples,
                    "batch": rec.batch,
                    "lr": rec.lr,
                    "reason": "the run changed its batch",
                }
            )
        prev = rec
    final = schedule.current
    out = {
        "run": run.name,
        "schedule": str(args.schedule),
        "records": len(run),
        "run_batches": sorted({r.batch for r in run.records}),
        "events": events,
        "final_stage": {"batch": final.batch, "lr": final.lr},
    }
    if args.json:
        _print_json(_int_counts(_clean(out)))
        return 0
    print(
        f"replay of {run.name} ({len(run)} records, {_fmt_count(run.records[-1].samples)} rollouts) under "
        f"{args.schedule} (advisory: nothing applied)"
    )
    if not events:
        print(
            "the schedule would not have switched; the run kept batch "
            f"{', '.join(map(str, out['run_batches']))}"
        )
        return 0
    _table(
        "decisions",
        ["step", "rollouts", "who", "batch", "lr", "why", "the run trained at"],
        [
            [
                e["step"],
                e["samples"],
                e["kind"],
                e["batch"],
                e["lr"],
                e["reason"],
                f"batch {e['run_batch']}, lr {_fmt(e['run_lr'])}" if e["kind"] == "schedule" else "-",
            ]
            for e in events
        ],
    )
    return 0


# -- parser -------------------------------------------------------------------------------------


def _formats_help() -> str:
    from rlvr_schedule.ingest.load import FORMATS

    lines = ["log formats read (detected by name and content; --format NAME to force; .gz of any):"]
    for f in FORMATS.values():
        lines.append(f"  {f.name:14s} {f.what}")
        lines.append(f"  {'':14s} each record needs: {f.needs}")
    lines.append(
        "every run needs a reward, its rollouts per update (logged, printed config or --batch) "
        "and, for the LR rule, its LR (logged or --base-lr)"
    )
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    """Subcommand errors (a mistyped option) show that subcommand's usage, not the top level's."""

    def parse_args(self, args=None, namespace=None):
        ns, extras = self.parse_known_args(args, namespace)
        if extras:
            sub = getattr(self, "_subparsers_by_name", {}).get(getattr(ns, "command", None), self)
            sub.error("unrecognized arguments: " + " ".join(extras))
        return ns


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return v


def _positive_int(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text!r}")
    return v


def _positive_float(text: str) -> float:
    v = _finite_float(text)
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return v


def _at_most(v: float, text: str, limit: float, why: str) -> None:
    """Refuse a parsed option value above its plausibility bound (:mod:`rlvr_schedule.bounds`)."""
    if v > limit:
        raise argparse.ArgumentTypeError(f"must be {WHY[why]}, got {text!r}")


def _batch_int(text: str) -> int:
    """A batch option: a whole number of rollouts per update within :data:`bounds.MAX_BATCH`."""
    v = _positive_int(text)
    _at_most(v, text, MAX_BATCH, "batch")
    return v


def _lr_float(text: str) -> float:
    from rlvr_schedule.bounds import MAX_LR

    v = _positive_float(text)
    _at_most(v, text, MAX_LR, "lr")
    return v


def _samples_float(text: str) -> float:
    from rlvr_schedule.bounds import MAX_SAMPLES

    v = _positive_float(text)
    _at_most(v, text, MAX_SAMPLES, "samples")
    return v


def _critical_batch_float(text: str) -> float:
    v = _positive_float(text)
    _at_most(v, text, MAX_BATCH, "batch")
    return v


def _price_option(text: str) -> float:
    """``--price``: an update's cost in rollouts. 0 is refused: it makes updates free, so every batch
    above one rollout would cost time for nothing and the priced plan would be the smallest batch."""
    v = _nonnegative_float(text)
    if v == 0:
        raise argparse.ArgumentTypeError(
            "must be > 0: the price is what one update costs in rollouts (seconds per update / seconds "
            "per rollout); 0 would make updates free and every plan the smallest batch (for a nearly "
            "free update give a small number, e.g. 0.1)"
        )
    return v


def _nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    from rlvr_schedule.ingest.load import FORMATS

    p = _Parser(
        prog="rlvr-schedule",
        description=__doc__.split("\n")[0],
        epilog=_formats_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    p._subparsers_by_name = {}  # type: ignore[attr-defined]

    def add(name: str, help: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(
            name,
            help=help,
            description=help,
            epilog=_formats_help(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p._subparsers_by_name[name] = sp  # type: ignore[attr-defined]
        return sp

    def read_opts(sp: argparse.ArgumentParser) -> None:
        g = sp.add_argument_group("reading logs (where a log is silent)")
        g.add_argument(
            "--format", choices=list(FORMATS), default=None, help="the log format (default: detected)"
        )
        g.add_argument(
            "--batch",
            action="append",
            default=None,
            metavar="N|LOG=N",
            help="rollouts per optimizer update (prompts x responses per prompt); LOG=N for one "
            "log (its path or file name); repeatable",
        )
        g.add_argument(
            "--base-lr", type=_positive_float, default=None, help="the run's LR when the log has none"
        )
        g.add_argument(
            "--alias",
            action="append",
            default=None,
            metavar="KEY=FIELD",
            help="read logged KEY as FIELD (e.g. acc=reward_mean); repeatable",
        )
        g.add_argument(
            "--logging-steps",
            type=_positive_int,
            default=None,
            help="optimizer steps between console dicts when no progress bar shows it",
        )

    def logs_cmd(name: str, help: str) -> argparse.ArgumentParser:
        sp = add(name, help)
        sp.add_argument("logs", nargs="+", help="run logs (one run each; a directory: every run in it)")
        sp.add_argument("--target", type=float, default=None, help="target reward (default: from the sweep)")
        read_opts(sp)
        return sp

    price_help = (
        "the price in rollouts per update (seconds per update / seconds per rollout); default: fitted "
        "from the logs' step times at two or more batches, else 16"
    )
    sp = logs_cmd("fit", "critical batch, failure samples and a per-run table")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--price", type=_price_option, default=None, help=price_help)
    sp.set_defaults(func=cmd_fit)

    sp = logs_cmd("plan", "a multi-step schedule from sweep logs")
    sp.add_argument("--json", action="store_true")
    sp.add_argument("--price", type=_price_option, default=None, help=price_help)
    sp.add_argument(
        "--group-size", type=_positive_int, default=None, help="rollouts per prompt; batches are multiples"
    )
    sp.add_argument("--out", default=None, help="also write the plan as JSON (a schedule file) here")
    sp.add_argument(
        "--schedule",
        default=None,
        help="a two_clock schedule file: plan as the live policy built from it would run (its "
        "critical batch and failure clock, else the sweep's)",
    )
    sp.set_defaults(func=cmd_plan)

    sp = logs_cmd("report", "PNG plots and a summary page")
    sp.add_argument("--price", type=_price_option, default=None, help=price_help)
    sp.add_argument("--out", required=True, help="output directory")
    sp.set_defaults(func=cmd_report)

    sp = add(
        "watch",
        "follow a growing log: rollouts, progress rate, reward ceiling, B_simple, failure forecast, alarms",
    )
    sp.add_argument("log", help="the log being written (any format above)")
    sp.add_argument("--interval", type=_positive_float, default=2.0, help="seconds between reads")
    sp.add_argument(
        "--until-idle",
        type=_positive_float,
        default=None,
        help="stop once the log has not grown for this many seconds (default: follow forever)",
    )
    sp.add_argument("--max-records", type=_positive_int, default=None, help="stop after this many records")
    sp.add_argument("--json", action="store_true", help="one JSON object per refresh")
    sp.add_argument(
        "--on-alarm",
        metavar="CMD",
        default=None,
        help="shell command run once per raised alarm (failure, raised warning), the alarm as JSON on stdin",
    )
    sp.add_argument(
        "--on-alarm-timeout", type=_positive_float, default=60.0, help="seconds --on-alarm may run"
    )
    sp.add_argument(
        "--exit-on-failure",
        action="store_true",
        help=f"stop and exit with status {EXIT_FAILURE} once the failure clock fires (scripts, CI)",
    )
    read_opts(sp)
    sp.set_defaults(func=cmd_watch)

    sp = add("replay", "run a schedule in advisory mode over a finished run: what it would have decided")
    sp.add_argument("log", help="the run's log (any format above)")
    sp.add_argument("--schedule", required=True, help="YAML/JSON schedule file (static or two_clock)")
    sp.add_argument("--json", action="store_true")
    read_opts(sp)
    sp.set_defaults(func=cmd_replay)

    sp = add("simulate", "run a schedule in the closed-loop synthetic environment")
    sp.add_argument(
        "--schedule", default=None, help="YAML/JSON schedule file (default: the two-clock policy)"
    )
    sp.add_argument(
        "--fit",
        nargs="+",
        default=None,
        metavar="LOG",
        help="sweep logs (or their directory): the task is their fit (critical batch, failure samples, "
        "the smallest run's batch and LR)",
    )
    sp.add_argument(
        "--critical-batch",
        type=_critical_batch_float,
        default=None,
        help="the environment's critical batch at --lr, --base-batch (rollouts/update; default 256)",
    )
    sp.add_argument(
        "--failure-samples",
        type=_samples_float,
        default=None,
        help="rollouts until collapse (at every batch, under the sqrt rule; default 50,000)",
    )
    sp.add_argument("--lr", type=_lr_float, default=1e-6, help="LR at --base-batch")
    sp.add_argument("--base-batch", type=_batch_int, default=64)
    sp.add_argument(
        "--initial-batch",
        type=_batch_int,
        default=None,
        help="two-clock policy's first batch (default: auto, below the estimated critical batch)",
    )
    sp.add_argument("--noise", type=float, default=1.0, help="metric-noise multiplier (0: exact clocks)")
    sp.add_argument("--drift", type=float, default=0.0, help="critical batch growth with progress")
    sp.add_argument("--seed", type=int, default=0)
    sp.add_argument(
        "--max-samples",
        type=_samples_float,
        default=80_000,
        help="rollouts each simulated run consumes (at most 1,000,000 updates at the smallest batch)",
    )
    sp.add_argument(
        "--constant",
        type=_batch_int,
        nargs="*",
        default=[16, 64, 256, 1024],
        help="constant batches to compare against",
    )
    sp.add_argument("--target", type=float, default=None)
    sp.add_argument("--json", action="store_true")
    sp.set_defaults(func=cmd_simulate)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. Bad input exits 2 with one line per class of fault (the catalogue:
    docs/cli_and_formats.md, "Errors"); a warning said again word for word is counted, not repeated."""
    args = build_parser().parse_args(argv)
    said: dict[str, int] = {}

    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        said[text] = said.get(text, 0) + 1
        if said[text] == 1:
            print(f"warning: {text}", file=sys.stderr)

    def fail(message: str) -> int:
        print(f"rlvr-schedule {args.command}: error: {message}", file=sys.stderr)
        return 2

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = show  # one line on stderr, also under a test's warning capture
            try:
                return int(args.func(args) or 0)
            finally:
                repeated = sum(n - 1 for n in said.values())
                if repeated:
                    print(f"warning: {repeated} repeat(s) of the warnings above not shown", file=sys.stderr)
    except (
        RlvrScheduleError
    ) as exc:  # bad logs, schedules, options (IngestError, ConfigError, a missing extra)
        return fail(str(exc))
    except OSError as exc:  # a file the system would not open or write (permissions, a full disk)
        where = f"{exc.filename}: " if exc.filename else ""
        return fail(f"{where}{exc.strerror or exc}")
    except ValueError as exc:  # a number no reader checked (a library's own check)
        return fail(f"invalid value: {exc}")
    except KeyboardInterrupt:  # pragma: no cover - watch stopped by hand
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
