"""Console logs as trainers print them (``python train.py 2>&1 | tee train.log``).

verl (:func:`read_verl_console`): ``step:N - key:value - ...`` lines among Ray output, colour codes
and worker prefixes; values with 3 decimals (``actor/lr:0.000``), old names with a unit
(``actor/lr(1e-4):0.010`` is 1e-6). The rollouts per update are ``data.train_batch_size x
actor_rollout_ref.rollout.n`` of the config verl prints at start (a pprint of a dict), else of
``key=value`` overrides on the logged command line; the LR, when printed as 0.000, is the config's
``actor_rollout_ref.actor.optim.lr`` through its linear warm-up (``Total steps: T, num_warmup_steps:
W``, printed by the workers). A validation line at a training step is merged into that step.

TRL / transformers / Unsloth (:func:`read_trl_console`): one Python dict per log (``{'loss': ...,
'reward': ...}``, values may be strings, ``nan``, ``inf``), tqdm progress bars redrawn with ``\r``
and, at log level info, the Trainer's ``***** Running training *****`` header (or Unsloth's banner)
whose ``Total train batch size`` (``Total batch size (a x b x c) = N``) is the completions per
optimizer update of a GRPO run with ``num_iterations=1`` (the console cannot tell otherwise). Each
dict's optimizer step is its own ``step`` (ms-swift: ``global_step/max_steps``), else its ``epoch``
times the header's ``Num update steps per epoch`` when the printed digits leave one whole step for
every dict, else its rank times the logging interval, inferred from the dict count against the
run's total steps (a finished run) or the last step its progress bar reached. The bar shown when a
dict was printed is not used: with stdout buffered several dicts follow one bar.

Both formats: values are read by :mod:`.values` (numpy and torch reprs too); a file holding several
runs is split by :mod:`.runsplit` (``read_*_console_runs`` give each, ``read_*_console`` the last,
warned); a resumed run continues the earlier one.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from rlvr_schedule.errors import IngestError, IngestWarning
from rlvr_schedule.ingest.options import ReadOptions, apply_options, describe_sources, warn_batch_conflict
from rlvr_schedule.ingest.runsplit import RunSpan, describe_runs, run_break
from rlvr_schedule.ingest.stream import RecordStream
from rlvr_schedule.ingest.textio import _ANSI, open_text, split_ray_prefix
from rlvr_schedule.ingest.values import parse_mapping, parse_value, split_top, to_number
from rlvr_schedule.records import Run

__all__ = [
    "read_verl_console",
    "read_trl_console",
    "parse_verl_step_line",
    "find_verl_config",
    "looks_like_verl_console",
    "looks_like_trl_console",
]

_STEP_LINE = re.compile(r"^\s*step:(\d+) - (.*)$")
_UNIT = re.compile(r"^(.*)\(([-+0-9.eE]+)\)$")
_OVERRIDE = re.compile(
    r"(?<![\w.])(data\.train_batch_size|actor_rollout_ref\.rollout\.n|"
    r"actor_rollout_ref\.actor\.optim\.lr|actor_rollout_ref\.model\.path|"
    r"algorithm\.adv_estimator|data\.max_response_length)=([^\s'\"\\]+)"
)
_TOTAL_STEPS = re.compile(r"Total steps: (\d+), num_warmup_steps: (\d+)")
_SHELL_VAR = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(\S+)\s*$")


def _expand(value: str, env: Mapping[str, str]) -> str:
    """``$MODEL_PATH`` / ``${MODEL_PATH}`` in an override, from ``MODEL_PATH=...`` lines of the log."""
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), m.group(0)), value)


_VAL_PREFIXES = ("val-core/", "val-aux/", "val/", "test_score/")


def _lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str, str]]:
    """``(line number, Ray prefix, text)`` with colour codes removed. Lines end at ``\n`` only, so
    the numbers are those of ``grep -n`` and editors; tqdm's ``\r`` redraws stay in the line."""
    with open_text(path, newline="\n") as fh:
        for lineno, raw in enumerate(fh, start=1):
            text = _ANSI.sub("", raw.rstrip("\r\n"))
            prefix, rest = split_ray_prefix(text)
            yield lineno, prefix, rest


def parse_verl_step_line(text: str) -> tuple[int, dict[str, Any]] | None:
    """``(step, metrics)`` of one ``step:N - key:value - ...`` line (units such as ``(1e-4)`` applied)."""
    m = _STEP_LINE.match(text)
    if not m:
        return None
    out: dict[str, Any] = {}
    for pair in split_top(m.group(2), " - "):
        parts = split_top(pair, ":")
        key, value = ":".join(parts[:-1]).strip(), parts[-1]
        if len(parts) < 2 or not key:
            continue
        val = parse_value(value)
        unit = _UNIT.match(key)
        if unit and isinstance(val, float):
            try:
                val *= float(unit.group(2))
                key = unit.group(1)
            except ValueError:
                pass
        out[key] = val
    return int(m.group(1)), out


