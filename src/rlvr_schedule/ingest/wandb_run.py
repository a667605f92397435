"""W&B run directories (``wandb/run-*/``, ``wandb/offline-run-*/``) and their ``.wandb`` files.

Most verl and TRL users log to W&B (``trainer.logger=[console,wandb]``, ``report_to="wandb"``), so a
run leaves ``wandb/[offline-]run-<date>-<id>/run-<id>.wandb`` even offline. Its history rows are
the metrics dicts the trainer logged, at full precision; the optimizer step is the trainer's own
(``train/global_step``, ``training/global_step``), not W&B's ``_step`` (a count of log calls).

Rollouts per update, in this order: ``--batch``; a batch or sample count in the rows; the
Trainer's ``Total train batch size`` header in the run's console output (captured by W&B: the
same value a console log gives); the run's config (verl: ``data.train_batch_size x
actor_rollout_ref.rollout.n``; TRL: ``per_device_train_batch_size x gradient_accumulation_steps x
processes``, the processes from ``generation_batch_size``).

A run that logged no history (only printed) is read from its console output: ``files/output.log``,
else the output the run file holds, with the console readers. Records come through
:mod:`.wandb_records`, the one module that touches wandb's internal reader.
"""

from __future__ import annotations

import os
import re
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import IngestError, IngestWarning
from rlvr_schedule.ingest.options import ReadOptions, apply_options, describe_sources, warn_batch_conflict
from rlvr_schedule.ingest.stream import RecordStream
from rlvr_schedule.ingest.wandb_records import WandbRecords, scan
from rlvr_schedule.records import Run

__all__ = ["read_wandb_run", "wandb_run_file", "is_wandb_run"]

_HEADER_BATCH = re.compile(r"Total train batch size[^=]*=\s*([\d,]+)")
_UNSLOTH_BATCH = re.compile(r"Total batch size \(([^)]*)\)\s*=\s*([\d,]+)")
#: keys W&B adds to every row; a row with nothing else logged nothing
_BOOKKEEPING = ("_step", "_runtime", "_timestamp", "_wandb")
#: the Trainer's end-of-training summary row: not an update
_SUMMARY = ("train/train_runtime", "train_runtime", "train/total_flos", "total_flos")


def wandb_run_file(path: str | os.PathLike[str]) -> Path | None:
    """The ``.wandb`` file of a run directory (or the file itself), else None."""
    p = Path(path)
    if p.is_file():
        return p if p.suffix == ".wandb" else None
    if not p.is_dir():
        return None
    found = sorted(p.glob("run-*.wandb")) or sorted(p.glob("*.wandb"))
    return found[0] if len(found) == 1 else None


def is_wandb_run(path: str | os.PathLike[str]) -> bool:
    return wandb_run_file(path) is not None


def _name(path: Path, records: WandbRecords) -> str:
    run_dir = path.parent if path.is_file() else path
    if records.run_id:
        return f"run-{records.run_id}"
    return run_dir.name


def _dotted(cfg: Mapping[str, Any], dotted: str) -> Any:
    """``cfg["data"]["train_batch_size"]`` for ``"data.train_batch_size"`` (or the flat key)."""
    if dotted in cfg:
        return cfg[dotted]
    cur: Any = cfg
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _int(x: Any) -> int | None:
    if isinstance(x, Mapping):
        x = x.get("value")  # W&B may keep config values as {"value": ...}
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return int(f) if f == int(f) and f >= 1 else None


def _config_batch(cfg: Mapping[str, Any]) -> tuple[int | None, str | None]:
    """Rollouts per update from the run's config: a ``batch`` key, verl's, else TRL's / the Trainer's."""
    if _int(cfg.get("batch")) is not None:
        return _int(cfg.get("batch")), f"W&B config: batch {_int(cfg.get('batch'))}"
    tbs, n = _int(_dotted(cfg, "data.train_batch_size")), _int(_dotted(cfg, "actor_rollout_ref.rollout.n"))
    if tbs is not None:
        return tbs * (n or 1), f"W&B config: train_batch_size {tbs} x rollout.n {n or 1}"
    per, acc = _int(cfg.get("per_device_train_batch_size")), _int(cfg.get("gradient_accumulation_steps"))
    gen, spg = _int(cfg.get("generation_batch_size")), _int(cfg.get("steps_per_generation"))
    if per is None or acc is None or gen is None or spg is None or gen % (per * spg):
        return None, None
    procs = gen // (per * spg)
    return per * acc * procs, (
        f"W&B config: per_device_train_batch_size {per} x gradient_accumulation_steps {acc} x "
        f"{procs} process(es) (generation_batch_size {gen} / (per-device x steps_per_generation {spg}))"
    )


def _console_batch(lines: list[str]) -> tuple[int | None, str | None]:
    for line in lines:
        m = _HEADER_BATCH.search(line)
        if m:
            b = int(m.group(1).replace(",", ""))
            return b, f"console header in the W&B run: Total train batch size {b}"
        u = _UNSLOTH_BATCH.search(line)
        if u:
            b = int(u.group(2).replace(",", ""))
            return b, f"console banner in the W&B run: Total batch size ({u.group(1).strip()}) = {b}"
    return None, None


