"""Several training runs in one console file: one rule for every console format.

``python train.py 2>&1 | tee -a train.log`` run twice, a notebook's output saved whole, a job
restarted by hand: one file, several runs. A new run starts where

- a new banner (the Trainer's ``Running training`` header, Unsloth's banner, verl's printed config)
  comes with a changed config (batch, LR, model ... : another experiment);
- the step goes back, unless a banner came that resumes the run (a resumed run logs again the
  steps after its checkpoint; the later records replace the earlier ones);
- a new banner comes that is not a resume (a resumed run says so, or its steps go on from a step
  the run logged).

:func:`run_break` applies the rule to one record against the one before it; :func:`describe_runs`
names each run's lines for the warning, so a user can check the split with an editor.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["RunSpan", "run_break", "describe_runs"]


@dataclass
class RunSpan:
    """Where one run of a file lies: its first and last record lines and why it begins there."""

    first_line: int
    last_line: int
    why: str | None = None  # None for the file's first run


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def run_break(
    *,
    progress: float | None,
    prev_progress: float | None,
    banner_line: int | None = None,
    resumes: bool = False,
    changed: str | None = None,
) -> str | None:
    """Why the record at ``progress`` (its step, else epoch) starts a new run, or None.

    ``banner_line``: a banner printed since the previous record; ``resumes``: that banner's run
    continues the previous one (said so, or its steps go on); ``changed``: what of the config the
    banner changed (e.g. ``"batch 32 -> 4"``).
    """
    if banner_line is not None and changed:
        return f"a changed config at line {banner_line} ({changed})"
    if banner_line is not None and resumes:
        return None  # a resumed run may log again the steps after its checkpoint
    if progress is not None and prev_progress is not None and progress < prev_progress:
        return f"the step goes back ({_fmt(progress)} after {_fmt(prev_progress)})"
    if banner_line is not None:
        return f"a new start at line {banner_line}, not a resume"
    return None


def describe_runs(source: str, spans: Sequence[RunSpan], kind: str = "training runs") -> str:
    """``<file>: holds 2 training runs: lines 163-412; lines 517-627 (a new start at line 486...)``."""
    parts = [f"lines {s.first_line}-{s.last_line}" + (f" ({s.why})" if s.why else "") for s in spans]
    return f"{source}: holds {len(spans)} {kind}: " + "; ".join(parts)