def _get(cfg: Mapping[str, Any], dotted: str) -> Any:
    cur: Any = cfg
    for part in dotted.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _config_at(lines: list[tuple[int, str, str]], i: int) -> dict[str, Any] | None:
    """The config dict whose print starts at ``lines[i]``, else None (garbled, cut short)."""
    _, prefix, text = lines[i]
    buf = [text]
    for _, p2, t2 in lines[i + 1 : i + 4000]:
        if p2 != prefix:
            continue  # another process's line interleaved by Ray
        buf.append(t2)
        if t2.rstrip().endswith("}"):
            cfg = parse_mapping("\n".join(buf))
            if cfg is not None:
                return cfg
    return None


def _is_banner(text: str) -> bool:
    return text.lstrip().startswith("{'actor_rollout_ref'")


def find_verl_config(lines: list[tuple[int, str, str]]) -> tuple[dict[str, Any] | None, int | None]:
    """The config dict verl pprints at start (``{'actor_rollout_ref': ...}``) and its first line."""
    for i, (lineno, _prefix, text) in enumerate(lines):
        if _is_banner(text):
            cfg = _config_at(lines, i)
            if cfg is not None:
                return cfg, lineno
    return None, None


def looks_like_verl_console(head: str) -> bool:
    return (
        bool(
            re.search(
                r"(?m)^(?:\x1b\[[0-9;]*m|\[[0-9;]*m)*(?:\([^)]*pid=\d+[^)]*\)\s?)?(?:\x1b\[[0-9;]*m)*"
                r"\s*step:\d+ - \S+:",
                head,
            )
        )
        or "verl.trainer.main_ppo" in head
        or "{'actor_rollout_ref'" in head
    )


def looks_like_trl_console(head: str) -> bool:
    return "***** Running training *****" in head or bool(
        re.search(r"(?m)^\s*\{(['\"])(?:loss|reward|learning_rate|grad_norm)\1\s*:", head)
    )


class _VerlPart:
    """One run's part of a verl console log: its step rows and what was printed before them."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, dict[str, Any]]] = []  # (line, step, metrics), same steps merged
        self.cfg: dict[str, Any] | None = None
        self.cfg_line: int | None = None
        self.overrides: dict[str, str] = {}
        self.total_steps: int | None = None
        self.warmup_steps: int | None = None
        self.why: str | None = None

    def take(self, pending: _VerlPart) -> None:
        """What was printed since the last row belongs to this part (where it has none)."""
        if self.cfg is None and pending.cfg is not None:
            self.cfg, self.cfg_line = pending.cfg, pending.cfg_line
        for k, v in pending.overrides.items():
            self.overrides.setdefault(k, v)
        if self.total_steps is None:
            self.total_steps, self.warmup_steps = pending.total_steps, pending.warmup_steps


#: config values whose change makes a new run (an experiment's knobs, not its bookkeeping)
_RUN_KEYS = (
    "data.train_batch_size",
    "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.actor.optim.lr",
    "actor_rollout_ref.model.path",
    "algorithm.adv_estimator",
    "data.max_response_length",
)


def _knob(part: _VerlPart, key: str) -> str | None:
    v = _get(part.cfg, key) if part.cfg else None
    return str(v) if v is not None else part.overrides.get(key)


def _changed(part: _VerlPart, new: _VerlPart) -> str | None:
    """What of the run's knobs ``new`` (a config print, a command line) sets otherwise, or None."""
    diffs = []
    for key in _RUN_KEYS:
        a, b = _knob(part, key), _knob(new, key)
        if a is None or b is None:
            continue
        fa, fb = _float(a), _float(b)
        if (fa != fb) if fa is not None and fb is not None else (a != b):
            diffs.append(f"{key.rsplit('.', 1)[-1]} {a} -> {b}")
    return ", ".join(diffs) or None