def _is_update(row: Mapping[str, Any], table: Any) -> bool:
    """A row of an optimizer update: it logs a known metric beyond the step (not TRL's profiling
    timers, an evaluation, the end-of-training summary)."""
    if any(k in row for k in _SUMMARY):
        return False
    for key in row:
        if key.startswith(_BOOKKEEPING + ("eval/", "eval_", "val/", "val-core/", "val-aux/")):
            continue
        hit = table.resolve(key)
        if hit is not None and hit[0] not in ("step", "samples", "batch"):
            return True
    return False


#: reads a console log into a Run: ``(path, *, name, aliases, options) -> Run`` (``load.load_run``)
ConsoleReader = Callable[..., Run]


def _from_console(
    path: Path,
    records: WandbRecords,
    name: str,
    aliases: Mapping[str, str] | None,
    opts: ReadOptions,
    load_run: ConsoleReader | None,
) -> Run:
    """A run with no history: its console output (``files/output.log``, else the run file's), read
    by ``load_run`` (the format dispatcher, passed in: this module sits below it)."""
    if load_run is None:
        raise IngestError(
            "W&B run with no history rows; read its console output (files/output.log) with "
            "rlvr_schedule.ingest.load_run",
            source=str(path),
        )
    run_dir = path.parent if path.is_file() else path
    log = run_dir / "files" / "output.log"
    if log.is_file():
        run = load_run(log, name=name, aliases=aliases, options=opts)
        run.meta["wandb_source"] = "files/output.log (the run logged no history)"
        return run
    if not records.output:
        raise IngestError("W&B run with no history rows and no console output", source=str(path))
    with tempfile.TemporaryDirectory(prefix="rlvr-wandb-") as tmp:
        out = Path(tmp) / "output.log"
        out.write_text("\n".join(records.output) + "\n", encoding="utf-8")
        try:
            run = load_run(out, name=name, aliases=aliases, options=opts)
        except IngestError as exc:
            raise IngestError(
                f"W&B run with no history rows; its console output: {exc}".replace(str(out), "output"),
                source=str(path),
            ) from None
    run.source = str(path)
    run.meta["wandb_source"] = "console output in the run file (the run logged no history)"
    return run


def read_wandb_run(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
    console: ConsoleReader | None = None,
) -> Run:
    """Read a W&B run directory or its ``.wandb`` file into a :class:`Run`; see the module docstring.
    ``console`` reads the console output of a run that logged no history (``load.load_run``)."""
    p = Path(path)
    opts = options or ReadOptions()
    file = wandb_run_file(p)
    if file is None:
        raise IngestError("no W&B run file (run-<id>.wandb) here", source=str(p))
    records = scan(file)
    if records.torn:
        at = f" at byte {records.torn_at}" if records.torn_at >= 0 else ""
        warnings.warn(
            f"{file}: truncated: the run file ends inside a record{at} (of {file.stat().st_size} bytes; a run "
            f"still writing, or a cut copy): read the {len(records.history)} history row(s) before it",
            IngestWarning,
            stacklevel=2,
        )
    run_name = name or _name(p, records)
    stream = RecordStream(name=run_name, source=str(p), aliases=aliases)
    rows = [(k, row) for k, row in enumerate(records.history, start=1) if _is_update(row, stream.aliases)]
    if not rows:
        return _from_console(p, records, run_name, aliases, opts, console)
    logged = any(
        k in row for _, row in rows for k in ("batch", "samples", "rlvr/batch", "rlvr/samples", "train/batch")
    )
    batch, batch_source = (None, None) if logged else _console_batch(records.output)
    if batch is None and not logged:
        batch, batch_source = _config_batch(records.config)
    if opts.batch is not None:
        warn_batch_conflict(str(p), batch, opts.batch, "the W&B run's batch")
        batch, batch_source = opts.batch, "option --batch"
    for k, row in rows:
        r = apply_options(
            {key: v for key, v in row.items() if not key.startswith("_wandb")},
            ReadOptions(base_lr=opts.base_lr),
            stream.aliases,
        )
        if batch is not None:
            r.setdefault("batch", batch)
        stream.append(r, line=k)
    try:
        run = stream.to_run()
    except IngestError as exc:
        if batch is None and "batch" in str(exc):
            raise IngestError(
                "the rollouts per update are not in this W&B run (no batch in its rows, no 'Total train "
                "batch size' in its console output, no batch in its config): pass --batch N",
                source=str(p),
                field="batch",
            ) from None
        raise
    run.meta.update(
        {
            "format": "wandb",
            "batch_source": batch_source or run.meta.get("batch_source"),
            "wandb_run_id": records.run_id,
            "wandb_torn": records.torn,
        }
    )
    describe_sources(run, stream.names, None)
    return run
