"""Convert the raw excerpts in ``raw/`` into canonical JSONL runs (one StepRecord dict a line).

Standalone on purpose (standard library only; the project's own readers of these formats live in
``rlvr_schedule.ingest`` and are not used here, so the calibration data does not depend on them).
Run from anywhere: ``python tests/data/real/runs/convert.py``; it rewrites ``<name>.jsonl`` for every
run listed in ``RUNS`` and prints each run's label figures (best reward, collapse step).

Formats:

* ``verl``: verl's console logger, one line per step: ``step:N - key:value - key:value ...``.
  Lines without ``critic/score/mean`` (validation-only lines) are skipped.

Canonical names: ``reward_mean`` <- ``critic/score/mean`` (verifier score before KL shaping),
``entropy`` <- ``actor/entropy`` or ``actor/entropy_loss`` (older verl logs the mean entropy under
that name), ``kl`` <- ``actor/kl_loss`` or ``critic/kl`` (reference KL), ``grad_norm`` <-
``actor/grad_norm``, ``clip_frac`` <- ``actor/pg_clipfrac``, ``response_length`` <-
``response_length/mean``; ``lr`` <- ``actor/lr`` or ``actor/lr(1e-4)`` x 1e-4. Kept under their
own names (``extra``): ``response_length_max``, ``response_clip_ratio``, ``ppo_kl``,
``response_length_cap``. ``batch`` is rollouts per step (``data.train_batch_size`` x
``rollout.n``, from the run's config, in ``RUNS``); ``samples`` is cumulative rollouts.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: name -> (format, rollouts per step, response-length cap)
RUNS: dict[str, tuple[str, int, int]] = {
    "verl_gsm8k_qwen05b_ppo_resp512": ("verl", 256 * 1, 512),
    "verl_gsm8k_qwen05b_ppo_resp256": ("verl", 256 * 1, 256),
    "verl_gsm8k_gemma2b_ppo": ("verl", 512 * 1, 512),
}

_VERL_MAP = {
    "critic/score/mean": "reward_mean",
    "actor/entropy": "entropy",
    "actor/entropy_loss": "entropy",
    "actor/kl_loss": "kl",
    "critic/kl": "kl",
    "actor/grad_norm": "grad_norm",
    "actor/pg_clipfrac": "clip_frac",
    "response_length/mean": "response_length",
    "response_length/max": "response_length_max",
    "response_length/clip_ratio": "response_clip_ratio",
    "actor/ppo_kl": "ppo_kl",
}
_STEP = re.compile(r"\bstep:(\d+) - (.*)$")


def parse_verl(lines: list[str], batch: int, cap: int) -> list[dict]:
    out: list[dict] = []
    for line in lines:
        m = _STEP.search(line)
        if not m:
            continue
        kv: dict[str, float] = {}
        for part in m.group(2).split(" - "):
            k, sep, v = part.rpartition(":")
            if not sep:
                continue
            try:
                kv[k.strip()] = float(v)
            except ValueError:
                continue
        if "critic/score/mean" not in kv:
            continue
        rec: dict = {"step": int(m.group(1)), "batch": batch}
        for src, dst in _VERL_MAP.items():
            if src in kv and dst not in rec and math.isfinite(kv[src]):
                rec[dst] = kv[src]
        if "actor/lr" in kv:
            rec["lr"] = kv["actor/lr"]
        elif "actor/lr(1e-4)" in kv:
            rec["lr"] = kv["actor/lr(1e-4)"] * 1e-4
        else:
            rec["lr"] = math.nan
        rec["response_length_cap"] = cap
        out.append(rec)
    for i, rec in enumerate(out):
        rec["samples"] = (i + 1) * batch
    return out


def label(records: list[dict]) -> dict:
    """Best reward and the collapse step: the first step from which every later reward stays below
    half the best (None if the run ends above half its best)."""
    r = [rec["reward_mean"] for rec in records]
    best = max(r)
    collapse = None
    for i in range(len(r)):
        if all(x < best / 2 for x in r[i:]):
            collapse = records[i]["step"]
            break
    return {"best_reward": best, "best_step": records[r.index(best)]["step"], "collapse_step": collapse,
            "records": len(records), "final_reward": r[-1]}


def main() -> int:
    for name, (fmt, batch, cap) in RUNS.items():
        with gzip.open(HERE / "raw" / f"{name}.log.gz", "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
        if fmt != "verl":
            raise SystemExit(f"{name}: unknown format {fmt!r}")
        recs = parse_verl(lines, batch, cap)
        with open(HERE / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for rec in recs:
                f.write(json.dumps({k: v for k, v in rec.items()
                                    if not (isinstance(v, float) and math.isnan(v))}) + "\n")
        print(name, json.dumps(label(recs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
