"""Convert the raw excerpts in ``raw/`` into canonical JSONL runs (one StepRecord dict a line).

Standalone on purpose (standard library only; the project's own readers of these formats live in
``rlvr_schedule.ingest`` and are not used here, so the calibration data does not depend on them).
Run from anywhere: ``python tests/data/real/runs/convert.py``; it rewrites ``<name>.jsonl`` for every
run listed in ``RUNS`` and prints each run's label figures (best reward, collapse step).

Formats:

* ``verl``: verl's console logger, one line per step: ``step:N - key:value - key:value ...``.
  Lines without ``critic/score/mean`` (validation-only lines) are skipped.
* ``jsonl``: one JSON object a line with ``step``, ``mean_reward``, ``kl``, ``degenerate_frac``
  (the metrics file of source 3), ``degenerate_frac`` -> ``frac_zero_std``; lines starting with
  ``#`` are the origin note.
* ``trl``: the HF Trainer's console dicts of TRL's GRPOTrainer, one per logging interval:
  ``{'loss': ..., 'reward': ..., ...}`` (values may be strings rounded to 4 significant digits, as
  some patched loggers print them). ``step`` is the record's number (1, 2, ...: the logging
  interval; these logs do not print the optimizer step), ``batch`` the rollouts one record covers.

Canonical names: ``reward_mean`` <- ``critic/score/mean`` (verifier score before KL shaping),
``entropy`` <- ``actor/entropy`` or ``actor/entropy_loss`` (older verl logs the mean entropy under
that name), ``kl`` <- ``actor/kl_loss`` or ``critic/kl`` (reference KL), ``grad_norm`` <-
``actor/grad_norm``, ``clip_frac`` <- ``actor/pg_clipfrac``, ``response_length`` <-
``response_length/mean``; ``lr`` <- ``actor/lr`` or ``actor/lr(1e-4)`` x 1e-4. Kept under their
own names (``extra``): ``response_length_max``, ``response_clip_ratio``, ``ppo_kl``,
``response_length_cap``. ``batch`` is rollouts per step (``data.train_batch_size`` x
``rollout.n``, from the run's config, in ``RUNS``); ``samples`` is cumulative rollouts.
TRL names: ``reward`` -> ``reward_mean``, ``reward_std``, ``entropy``, ``kl``, ``grad_norm``,
``learning_rate`` -> ``lr``, ``completions/mean_length`` (or ``completion_length``) ->
``response_length``, ``clip_ratio/region_mean`` -> ``clip_frac``, ``frac_reward_zero_std`` ->
``frac_zero_std``; ``completions/clipped_ratio`` -> ``response_clip_ratio``.
"""

from __future__ import annotations

import ast
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
# Sunshine535/nips-grpo-dynamics (TRL GRPO on GSM8K). Rollouts a record covers, inferred from the
# log itself (see ORIGIN.md): epoch advance per record x 7473 GSM8K prompts x group size, which
# matches the granularity of the logged mean binary reward (1/40 for exp1a/exp2, 1/8 otherwise).
_SUN_BATCH = {"exp1a": 40, "exp2": 40, "gates": 8, "w1t": 8, "w7": 8, "w8": 8}
_SUN_CAP = {"exp1a": 512, "exp2": 512, "gates": 256, "w1t": 256, "w7": 256, "w8": 256}
_SUN = [
    "trl_gates_gate1_adq_seed42",
    "trl_gates_gate1_adq_seed43",
    "trl_gates_gate1_adq_seed44",
    "trl_gates_gate1_adq_seed45",
    "trl_gates_gate2_rho0p70_seed42",
    "trl_gates_gate2_rho0p70_seed43",
    "trl_gates_gate2_rho0p70_seed44",
    "trl_gates_gate2_rho0p70_seed45",
    "trl_gates_gate2_rho1p00_seed42",
    "trl_gates_gate2_rho1p00_seed43",
    "trl_gates_gate2_rho1p00_seed44",
    "trl_gates_gate2_rho3p00_seed42",
    "trl_gates_gate2_rho3p00_seed43",
    "trl_gates_gate2_rho3p00_seed44",
    "trl_w1t_gate1_adq_seed42",
    "trl_w1t_gate2_rho0p70_seed42",
    "trl_w1t_gate2_rho0p70_seed43",
    "trl_w1t_gate2_rho0p70_seed44",
    "trl_w1t_gate2_rho1p00_seed43",
    "trl_w1t_gate2_rho1p00_seed44",
    "trl_w1t_gate2_rho3p00_seed42",
    "trl_w1t_gate2_rho3p00_seed43",
    "trl_exp1a_rho0p10_seed42",
    "trl_exp1a_rho0p10_seed43",
    "trl_exp1a_rho0p10_seed44",
    "trl_exp1a_rho0p30_seed42",
    "trl_exp1a_rho0p30_seed43",
    "trl_exp1a_rho0p30_seed44",
    "trl_exp1a_rho0p50_seed42",
    "trl_exp1a_rho0p50_seed43",
    "trl_exp1a_rho0p50_seed44",
    "trl_exp1a_rho0p70_seed42",
    "trl_exp1a_rho0p70_seed43",
    "trl_exp1a_rho0p70_seed44",
    "trl_exp1a_rho1p00_seed42",
    "trl_exp1a_rho1p00_seed43",
    "trl_exp1a_rho1p00_seed44",
    "trl_exp1a_rho1p50_seed42",
    "trl_exp1a_rho1p50_seed43",
    "trl_exp1a_rho1p50_seed44",
    "trl_exp1a_rho2p00_seed42",
    "trl_exp1a_rho2p00_seed43",
    "trl_exp1a_rho2p00_seed44",
    "trl_exp1a_rho3p00_seed42",
    "trl_exp1a_rho3p00_seed43",
    "trl_exp1a_rho3p00_seed44",
    "trl_exp1a_rho5p00_seed42",
    "trl_exp1a_rho5p00_seed43",
    "trl_exp1a_rho5p00_seed44",
    "trl_exp2_adabalance_seed42",
    "trl_exp2_adabalance_seed43",
    "trl_exp2_best_static_rho3p0_seed42",
    "trl_exp2_best_static_rho3p0_seed43",
    "trl_exp2_vanilla_rho1p0_seed42",
    "trl_exp2_vanilla_rho1p0_seed43",
    "trl_w7_wave7_bandit_seed42",
    "trl_w7_wave7_bandit_seed43",
    "trl_w7_wave7_bandit_seed44",
    "trl_w7_wave7_bandit_seed45",
    "trl_w8_exact_seed45",
    "trl_w8_exact_seed46",
    "trl_w8_wave8_exact_seed42",
    "trl_w8_wave8_exact_seed43",
    "trl_w8_wave8_exact_seed44",
]
for _n in _SUN:
    _fam = _n.split("_")[1]
    RUNS[_n] = ("trl", _SUN_BATCH[_fam], _SUN_CAP[_fam])