def _verl_parts(lines: list[tuple[int, str, str]]) -> list[_VerlPart]:
    """Split the log into runs (:mod:`.runsplit`): a step that goes back, a new config print (or
    command line) that changes the config or does not go on from the last step."""
    parts: list[_VerlPart] = []
    pending = _VerlPart()  # printed since the last step row
    banner: int | None = None
    shell: dict[str, str] = {}
    first_cfg: tuple[dict[str, Any], int] | None = None
    for i, (lineno, _prefix, text) in enumerate(lines):
        parsed = parse_verl_step_line(text)
        if parsed is None:
            if _is_banner(text):
                banner = lineno
                cfg = _config_at(lines, i)
                pending.cfg, pending.cfg_line = cfg, (lineno if cfg is not None else None)
                if cfg is not None and first_cfg is None:
                    first_cfg = (cfg, lineno)
            for key, value in _OVERRIDE.findall(text):
                pending.overrides[key] = _expand(value, shell)
            sv = _SHELL_VAR.match(text)
            if sv:
                shell[sv.group(1)] = sv.group(2).strip("'\"")
            t = _TOTAL_STEPS.search(text)
            if t:
                pending.total_steps, pending.warmup_steps = int(t.group(1)), int(t.group(2))
            continue
        step, metrics = parsed
        part = parts[-1] if parts else None
        why = None
        if part is not None:
            last = part.rows[-1][1]
            why = run_break(
                progress=step,
                prev_progress=last,
                banner_line=banner,
                # a restart that goes on, or logs again from a step after its checkpoint
                resumes=step > last or (step > 1 and any(r[1] == step for r in part.rows)),
                changed=_changed(part, pending),
            )
            if why is None and banner is None and _changed(part, pending):
                why = f"a changed command line before line {lineno} ({_changed(part, pending)})"
        if part is None or why is not None:
            part = _VerlPart()
            part.why = why if why is None else f"{why}, step:{step} at line {lineno}"
            parts.append(part)
        part.take(pending)
        pending, banner = _VerlPart(), None
        if part.rows and part.rows[-1][1] == step:
            part.rows[-1][2].update({k: v for k, v in metrics.items() if k not in part.rows[-1][2]})
        else:
            part.rows.append((lineno, step, metrics))
    if parts:
        parts[-1].take(pending)
        if (
            parts[0].cfg is None
            and first_cfg is not None
            and (len(parts) == 1 or first_cfg[1] < parts[1].rows[0][0])
        ):
            parts[0].cfg, parts[0].cfg_line = first_cfg
        for prev, part in zip(parts, parts[1:], strict=False):
            part.take(prev)  # what a later run did not print again is as before
    return parts


