"""An independent simulator of RLVR training logs (test ground truth for the clocks).

Deliberately separate from :mod:`rlvr_schedule.synthetic`: a different mechanism, written from
the theory rather than from that module, so the fits are not tested against their own mirror.

Mechanism, per optimizer update with a rollout batch of B (group size g, B/g prompts):

* Skill ``s`` (a logit) is the mean of K coordinates, each moved by a noisy gradient step on a
  quadratic: the update under the square-root LR rule (Adam, noise-dominated) is
  ``u = eta B (1 + sigma xi / sqrt(B))`` and the coordinate gains ``u - kappa u^2 / 2``, so per rollout
  E[gain]/B = eta - kappa eta^2 sigma^2 / 2 - (kappa eta^2 / 2) B = p0 (1 - B/(2B*)).
  The constants are solved from the requested critical batch B* (noise share of the loss 20%).
* Rewards are binary: each prompt has a difficulty ``delta ~ N(0, 1.5^2)``; each of its g
  rollouts succeeds with probability sigmoid(s - delta). ``reward_mean``/``reward_std`` and the
  fraction of zero-std groups come from the sampled rewards.
* Entropy is consumed per rollout (first-order drift is batch-invariant under the sqrt rule):
  linear from H0 to 0.08 H0 at the failure point F (x (B/B0)^alpha for a step-clock variant),
  then collapsed; after F the skill decays (reward crash), the grad norm and KL blow up.
* Gradients: a d-dim mean gradient G and diagonal per-rollout covariance with
  tr(Sigma)/|G|^2 = ``b_simple``; the full-batch norm and a micro-batch norm (a subset of the
  same rollouts) are sampled exactly.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlvr_schedule.records import Run, StepRecord

#: (field -> logged key) for writing logs the way each framework names things; written here, not
#: imported from the package, so the test also checks the package's alias tables.
KEYS = {
    "canonical": {},
    "verl": {
        "step": "training/global_step",
        "lr": "actor/lr",
        "reward_mean": "critic/score/mean",
        "reward_std": "critic/score/std",
        "entropy": "actor/entropy",
        "kl": "actor/kl_loss",
        "grad_norm": "actor/grad_norm",
        "clip_frac": "actor/pg_clipfrac",
        "response_length": "response_length/mean",
        "batch": "batch_size",
    },
    "trl": {
        "step": "step",
        "lr": "learning_rate",
        "reward_mean": "reward",
        "reward_std": "reward_std",
        "entropy": "entropy",
        "kl": "kl",
        "grad_norm": "grad_norm",
        "frac_zero_std": "frac_reward_zero_std",
        "response_length": "completions/mean_length",
        "clip_frac": "clip_ratio/region_mean",
        "batch": "batch_size",
    },
}

_DIFF_Q = np.array([-1.5 * math.sqrt(2) * x for x in np.polynomial.hermite.hermgauss(24)[0]])
_DIFF_W = np.polynomial.hermite.hermgauss(24)[1] / math.sqrt(math.pi)


def success_rate(skill: float) -> float:
    """Expected reward at a skill (mean over prompt difficulties, Gauss-Hermite quadrature)."""
    return float(_DIFF_W @ (1.0 / (1.0 + np.exp(-(skill - _DIFF_Q)))))


@dataclass
class SimTask:
    critical_batch: float = 160.0
    failure_samples: float = 40_000.0
    failure_exponent: float = 0.0
    base_batch: int = 64
    lr0: float = 1e-6
    group_size: int = 8
    skill_gain: float = 3.0  # expected skill gained by F at B -> 0
    skill0: float = -2.0
    b_simple: float = 100.0
    dim: int = 16
    entropy0: float = 1.2
    noise_share: float = 0.2  # share of the drift lost to noise x curvature
    coords: int = 256  # independent coordinates behind the skill (a high-dim model's averaging)

    def __post_init__(self) -> None:
        self.p0 = self.skill_gain / self.failure_samples
        self.eta = self.p0 / (1 - self.noise_share)
        self.kappa = self.p0 / (self.critical_batch * self.eta**2)  # d = kappa eta^2 / 2 = p0/(2B*)
        self.sigma2 = 2 * self.noise_share * self.eta / (self.kappa * self.eta**2)

    def rate(self, batch: float) -> float:
        """Expected skill per rollout p(B)."""
        return self.eta - self.kappa * self.eta**2 * (self.sigma2 + batch) / 2

    def failure_at(self, batch: float) -> float:
        return self.failure_samples * (batch / self.base_batch) ** self.failure_exponent

    def lr(self, batch: float) -> float:
        return self.lr0 * math.sqrt(batch / self.base_batch)


def simulate_run(
    task: SimTask, batch: int, *, seed: int, max_samples: float | None = None, micro_batch: int | None = None
) -> Run:
    """One constant-batch run to ``max_samples`` (default 1.3 x its failure point)."""
    rng = np.random.default_rng(seed)
    g = task.group_size
    if batch % g:
        raise ValueError(f"batch {batch} is not a multiple of the group size {g}")
    fail = task.failure_at(batch)
    end = max_samples if max_samples is not None else 1.3 * fail
    micro = micro_batch or max(g, batch // 4)
    # gradient model: |G| shrinks as reward saturates; Sigma keeps tr(Sigma)/|G|^2 = b_simple
    direction = rng.normal(size=task.dim)
    direction /= np.linalg.norm(direction)
    var_shape = rng.uniform(0.5, 1.5, task.dim)
    var_shape /= var_shape.sum()
    skill, samples, step = task.skill0, 0, 0
    h0 = task.entropy0
    recs: list[StepRecord] = []
    while samples + batch <= end:
        step += 1
        # rollouts of the current policy
        n_prompts = batch // g
        delta = rng.normal(0.0, 1.5, n_prompts)
        p = 1.0 / (1.0 + np.exp(-(skill - delta)))
        succ = rng.binomial(g, p)
        rewards_mean = succ.sum() / batch
        reward_std = math.sqrt(max(rewards_mean * (1 - rewards_mean), 0.0))
        frac_zero = float(np.mean((succ == 0) | (succ == g)))
        t = samples  # rollouts trained on before this update
        failed = t >= fail
        if not failed:
            entropy = h0 * (1 - 0.92 * t / fail)
        else:
            entropy = 0.08 * h0 * math.exp(-(t - fail) / (0.05 * fail)) + 0.02 * h0
        entropy *= 1 + 0.02 * rng.normal()
        # gradient norms at these parameters
        sr = success_rate(skill)
        gnorm2 = max(sr * (1 - sr), 0.02)
        gvec = direction * math.sqrt(gnorm2)
        sd = np.sqrt(task.b_simple * gnorm2 * var_shape)
        m_micro = gvec + rng.normal(size=task.dim) * sd / math.sqrt(micro)
        m_rest = gvec + rng.normal(size=task.dim) * sd / math.sqrt(batch - micro)
        full = (micro * m_micro + (batch - micro) * m_rest) / batch
        spike = 1.0 if not failed else 6.0
        kl = 0.002 + 0.03 * (t / fail) ** 2 * (1 + 0.05 * rng.normal())
        if failed:
            kl *= 8.0
        # the update
        if not failed:  # K coordinates move independently; the skill is their mean
            u = task.eta * batch * (1 + math.sqrt(task.sigma2 / batch) * rng.normal(size=task.coords))
            skill += float(np.mean(u - task.kappa * u * u / 2))
        else:
            skill -= 4.0 * batch / (0.3 * fail)
        samples += batch
        recs.append(
            StepRecord(
                step=step,
                samples=samples,
                batch=batch,
                lr=task.lr(batch),
                reward_mean=float(rewards_mean),
                reward_std=reward_std,
                entropy=float(entropy),
                kl=float(kl),
                grad_norm=float(np.linalg.norm(full)) * spike,
                clip_frac=0.02 + 0.01 * rng.random(),
                response_length=300 + 100 * min(t / fail, 1.5),
                frac_zero_std=frac_zero,
                grad_norm_micro=float(np.linalg.norm(m_micro)) * spike,
                micro_batch=micro,
            )
        )
    return Run(recs, name=f"b{batch}")


def simulate_sweep(task: SimTask, batches: list[int], *, seed: int = 0, **kw) -> list[Run]:
    seeds = np.random.SeedSequence(seed).spawn(len(batches))
    return [
        simulate_run(task, b, seed=int(s.generate_state(1)[0]), **kw)
        for b, s in zip(batches, seeds, strict=True)
    ]


def write_log(path: str | Path, run: Run, style: str = "canonical") -> Path:
    """Write a run as JSONL in ``style``'s vocabulary (verl/TRL keep only what they log)."""
    keys = KEYS[style]
    path = Path(path)
    with open(path, "w", encoding="utf-8") as fh:
        for rec in run.records:
            d = rec.to_dict()
            if keys:
                d = {keys[k]: v for k, v in d.items() if k in keys}
            fh.write(json.dumps(d) + "\n")
    return path