# elizabethsztan/grpo-trait-dynamics: 256 rollouts a step (rewards move in steps of 1/256 and the
# fraction of all-equal groups in steps of 1/32: 32 groups of 8); lr 1e-4; no length cap logged.
for _n in ("grpotrait_lr1e4", "grpotrait_lr1e4_s2", "grpotrait_lr1e4_s3", "grpotrait_lr1e4_alllayers",
           "grpotrait_lr1e4_alllayers_s2", "grpotrait_lr1e4_alllayers_s3"):
    RUNS[_n] = ("jsonl", 256, 0)

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


_TRL_MAP = {
    "reward": "reward_mean", "reward_std": "reward_std", "entropy": "entropy", "kl": "kl",
    "grad_norm": "grad_norm", "completions/mean_length": "response_length",
    "completion_length": "response_length", "clip_ratio/region_mean": "clip_frac",
    "frac_reward_zero_std": "frac_zero_std", "completions/clipped_ratio": "response_clip_ratio",
}
_DICT = re.compile(r"\{'(?:loss|grad_norm)'.*?\}")


def parse_trl(lines: list[str], batch: int, cap: int) -> list[dict]:
    out: list[dict] = []
    for line in lines:
        m = _DICT.search(line)
        if not m:
            continue
        d = ast.literal_eval(m.group(0))
        if "reward" not in d:
            continue
        vals: dict[str, float] = {}
        for k, v in d.items():
            try:
                vals[k] = float(v)
            except (TypeError, ValueError):
                continue
        rec: dict = {"step": len(out) + 1, "batch": batch, "lr": vals.get("learning_rate", math.nan)}
        for src, dst in _TRL_MAP.items():
            if src in vals and dst not in rec and math.isfinite(vals[src]):
                rec[dst] = vals[src]
        rec["response_length_cap"] = cap
        rec["samples"] = (len(out) + 1) * batch
        out.append(rec)
    return out


def parse_jsonl(lines: list[str], batch: int, cap: int) -> list[dict]:
    out: list[dict] = []
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        d = json.loads(line)
        rec = {"step": int(d["step"]), "batch": batch, "lr": 1e-4, "reward_mean": float(d["mean_reward"])}
        if "kl" in d:
            rec["kl"] = float(d["kl"])
        if "degenerate_frac" in d:
            rec["frac_zero_std"] = float(d["degenerate_frac"])
        rec["samples"] = (len(out) + 1) * batch
        out.append(rec)
    return out


#: a collapse must have lasted this many records when the log ends, else the label is inconclusive
MIN_DOWN = 5


def label(records: list[dict]) -> dict:
    """Best reward and the collapse step: the first step from which every later reward stays below
    half the best (None if the run ends above half its best). ``label``: ``collapsed`` when the
    reward stayed down for at least ``MIN_DOWN`` records, ``inconclusive`` when the log ends
    sooner (such runs are left out of SPLIT.json), else ``healthy``. A run whose best reward is
    0 (it never scored) has no label (``None``)."""
    r = [rec["reward_mean"] for rec in records]
    best = max(r)
    collapse, idx = None, None
    for i in range(len(r)):
        if all(x < best / 2 for x in r[i:]):
            collapse, idx = records[i]["step"], i
            break
    if best <= 0:
        lab = None
    elif collapse is None:
        lab = "healthy"
    else:
        lab = "collapsed" if len(r) - idx >= MIN_DOWN else "inconclusive"
    return {"label": lab, "best_reward": best, "best_step": records[r.index(best)]["step"],
            "collapse_step": collapse, "records": len(records), "final_reward": r[-1]}


def main() -> int:
    for name, (fmt, batch, cap) in RUNS.items():
        with gzip.open(HERE / "raw" / f"{name}.log.gz", "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
        if fmt == "verl":
            recs = parse_verl(lines, batch, cap)
        elif fmt == "trl":
            recs = parse_trl(lines, batch, cap)
        elif fmt == "jsonl":
            recs = parse_jsonl(lines, batch, cap)
        else:
            raise SystemExit(f"{name}: unknown format {fmt!r}")
        with open(HERE / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for rec in recs:
                f.write(json.dumps({k: v for k, v in rec.items()
                                    if not (isinstance(v, float) and math.isnan(v))}) + "\n")
        print(name, json.dumps(label(recs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