def read_verl_console_runs(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> list[Run]:
    """Every training run of a verl console log, in file order (named ``<name>#1``, ... when there
    are several; a warning names their lines)."""
    source = str(path)
    parts = [p for p in _verl_parts(list(_lines(path))) if _training_rows(p)]
    if not parts:
        raise IngestError("no verl 'step:N - key:value' lines", source=source)
    spans = [RunSpan(p.rows[0][0], p.rows[-1][0], p.why) for p in parts]
    return _runs_in_file(
        source,
        name or _stem(path),
        spans,
        parts,
        lambda part, n: _verl_run(part, n, source, aliases, options),
    )


def _training_rows(part: _VerlPart) -> bool:
    return any(any(not k.startswith(_VAL_PREFIXES) for k in m) for _, _, m in part.rows)


def read_verl_console(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> Run:
    """Read a verl console log (plain or .gz) into a :class:`Run`: its last run when it holds
    several (warned; :func:`read_verl_console_runs` reads each); see the module docstring."""
    source = str(path)
    all_parts = _verl_parts(list(_lines(path)))
    if not all_parts:
        raise IngestError("no verl 'step:N - key:value' lines", source=source)
    parts = [p for p in all_parts if _training_rows(p)] or all_parts[-1:]
    if len(parts) > 1:
        dropped = parts[:-1]
        warnings.warn(
            f"{source}: the file holds {len(parts)} training runs (the last from line "
            f"{parts[-1].rows[0][0]}: {parts[-1].why}): reading the last one; "
            f"{sum(len(p.rows) for p in dropped)} step line(s) of lines {dropped[0].rows[0][0]}-"
            f"{dropped[-1].rows[-1][0]} dropped (load_runs, fit and report read each run)",
            IngestWarning,
            stacklevel=2,
        )
    run = _verl_run(parts[-1], name or _stem(path), source, aliases, options)
    run.meta["runs_dropped"] = len(parts) - 1
    return run


def _verl_run(
    part: _VerlPart,
    name: str,
    source: str,
    aliases: Mapping[str, str] | None,
    options: ReadOptions | None,
) -> Run:
    """One run from its part of the log."""
    opts = options or ReadOptions()
    cfg, cfg_line, overrides, rows = part.cfg, part.cfg_line, part.overrides, part.rows
    total_steps, warmup_steps = part.total_steps, part.warmup_steps
    # --- rollouts per update -------------------------------------------------------------------
    batch, batch_source = _verl_batch(cfg, overrides, source)
    if opts.batch is not None:
        warn_batch_conflict(source, batch, opts.batch, "data.train_batch_size x rollout.n")
        batch, batch_source = opts.batch, "option --batch"
    if batch is None:
        raise IngestError(
            "the rollouts per update are not in this verl log (no printed config, no "
            "data.train_batch_size=... override): pass --batch N (N = data.train_batch_size x "
            "actor_rollout_ref.rollout.n)",
            source=source,
            field="batch",
        )

    # --- LR: printed with 3 decimals, so 0.000 for any RL LR -----------------------------------
    cfg_lr = _float(_get(cfg, "actor_rollout_ref.actor.optim.lr")) if cfg else None
    lr_where = "config in the log"
    if cfg_lr is None and "actor_rollout_ref.actor.optim.lr" in overrides:
        cfg_lr = _float(overrides["actor_rollout_ref.actor.optim.lr"])
        lr_where = "command line in the log"
    lr_base, lr_source = (cfg_lr, f"{lr_where}: actor_rollout_ref.actor.optim.lr") if cfg_lr else (None, None)
    if opts.base_lr is not None:
        lr_base, lr_source = opts.base_lr, "option --base-lr"
    if warmup_steps is None and cfg is not None:
        ws = _get(cfg, "actor_rollout_ref.actor.optim.lr_warmup_steps")
        ratio = _float(_get(cfg, "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio"))
        if isinstance(ws, int) and ws > 0:
            warmup_steps = ws
        elif ratio and total_steps:
            warmup_steps = int(ratio * total_steps)
    lr_keys = ("actor/lr", "actor/lr(1e-4)")
    rounded = 0
    stream = RecordStream(name=name, source=source, aliases=aliases)
    for lineno, step, metrics in rows:
        if not any(not k.startswith(_VAL_PREFIXES) for k in metrics):
            continue  # a validation-only line (before training, or of a step not logged)
        row = dict(metrics)
        printed = next((row[k] for k in lr_keys if isinstance(row.get(k), float)), None)
        if printed is not None and printed == 0.0:  # 0.000: the LR lost to 3 decimals
            rounded += 1
            row.pop("actor/lr", None)
            if lr_base is not None:
                w = warmup_steps or 0
                row["lr"] = lr_base * (min(1.0, step / w) if w > 0 else 1.0)
        elif printed is None and lr_base is not None:
            row["lr"] = lr_base
        row["step"] = step
        row["batch"] = batch
        stream.append(row, line=lineno)
    run = stream.to_run()
    if rounded and lr_base is None:
        warnings.warn(
            f"{source}: actor/lr is printed as 0.000 (3 decimals) and the log has no config LR: "
            "pass --base-lr",
            IngestWarning,
            stacklevel=2,
        )
    run.meta.update(
        {"format": "verl-console", "batch_source": batch_source, "setup": _verl_setup(cfg, overrides)}
    )
    if rounded and lr_base is not None:
        run.meta["lr_source"] = f"{lr_source} (the log prints actor/lr as 0.000)" + (
            f", linear warm-up over {warmup_steps} steps" if warmup_steps else ""
        )
    if cfg_line is not None:
        run.meta["config_line"] = cfg_line
    describe_sources(run, stream.names, None)
    return run


def _stem(path: str | os.PathLike[str]) -> str:
    p = Path(path)
    n = p.name
    for suf in (".gz", ".log", ".txt", ".out"):
        n = n.removesuffix(suf)
    return n or p.name


def _float(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _int(x: Any) -> int | None:
    f = _float(x)
    return int(f) if f is not None and f == int(f) and f >= 1 else None


def _verl_batch(
    cfg: dict[str, Any] | None, overrides: Mapping[str, str], source: str
) -> tuple[int | None, str | None]:
    tbs = _int(_get(cfg, "data.train_batch_size")) if cfg else None
    n = _int(_get(cfg, "actor_rollout_ref.rollout.n")) if cfg else None
    where = "config in the log"
    if tbs is None and "data.train_batch_size" in overrides:
        tbs, where = _int(overrides["data.train_batch_size"]), "command line in the log"
    if n is None and "actor_rollout_ref.rollout.n" in overrides:
        n = _int(overrides["actor_rollout_ref.rollout.n"])
    if tbs is None:
        return None, None
    n_note = ""
    if n is None:
        n, n_note = 1, " (verl's default)"
    return tbs * n, f"{where}: train_batch_size {tbs} x rollout.n {n}{n_note}"


def _verl_setup(cfg: dict[str, Any] | None, overrides: Mapping[str, str]) -> dict[str, Any]:
    """What makes two runs comparable beyond batch and LR (model, algorithm, length cap, group)."""
    keys = {
        "model": "actor_rollout_ref.model.path",
        "algorithm": "algorithm.adv_estimator",
        "max_response_length": "data.max_response_length",
        "rollouts_per_prompt": "actor_rollout_ref.rollout.n",
    }
    out: dict[str, Any] = {}
    for k, dotted in keys.items():
        v = _get(cfg, dotted) if cfg else None
        if v is None:
            v = overrides.get(dotted)
        if v is not None:
            out[k] = v
    return out


# -- TRL / transformers ---------------------------------------------------------------------------

_PROGRESS = re.compile(r"(\d+)/(\d+) \[")
_HEADER_START = re.compile(r"\*\*\*\*\* Running training \*\*\*\*\*|Unsloth - 2x faster free finetuning")
_HEADER_BATCH = re.compile(r"Total train batch size[^=]*=\s*([\d,]+)")
_UNSLOTH_BATCH = re.compile(r"Total batch size \(([^)]*)\)\s*=\s*([\d,]+)")
_HEADER_STEPS = re.compile(r"Total (?:optimization )?steps\s*=\s*([\d,]+)")
_HEADER_SPE = re.compile(r"Num update steps per epoch\s*=\s*([\d,]+)")
_RESUME = re.compile(r"Continuing training from global step (\d+)")
#: a metrics dict as the Trainer prints it, after an optional rank prefix (``[rank0]:``, ``[default0]:``)
_DICT_LINE = re.compile(r"^\s*(?:\[[\w.:-]+\]:?\s*)?(\{\s*(['\"])[^'\"]+\2\s*:.*)$")
_METRIC_DICT = re.compile(
    r"^\{\s*(['\"])(?:loss|reward|rewards/|learning_rate|grad_norm|train_runtime|eval_|epoch)"
)
_REWARD_KEY = re.compile(r"['\"](?:reward|rewards/[^'\"]*)['\"]\s*:")
_METRIC_KEYS = frozenset({"loss", "reward", "learning_rate", "grad_norm", "train_runtime", "epoch", "kl"})
#: a dict broken over more lines than this is an error, not a wrapped line
_MAX_DICT_LINES = 3
_SUMMARY_KEYS = (
    "train_runtime",
    "train_samples_per_second",
    "train_steps_per_second",
    "train_loss",
    "total_flos",
)


def _epoch_range(epoch: Any, steps_per_epoch: int | None) -> tuple[int, int] | None:
    """The whole optimizer steps an ``epoch`` value allows, within the rounding of its printed
    digits (``epoch x steps per epoch``), as ``(lo, hi)``; None when it says nothing."""
    if steps_per_epoch is None or epoch is None or isinstance(epoch, bool):
        return None
    text = epoch if isinstance(epoch, str) else repr(float(epoch))
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or value < 0 or "e" in text.lower():
        return None
    decimals = len(text.split(".")[1]) if "." in text else 0
    half = 0.5 * 10.0 ** (-decimals)
    # the Trainer's epoch is micro-batches / len(dataloader), and steps per epoch is that length over
    # the accumulation rounded up: epoch x steps per epoch runs up to one part in it above the step
    spe = steps_per_epoch
    lo = math.ceil((value - half) * spe * spe / (spe + 1) - 1e-6)
    hi = math.floor((value + half) * spe + 1e-6)
    return (max(lo, 0), hi) if hi >= max(lo, 0) else None


def _epoch_step(epoch: Any, steps_per_epoch: int | None, after: int = -1) -> int | None:
    """The one optimizer step after ``after`` that an ``epoch`` value allows, else None."""
    r = _epoch_range(epoch, steps_per_epoch)
    if r is None:
        return None
    lo, hi = max(r[0], after + 1), r[1]
    return lo if lo == hi else None


def _parse_dict(text: str) -> dict[str, Any] | None:
    """The dict of one console part (values in any form :mod:`.values` reads), else None."""
    return parse_mapping(text)


def _is_metrics(d: Mapping[str, Any] | None) -> bool:
    """A Trainer log dict, whatever key it starts with (not a config or token-id dict)."""
    if not d:
        return False
    keys = {str(k) for k in d}
    return bool(keys & _METRIC_KEYS) or any(k.startswith(("eval_", "rewards/", "train/")) for k in keys)


def _numeric(d: Mapping[str, Any]) -> dict[str, Any]:
    """String-valued numbers (``'0.125'``, ``'nan'``) as floats; other strings kept as they are."""
    return {k: to_number(v) for k, v in d.items()}


class _Segment:
    """One training run's part of a console log: from a ``Running training`` header (or the file's
    start) to the next header that follows metrics dicts."""

    def __init__(self, line: int) -> None:
        self.line = line
        self.batch: int | None = None
        self.batch_text: str | None = None
        self.max_steps: int | None = None
        self.steps_per_epoch: int | None = None
        self.resume_step = 0
        self.last_counter: int | None = None
        self.finished = False
        self.dicts: list[tuple[int, dict[str, Any], int | None]] = []  # (line, dict, bar counter)
        self.evals = 0
        self.end_line = line
        self.progress: float | None = None  # the last dict's own step, else its epoch
        self.split: str | None = None  # why a new run starts here without a header (step back)

    def restart(self, line: int, why: str) -> _Segment:
        """The segment of a run that starts again without a new header: same header values."""
        seg = _Segment(line)
        seg.batch, seg.batch_text = self.batch, self.batch_text
        seg.max_steps, seg.steps_per_epoch = self.max_steps, self.steps_per_epoch
        seg.split = why
        return seg


def _progress(d: Mapping[str, Any]) -> float | None:
    """How far a dict's run is: its own step (ms-swift: ``global_step/max_steps``), else its epoch."""
    for key in ("step", "global_step/max_steps", "epoch"):
        v = d.get(key)
        if isinstance(v, str) and "/" in v:
            v = v.split("/")[0]
        f = _float(v)
        if f is not None:
            return f
    return None


def _trl_segments(path: str | os.PathLike[str], source: str) -> tuple[list[_Segment], list[str]]:
    """Split the log into training runs and collect each run's header values and metric dicts."""
    segments = [_Segment(1)]
    notes: list[str] = []
    lines = list(_lines(path))
    last_text_line = max((ln for ln, _, t in lines if t.strip()), default=0)
    pending: tuple[int, str] | None = None  # a dict broken over lines: (its first line, text so far)
    broken: tuple[int, str] | None = None  # a dict that never closed: fine only before a restart or EOF
    for lineno, _prefix, text in lines:
        if pending is not None:
            start, buf = pending
            joined = buf + text
            d = _parse_dict(joined)
            if d is not None or lineno - start < _MAX_DICT_LINES:
                pending = None if d is not None else (start, joined)
                if d is not None:
                    _add_dict(segments, start, d, source)
                continue
            pending, broken = None, (start, buf)
        for part in text.split("\r"):
            seg = segments[-1]
            if _HEADER_START.search(part):
                if broken is not None:  # killed mid-dict, then started again
                    notes.append(
                        f"{source}:{broken[0]}: a metrics dict cut short before the run restarts at "
                        f"line {lineno}: 1 record dropped"
                    )
                    broken = None
                if seg.dicts:
                    segments.append(_Segment(lineno))
                    seg = segments[-1]
            hb = _HEADER_BATCH.search(part)
            if hb:
                seg.batch = int(hb.group(1).replace(",", ""))
                seg.batch_text = f"Total train batch size {seg.batch}"
            ub = _UNSLOTH_BATCH.search(part)
            if ub:
                seg.batch = int(ub.group(2).replace(",", ""))
                seg.batch_text = f"Total batch size ({ub.group(1).strip()}) = {seg.batch} (Unsloth's banner)"
            hs = _HEADER_STEPS.search(part)
            if hs:
                seg.max_steps = int(hs.group(1).replace(",", ""))
            he = _HEADER_SPE.search(part)
            if he:
                seg.steps_per_epoch = int(he.group(1).replace(",", ""))
            rs = _RESUME.search(part)
            if rs:
                seg.resume_step = int(rs.group(1))
            m = _DICT_LINE.match(part)
            d = _parse_dict(m.group(1)) if m else None
            if m and (
                _METRIC_DICT.match(m.group(1)) or _is_metrics(d) or (d is None and _REWARD_KEY.search(part))
            ):
                if d is None:
                    if lineno == last_text_line:
                        notes.append(
                            f"{source}:{lineno}: the last line is a metrics dict cut short (a killed "
                            "run?): 1 record dropped"
                        )
                    else:  # maybe broken over lines: joined with the next ones, else an error
                        pending = (lineno, m.group(1))
                    continue
                if broken is not None:
                    raise IngestError(
                        f"cannot read this metrics dict ({broken[1][:80]!r}...)",
                        source=source,
                        line=broken[0],
                    )
                _add_dict(segments, lineno, d, source)
                continue
            for done, total in _PROGRESS.findall(part):
                if seg.max_steps is None or int(total) == seg.max_steps:
                    seg.last_counter = int(done)
                    if seg.max_steps is not None and int(done) == seg.max_steps:
                        seg.finished = True
    cut = pending or broken
    if cut is not None:
        notes.append(
            f"{source}:{cut[0]}: the log ends inside a metrics dict (a killed run?): 1 record dropped"
        )
    return segments, notes


def _add_dict(segments: list[_Segment], lineno: int, d: dict[str, Any], source: str) -> None:
    """File one parsed dict: the end-of-training summary and evaluations are noted, not records;
    a dict whose step (or epoch) goes back starts a new run (:mod:`.runsplit`)."""
    seg = segments[-1]
    p = _progress(d)
    why = run_break(progress=p, prev_progress=seg.progress) if seg.dicts else None
    if why is not None and "train_runtime" not in d:
        seg = seg.restart(lineno, f"{why} at line {lineno}")
        segments.append(seg)
    if p is not None and not all(str(k).startswith(("eval_", "eval/")) or k == "epoch" for k in d):
        seg.progress = p
    seg.end_line = lineno
    if "train_runtime" in d or (any(k in d for k in _SUMMARY_KEYS) and "reward" not in d):
        # the end-of-training summary; TRL's GRPOTrainer merges into it the means of its metrics
        # since the last log (a 'reward' too): not an update of its own
        seg.finished = True
    elif all(str(k).startswith(("eval_", "eval/")) or k == "epoch" for k in d):
        seg.evals += 1
    else:
        seg.dicts.append((lineno, _numeric(d), seg.last_counter))


def _dedupe_ranks(dicts: list[tuple[int, dict[str, Any], int | None]]) -> tuple[list[Any], int]:
    """Dicts printed once per rank (every dict repeated W >= 2 times in a row) counted once."""
    if len(dicts) < 2:
        return dicts, 1
    runs: list[int] = []
    i = 0
    while i < len(dicts):
        j = i + 1
        while j < len(dicts) and dicts[j][1] == dicts[i][1]:
            j += 1
        runs.append(j - i)
        i = j
    w = runs[0]
    if w >= 2 and all(r == w for r in runs):
        return dicts[::w], w
    return dicts, 1


def _interval(seg: _Segment, n: int, opts: ReadOptions, source: str) -> tuple[int, str]:
    """Optimizer steps between two dicts: the option, else the dict count against the run's total
    steps (finished run), else against the last step its progress bar reached, else 1 (warned)."""
    if opts.logging_steps is not None:
        return opts.logging_steps, "option --logging-steps"
    end, what = None, ""
    if seg.max_steps is not None and seg.finished:
        end, what = seg.max_steps, f"Total optimization steps {seg.max_steps} (the run finished)"
    elif seg.last_counter is not None:
        end, what = seg.last_counter, f"the last progress-bar step {seg.last_counter}"
    if end is not None and end - seg.resume_step >= n:
        span = end - seg.resume_step
        # n = floor(span / I): I in (span / (n + 1), span / n]
        hi = span // n
        lo = span // (n + 1) + 1
        if lo <= hi:
            if lo < hi:
                warnings.warn(
                    f"{source}: {n} metrics dicts over {span} steps fit a logging interval of "
                    f"{lo}..{hi}: taking {hi} (pass --logging-steps N otherwise)",
                    IngestWarning,
                    stacklevel=3,
                )
            return hi, f"{n} dicts against {what}"
        warnings.warn(
            f"{source}: {n} metrics dicts do not fit {what} at any logging interval (dicts missing "
            "from the log?): taken as one optimizer step apart (pass --logging-steps N otherwise)",
            IngestWarning,
            stacklevel=3,
        )
        return 1, f"assumed 1 ({n} dicts do not fit {what})"
    warnings.warn(
        f"{source}: {n} metrics dict(s) and no total or progress-bar step to count them against: "
        "taken as one optimizer step apart (pass --logging-steps N otherwise)",
        IngestWarning,
        stacklevel=3,
    )
    return 1, "assumed 1 (no total steps or progress bar in the log)"


def _steps(
    seg: _Segment, dicts: list[Any], opts: ReadOptions, source: str
) -> tuple[list[int], str, int | None]:
    """Each dict's optimizer step: its own ``step`` (or ms-swift's ``global_step/max_steps``), else
    its ``epoch`` x the header's steps per epoch when that pins every step down, else its rank
    times the logging interval (inferred). Returns (steps, rule, interval)."""
    own: list[int | None] = []
    for _, d, _ in dicts:
        step = _int(d.get("step")) if "step" in d else None
        gs = d.get("global_step/max_steps")
        if step is None and isinstance(gs, str) and "/" in gs:
            step = _int(gs.split("/")[0])
        own.append(step)
    if all(s is not None for s in own):
        return [int(s) for s in own if s is not None], "the dicts' own step", None
    if seg.steps_per_epoch is not None:
        ep: list[int | None] = []
        prev = seg.resume_step
        for _, d, _ in dicts:  # each the one step its epoch allows after the previous dict's
            step = _epoch_step(d.get("epoch"), seg.steps_per_epoch, after=prev)
            ep.append(step)
            if step is None:
                break
            prev = step
        if all(s is not None for s in ep) and len(ep) == len(dicts):
            return (
                [int(s) for s in ep if s is not None],
                (f"epoch x Num update steps per epoch {seg.steps_per_epoch}"),
                None,
            )
    interval, why = _interval(seg, len(dicts), opts, source)
    return (
        [seg.resume_step + (k + 1) * interval for k in range(len(dicts))],
        f"logging interval {interval} ({why})",
        interval,
    )


def _trl_groups(
    path: str | os.PathLike[str], source: str
) -> tuple[list[list[_Segment]], list[RunSpan], list[str]]:
    """The file's runs, each a list of segments (a resumed run continues the one before it)."""
    segments, notes = _trl_segments(path, source)
    groups: list[list[_Segment]] = []
    spans: list[RunSpan] = []
    for seg in (s for s in segments if s.dicts):
        why = seg.split
        if why is None and groups:
            prev = groups[-1][-1]
            changed = (
                f"batch {prev.batch} -> {seg.batch}"
                if prev.batch is not None and seg.batch is not None and prev.batch != seg.batch
                else None
            )
            why = run_break(
                progress=None,
                prev_progress=None,
                banner_line=seg.line,
                resumes=seg.resume_step > 0,
                changed=changed,
            )
        if not groups or why is not None:
            groups.append([seg])
            spans.append(RunSpan(seg.dicts[0][0], seg.dicts[-1][0], why))
        else:
            groups[-1].append(seg)
            spans[-1].last_line = seg.dicts[-1][0]
    return groups, spans, notes


def read_trl_console_runs(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> list[Run]:
    """Every training run of a TRL / transformers / Unsloth console log, in file order (named
    ``<name>#1``, ``<name>#2``, ... when there are several; a warning names their lines)."""
    source = str(path)
    opts = options or ReadOptions()
    groups, spans, notes = _trl_groups(path, source)
    for note in notes:
        warnings.warn(note, IngestWarning, stacklevel=2)
    if not groups:
        raise IngestError("no metrics dict lines ({'loss': ..., 'reward': ...})", source=source)
    runs = _runs_in_file(
        source,
        name or _stem(path),
        spans,
        groups,
        lambda group, n: _trl_run(group, n, source, opts, aliases),
    )
    runs[-1].meta["dropped"] += len(notes)
    return runs


def read_trl_console(
    path: str | os.PathLike[str],
    *,
    name: str | None = None,
    aliases: Mapping[str, str] | None = None,
    options: ReadOptions | None = None,
) -> Run:
    """Read a TRL / transformers / Unsloth console log (plain or .gz) into a :class:`Run`: its last
    run when it holds several (warned; :func:`read_trl_console_runs` reads each)."""
    source = str(path)
    opts = options or ReadOptions()
    groups, spans, notes = _trl_groups(path, source)
    for note in notes:
        warnings.warn(note, IngestWarning, stacklevel=2)
    if not groups:
        raise IngestError("no metrics dict lines ({'loss': ..., 'reward': ...})", source=source)
    keep, dropped = groups[-1], [s for g in groups[:-1] for s in g]
    if dropped:
        n_drop = sum(len(s.dicts) for s in dropped)
        warnings.warn(
            f"{source}: the file holds {len(groups)} training runs (the last from line "
            f"{spans[-1].first_line}: {spans[-1].why}): reading the last one; {n_drop} metrics dict(s) "
            f"of lines {dropped[0].dicts[0][0]}-{dropped[-1].dicts[-1][0]} dropped (load_runs, fit and "
            "report read each run)",
            IngestWarning,
            stacklevel=2,
        )
    run = _trl_run(keep, name or _stem(path), source, opts, aliases)
    run.meta["runs_dropped"] = len(groups) - 1
    run.meta["dropped"] += len(notes) + sum(len(s.dicts) for s in dropped)
    return run


def _trl_run(
    keep: list[_Segment], name: str, source: str, opts: ReadOptions, aliases: Mapping[str, str] | None
) -> Run:
    """One run from its segments (a run and its resumptions)."""
    stream = RecordStream(name=name, source=source, aliases=aliases)
    meta: dict[str, Any] = {"format": "trl-console", "runs_dropped": 0}
    batch_source = None
    ranks = 1
    for seg in keep:
        dicts, w = _dedupe_ranks(seg.dicts)
        ranks = max(ranks, w)
        steps, rule, interval = _steps(seg, dicts, opts, source)
        batch = seg.batch
        if batch is not None:
            batch_source = (
                f"header: {seg.batch_text} (= completions per update if num_iterations is 1 "
                "and TRL >= 0.15; the console cannot tell)"
            )
        if opts.batch is not None:
            warn_batch_conflict(source, seg.batch, opts.batch, "Total train batch size")
            batch, batch_source = opts.batch, "option --batch"
        if batch is None:
            raise IngestError(
                "the completions per optimizer update are not in this log (no '***** Running "
                "training *****' header with 'Total train batch size', no Unsloth 'Total batch size "
                "(a x b x c) = N' banner; run with log_level='info'): pass --batch N",
                source=source,
                field="batch",
            )
        meta["step_rule"] = rule
        if interval is not None:
            meta["logging_interval"] = interval
        for (lineno, d, _), step in zip(dicts, steps, strict=True):
            row = apply_options(
                {key: v for key, v in d.items() if key not in ("global_step/max_steps", "step")},
                ReadOptions(base_lr=opts.base_lr),
                stream.aliases,
            )
            row["step"] = step
            row["batch"] = batch
            stream.append(row, line=lineno)
    run = stream.to_run()
    if ranks > 1:
        meta["ranks"] = ranks
        warnings.warn(
            f"{source}: every metrics dict printed {ranks} times in a row (once per rank): counted once",
            IngestWarning,
            stacklevel=2,
        )
    meta["batch_source"] = batch_source
    meta["dropped"] = stream.dropped
    run.meta.update(meta)
    describe_sources(run, stream.names, opts)
    return run


def _runs_in_file(
    source: str, base: str, spans: list[RunSpan], parts: list[Any], make: Callable[[Any, str], Run]
) -> list[Run]:
    """The runs of one console file, ``make(part, name)`` for each part: named ``base`` (one run) or
    ``base#k``, each with its lines in ``meta``; several runs are said in one warning naming them."""
    if len(parts) > 1:
        warnings.warn(
            f"{describe_runs(source, spans)}: read as {len(parts)} runs", IngestWarning, stacklevel=3
        )
    runs = []
    for k, (part, span) in enumerate(zip(parts, spans, strict=True), start=1):
        run = make(part, base if len(parts) == 1 else f"{base}#{k}")
        run.meta.update(
            {"runs_in_file": len(parts), "run_in_file": k, "lines": [span.first_line, span.last_line]}
        )
        runs.append(run)
    return runs
