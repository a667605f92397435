"""``rlvr-trainer probe``: the gradient noise scale at fixed weights, before any sweep.

At the run's starting weights (or a checkpoint's) the probe samples ``units`` big batches of
``big`` rollouts, each split into ``big / small`` small batches, and takes the trainer's own loss
gradient (GRPO surrogate at ratio 1, the config's loss aggregation and advantages) of every small
batch and of every big batch, with no optimizer step in between. The numpy core
(:func:`rlvr_schedule.theory.noise_scale.noise_scale_from_draws`) turns the squared norms into
McCandlish's ``B_simple = tr(Sigma) / |G|^2`` with a bootstrap interval over the units, checks
``|G|^2`` across the two sizes (inner products of different big batches), and does the same on
gradients preconditioned by Adam's second moment, ``D = 1 / (sqrt(v) + eps)`` with ``v`` the mean
squared small-batch gradient over ``warmup`` draws taken first and every draw of the probe (what
Adam's ``v`` converges to at fixed weights). Why all draws: with ``v`` from the warm-up alone a
weight that the warm-up hardly touched (a rarely sampled token's row) gets a huge ``D`` and
decides the estimate (on the tiny model, 8/32/128 warm-up draws gave 326, 79 and 98 with
intervals up to open); with every draw in ``v`` no weight can weigh more than its share, at the
cost of a bias of the order of one draw in all of them. The warm-up-only reading is kept in
``probe.json``. It also reports the share of
groups whose rewards are all equal (no gradient) and the RMS gradient norm the fit predicts at
each sweep batch against the clipping threshold, and derives the sweep's batches: a quarter to
four times the noise scale the optimizer sees (preconditioned for AdamW, plain for SGD).

Writes ``probe.json`` and ``probe.md`` under ``--out`` and prints the reading in plain words.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr_schedule.theory.noise_scale import noise_scale_from_draws, sweep_batches
from rlvr_trainer.experiments.tables import jsonable

__all__ = ["probe", "describe"]

#: Keep the big batches' gradients for the Gram matrix only below this many bytes (the tiny model
#: needs ~50 MB; a 1.5B model would need 6 GB per gradient, so the check is skipped there).
GRAM_BYTES = 2 << 30


def _flat_grad(params: list) -> Any:
    import torch

    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])


def _batch_gradient(trainer: Any, rollouts: list, advantages: Any) -> tuple[Any, float]:
    """The loss gradient of one batch (flat fp32 vector on the host) and its completion tokens:
    the surrogate at ratio 1 as the first PPO epoch of an update takes it (the KL term is left
    out: zero gradient at the reference, and ``beta = 0`` in every preset)."""

    from rlvr_trainer.device import autocast
    from rlvr_trainer.grpo import completion_logprobs, pack_rollouts, policy_loss

    cfg, model = trainer.cfg, trainer.model
    packed = pack_rollouts(
        [r.prompt_ids for r in rollouts],
        [r.completion_ids for r in rollouts],
        pad_id=trainer.tokenizer.pad_token_id,
        micro_batch=len(rollouts),
        token_budget=cfg.token_budget(),
    ).to(trainer.device)
    adv = advantages.to(trainer.device)
    params = [p for p in model.parameters() if p.requires_grad]
    model.zero_grad(set_to_none=True)
    for mb in packed.micro:
        with autocast(mb.input_ids.device, trainer.compute_dtype):
            logp, _ = completion_logprobs(model, mb)
        loss, _ = policy_loss(
            logp,
            logp.detach(),
            adv[mb.rows_t],
            mb.mask,
            loss_type=cfg.loss_type,
            n_seqs=packed.n_seqs,
            n_tokens=packed.n_tokens,
            max_len=cfg.max_tokens,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
        )
        loss.backward()
    g = _flat_grad(params).detach().float().cpu()
    model.zero_grad(set_to_none=True)
    return g, float(packed.n_tokens)


def _precond(v: Any, eps: float) -> Any:
    """Adam's D = 1 / (sqrt(v) + eps); 0 for a weight that never had a gradient (a token never
    sampled: no second moment to divide by, so it is left out of the preconditioned norms)."""
    import torch

    return torch.where(v > 0, 1.0 / (v.sqrt() + eps), torch.zeros_like(v))


def _sample(trainer: Any, engine: Any, first: int, batch: int, step: int) -> tuple[list, list, Any]:
    """``batch / group_size`` training prompts from ``first`` on, sampled at the current weights."""
    g = trainer.cfg.group_size
    problems = [trainer.task.problem(first + i) for i in range(batch // g)]
    groups = engine.generate([p.prompt for p in problems], g, step=step)
    rollouts = [r for grp in groups for r in grp]
    return problems, rollouts, trainer._rewards(problems, rollouts)


def probe(
    cfg: Any,
    out: str | Path,
    *,
    small: int = 16,
    big: int = 128,
    units: int = 32,
    warmup: int = 8,
    checkpoint: str | Path | None = None,
    batches: Sequence[int] = (),
    max_batch: int | None = None,
    n_boot: int = 2000,
) -> dict[str, Any]:
    """Measure the noise scale at ``cfg``'s starting weights (``checkpoint``: a run's
    ``checkpoint.pt`` instead); returns what ``probe.json`` holds. ``batches``: the sweep the
    config would run (reported against the derived range); ``max_batch``: what the machine runs."""
    import torch

    from rlvr_schedule.clocks.failure.base import expected_zero_std_fraction
    from rlvr_schedule.errors import ConfigError
    from rlvr_schedule.theory.noise_scale import zero_variance_share
    from rlvr_trainer.grpo import group_advantages
    from rlvr_trainer.train import Trainer

    g = cfg.group_size
    for name, v in (("small", small), ("big", big)):
        if v < g or v % g:
            raise ConfigError(f"must be a positive multiple of group_size={g}, got {v}", field=name)
    if big % small or big <= small:
        raise ConfigError(f"must be a multiple of --small ({small}) above it, got {big}", field="big")
    if units < 2 or warmup < 1:
        raise ConfigError("--units must be >= 2 and --warmup >= 1", field="units")
    out = Path(out)
    t0 = time.perf_counter()
    # no reference model (the KL term is not in the probe's gradient), no evaluation
    pcfg = cfg.replace(track_kl=False, beta=0.0, overlap=False)
    with Trainer(pcfg, out) as trainer:
        if checkpoint is not None:
            from rlvr_trainer.checkpoint import load_checkpoint

            trainer.model.load_state_dict(load_checkpoint(Path(checkpoint))["model"])
        engine = trainer._engine()  # pushes the (loaded) weights
        t_setup = time.perf_counter()
        m = big // small
        params = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        keep = units * params * 4 * 2 <= GRAM_BYTES
        # Adam's second moment: the mean squared small-batch gradient of `warmup` draws first
        v = torch.zeros(params, dtype=torch.float64)
        first, step = 0, 0
        for _ in range(warmup):
            problems, rollouts, rewards = _sample(trainer, engine, first, small, step)
            first, step = first + len(problems), step + 1
            gw, _ = _batch_gradient(trainer, rollouts, group_advantages(rewards, g, scale=pcfg.scale_rewards))
            v += gw.double() ** 2
        d_warm = _precond(v / warmup, pcfg.adam_eps)
        t_warm = time.perf_counter()
        sq_s = torch.zeros(units, m, dtype=torch.float64)
        sq_sw = torch.zeros(units, m, dtype=torch.float64)
        sq_b = torch.zeros(units, dtype=torch.float64)
        sq_bw = torch.zeros(units, dtype=torch.float64)
        bigs, sums, all_rewards = [], [], []
        for i in range(units):
            problems, rollouts, rewards = _sample(trainer, engine, first, big, step)
            first, step = first + len(problems), step + 1
            all_rewards.append(rewards)
            adv = group_advantages(rewards, g, scale=pcfg.scale_rewards)
            acc = torch.zeros(params, dtype=torch.float64)
            s2 = torch.zeros(params, dtype=torch.float64)
            tokens, parts = [], []
            for j in range(m):
                sl = slice(j * small, (j + 1) * small)
                gj, tj = _batch_gradient(trainer, rollouts[sl], adv[sl])
                gj = gj.double()
                sq_s[i, j] = float(gj @ gj)
                sq_sw[i, j] = float((d_warm * gj) @ (d_warm * gj))
                s2 += gj * gj
                parts.append(gj)
                tokens.append(tj)
            # the big batch's gradient as the trainer takes it: token_mean weights each part by
            # its tokens, the per-sequence losses weight the parts equally
            w = [t / sum(tokens) for t in tokens] if pcfg.loss_type == "token_mean" else [1.0 / m] * m
            for wj, gj in zip(w, parts, strict=True):
                acc += wj * gj
            sq_b[i] = float(acc @ acc)
            sq_bw[i] = float((d_warm * acc) @ (d_warm * acc))
            v += s2
            if keep:
                bigs.append(acc.float())
                sums.append(s2.float())
        seconds = time.perf_counter() - t0
    rewards_all = torch.cat(all_rewards).numpy()

    def gram(vs: list, scale: Any = None) -> Any:
        if not vs:
            return None
        mat = torch.stack(vs).double()
        if scale is not None:
            mat = mat * scale
        return (mat @ mat.T).numpy()

    plain = noise_scale_from_draws(
        sq_s.numpy(), sq_b.numpy(), small, big, big_gram=gram(bigs), n_boot=n_boot, seed=cfg.seed
    )
    adam_warm = noise_scale_from_draws(sq_sw.numpy(), sq_bw.numpy(), small, big, n_boot=n_boot, seed=cfg.seed)
    adam, v_from = adam_warm, f"the {warmup} warm-up draws"
    if keep:  # v over every small-batch draw: what Adam's v converges to at fixed weights
        d = _precond(v / (warmup + units * m), pcfg.adam_eps)
        d2 = d * d
        sq_sp = torch.stack([(d2 * s2.double()).sum() / m for s2 in sums])
        sq_bp = torch.stack([(d2 * b.double() ** 2).sum() for b in bigs])
        adam = noise_scale_from_draws(
            sq_sp.numpy(), sq_bp.numpy(), small, big, big_gram=gram(bigs, d), n_boot=n_boot, seed=cfg.seed
        )
        v_from = f"all {warmup + units * m} small-batch draws"
    used = adam if pcfg.optimizer == "adamw" else plain
    rng = sweep_batches(
        used.b_simple, used.interval, group_size=g, max_batch=max_batch, fallback=tuple(batches)
    )
    p_mean = float(rewards_all.mean())
    sweep = sorted(set(batches) | {small, big})
    rms = {
        int(b): math.sqrt(max(plain.g2 + plain.trace / b, 0.0)) if math.isfinite(plain.trace) else math.nan
        for b in sweep
    }
    clip = {
        "max_grad_norm": pcfg.max_grad_norm,
        f"share_over_at_{small}": float((sq_s.sqrt() > pcfg.max_grad_norm).double().mean()),
        f"share_over_at_{big}": float((sq_b.sqrt() > pcfg.max_grad_norm).double().mean()),
        "predicted_rms_norm": rms,
    }
    result = {
        "config": {
            k: getattr(pcfg, k) for k in ("task", "task_max_level", "group_size", "optimizer", "loss_type")
        },
        "checkpoint": str(checkpoint) if checkpoint else None,
        "small": small,
        "big": big,
        "units": units,
        "warmup": warmup,
        "rollouts": units * big + warmup * small,
        "params": params,
        "seconds": seconds,
        "seconds_setup": t_setup - t0,
        "seconds_warmup": t_warm - t_setup,
        "params_without_gradient": int((v == 0).sum()),
        "adam_v_from": v_from,
        "noise_scale_adam_warmup_only": adam_warm.to_dict(),
        "reward_mean": p_mean,
        "zero_variance_share": zero_variance_share(rewards_all, g),
        "zero_variance_share_if_equal_prompts": expected_zero_std_fraction(p_mean, g),
        "noise_scale": plain.to_dict(),
        "noise_scale_adam": adam.to_dict(),
        "noise_scale_used": "adam" if used is adam else "plain",
        "sweep": rng.to_dict(),
        "configured_batches": list(batches),
        "clipping": clip,
    }
    out.mkdir(parents=True, exist_ok=True)
    # strict JSON: an open interval end (inf) and a missing value (NaN) are written as null
    (out / "probe.json").write_text(json.dumps(jsonable(result), indent=1))
    (out / "probe.md").write_text(describe(result) + "\n")
    return result


def _n(x: Any, missing: str) -> str:
    return f"{x:,.0f}" if isinstance(x, (int, float)) and math.isfinite(x) else missing


def _est(e: dict[str, Any]) -> str:
    """``B [95%: lo, hi]``; an end that is not finite (null in probe.json) is open."""
    lo, hi = e["interval"]
    return f"{_n(e['b_simple'], 'inf')} rollouts [95%: {_n(lo, '-')}, {_n(hi, 'open')}]"


def describe(r: dict[str, Any]) -> str:
    """The probe's reading in plain words (what ``probe.md`` holds and the console shows)."""
    p, a = r["noise_scale"], r["noise_scale_adam"]
    lines = [
        "# Gradient noise scale at fixed weights",
        "",
        f"{r['units']} draws of {r['big']} rollouts, each split into {r['big'] // r['small']} x "
        f"{r['small']}, at one set of weights ({r['checkpoint'] or 'the starting weights'}); "
        f"{r['rollouts']:,} rollouts in {r['seconds']:.0f} s ({r['seconds_setup']:.0f} s of it loading the "
        "model and the engine).",
        "",
        f"- Noise scale B_simple = tr(Sigma)/|G|^2: {_est(p)}.",
        f"- Adam-preconditioned (v from {r['adam_v_from']} of {r['small']}; "
        f"{r['params_without_gradient']:,} of {r['params']:,} weights never had a gradient, left "
        f"out): {_est(a)}.",
    ]
    if p["g2_stable"] is None:
        lines.append("- |G|^2 across the two sizes: not checked (no Gram matrix).")
    else:
        word = "agrees" if p["g2_stable"] else "DIFFERS (the two-batch estimate is biased here)"
        lines.append(
            f"- |G|^2 {p['g2']:.4g} from the two sizes; {p['g2_cross']:.4g} from the big batches "
            f"alone: {word}."
        )
    lines.append(
        f"- Groups with all rewards equal (no gradient): {r['zero_variance_share']:.0%} "
        f"(mean reward {r['reward_mean']:.2f}; {r['zero_variance_share_if_equal_prompts']:.0%} if "
        "every prompt were equally hard)."
    )
    c = r["clipping"]
    rms = ", ".join(f"{b}: {v:.2f}" for b, v in c["predicted_rms_norm"].items())
    lines.append(
        f"- Gradient norm against the clip at {c['max_grad_norm']}: RMS norm predicted per batch {rms}."
    )
    s = r["sweep"]
    which = "Adam-preconditioned" if r["noise_scale_used"] == "adam" else "plain"
    if s["designed"]:
        lines.append(
            f"- Sweep for B*: batches {', '.join(map(str, s['batches']))} (a quarter to four times "
            f"the {which} noise scale, {s['centre']:,.0f}). On the square-root rule B* = "
            "B~_noise (lambda_0/lambda - 1/2): the range holds B* for LRs from about lambda_0/4.5 "
            "to 4/3 lambda_0, lambda_0 the LR best per rollout at small batches."
        )
    else:
        lines.append(
            f"- No sweep range from this probe: the {which} noise scale is not bounded "
            f"(configured batches kept: {', '.join(map(str, s['batches'])) or 'none'})."
        )
    for n in s["notes"] + p["notes"] + a["notes"]:
        lines.append(f"  - {n}")
    return "\n".join(lines)
