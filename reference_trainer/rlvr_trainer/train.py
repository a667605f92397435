"""The GRPO loop with a batch schedule live inside it.

Each update: draw ``batch / group_size`` prompts, sample ``group_size`` completions each with the
rollout engine, score them, compute group-normalised advantages, take one AdamW step (per PPO
epoch) over micro-batches, push the new weights into the engine, log a canonical
:class:`~rlvr_schedule.records.StepRecord` and hand it to a :class:`~rlvr_schedule.driver.ScheduleDriver`,
the same loop the framework adapters run: observer plugins see it, the schedule decides, and a new
stage reaches the trainer through :meth:`Trainer.set_batch` (the driver's ``apply``).

With ``cfg.overlap`` the engine runs in a second process (:mod:`rlvr_trainer.overlap`) and the
loop is one step off-policy: update ``t`` trains on a batch sampled by the weights of update
``t - 1`` while the batch of update ``t + 1`` is sampled by the weights of update ``t``. The
surrogate's ratio is taken against the sampler's own log-probs (the importance-ratio correction,
clipped like PPO's; its mean and max are in the record's ``extra``). A schedule decision made
after update ``t`` reaches the next batch requested, the one of update ``t + 2`` (batch and LR
together: each batch carries the stage it was requested under). Checkpoints hold the prefetched
batch, so a resumed run trains on exactly what the uninterrupted one would.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.errors import ConfigError
from rlvr_schedule.ingest import JsonlWriter
from rlvr_schedule.plugins import PluginHost
from rlvr_schedule.records import BatchSchedule, Stage, StepRecord
from rlvr_schedule.theory.scaling import lr_for_batch
from rlvr_trainer.checkpoint import (
    CheckpointError,
    load_checkpoint,
    load_latest_checkpoint,
    previous_path,
    repair_torn_tail,
    save_checkpoint,
    set_rng_state,
    truncate_jsonl,
)
from rlvr_trainer.config import TrainConfig, make_optimizer
from rlvr_trainer.device import resolve_compute_dtype, resolve_device, set_engine_env
from rlvr_trainer.evaluation import make_evaluator, training_task
from rlvr_trainer.grpo import (
    PackedBatch,
    UpdateResult,
    behaviour_logprobs,
    group_advantages,
    pack_rollouts,
    packed_update,
    reference_logprobs,
)
from rlvr_trainer.rollout import Rollout, make_engine
from rlvr_trainer.tasks import reward_for, score
from rlvr_trainer.timing import PartClock

__all__ = ["Trainer", "initial_schedule"]

log = logging.getLogger("rlvr_trainer")


def initial_schedule(cfg: TrainConfig) -> BatchSchedule:
    """A one-stage static schedule at ``cfg.batch`` with the LR from the core's scaling rule."""
    from rlvr_schedule.policy import StaticSchedule

    lr = lr_for_batch(cfg.batch, cfg.base_batch, cfg.base_lr, rule=cfg.lr_rule)
    return StaticSchedule([Stage(batch=cfg.batch, lr=lr)])


@dataclass
class Prefetch:
    """A batch requested from the generation process (overlap mode), with the stage it was
    requested under and the number of updates its sampling weights had seen."""

    batch: int
    lr: float
    first_problem: int
    weights_step: int
    groups: list[list[Rollout]] | None = None
    times: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the checkpoint (the groups must have arrived)."""
        assert self.groups is not None
        return {
            "batch": self.batch,
            "lr": self.lr,
            "first_problem": self.first_problem,
            "weights_step": self.weights_step,
            "groups": [
                [[r.prompt_ids, r.completion_ids, r.text, r.finished, r.logprobs] for r in grp]
                for grp in self.groups
            ],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Prefetch:
        groups = [[Rollout(*row) for row in grp] for grp in d["groups"]]
        return cls(int(d["batch"]), float(d["lr"]), int(d["first_problem"]), int(d["weights_step"]), groups)


@dataclass
class TrainBatch:
    """A scored rollout batch laid out for the step: rewards (batch order), advantages, the
    packed micro-batches, the sampler's log-probs in their layout, the reference's log-probs."""

    rewards: torch.Tensor
    advantages: torch.Tensor
    packed: PackedBatch
    behaviour: list[torch.Tensor] | None = None
    sampler: list[torch.Tensor] | None = None
    ref_logp: list[torch.Tensor] | None = None

    def to(self, device: Any) -> TrainBatch:
        """The tensors the step reads on ``device`` (asynchronous copies; rewards stay on the host)."""

        def move(ts: list[torch.Tensor] | None) -> list[torch.Tensor] | None:
            return None if ts is None else [t.to(device, non_blocking=True) for t in ts]

        adv = self.advantages.to(device, non_blocking=True)
        return TrainBatch(self.rewards, adv, self.packed.to(device), move(self.behaviour), move(self.sampler))


def _wall_times(host: dict[str, float], generate_s: float) -> dict[str, float]:
    """The record's wall-time split (host seconds): generate + reward = rollout; logprob (packing,
    transfer, reference pass) + backward (forward, backward, optimizer, sync) = update."""
    logprob = sum(host.get(k, 0.0) for k in ("engine_sleep", "pack", "transfer", "reference"))
    backward = sum(host.get(k, 0.0) for k in ("forward", "backward", "optimizer", "sync"))
    reward = host.get("reward", 0.0)
    return {
        "rollout_s": generate_s + reward,
        "update_s": logprob + backward,
        "push_s": host.get("push", 0.0),
        "generate_s": generate_s,
        "reward_s": reward,
        "logprob_s": logprob,
        "backward_s": backward,
    }


class Trainer:
    """One GRPO run writing ``metrics.jsonl``, ``decisions.jsonl`` and ``checkpoint.pt`` to ``out_dir``;
    a context manager that closes its rollout engine (``with Trainer(cfg, out) as t: t.train()``).

    ``schedule`` defaults to a constant batch (``cfg.batch``); pass a
    :class:`~rlvr_schedule.policy.TwoClockScheduler` to run the two-clock policy live. ``plugins``:
    observers (sinks) that see every record and decision. ``advisory``: decide and log, never
    change the batch or LR. ``checkpoint_on_alarm``: at a raised alarm of the collapse watch, save
    ``alarm-checkpoint-<step>.pt`` (kept beside ``checkpoint.pt``, which each save replaces) and
    ``alarm-checkpoint-<step>.json`` (the rollouts it holds, the alarms); None: in advisory mode only.
    ``train(resume_from=...)`` continues from one.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        out_dir: str | Path,
        *,
        schedule: BatchSchedule | None = None,
        plugins: PluginHost | None = None,
        progress: bool = False,
        desc: str | None = None,
        advisory: bool = False,
        checkpoint_on_alarm: bool | None = None,
    ) -> None:
        self.device = resolve_device(cfg.device)  # ConfigError for CUDA where there is none
        if cfg.overlap and self.device.type != "cpu":
            raise ConfigError(
                "overlap mode runs on the CPU only (its engine process is set up for it)", field="overlap"
            )
        set_engine_env(self.device)
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rlvr_trainer.model import ensure_tiny_model

        self.cfg = cfg
        self.compute_dtype = resolve_compute_dtype(cfg.compute_dtype, cfg.dtype, self.device)
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.progress, self.desc = progress, desc or self.out_dir.name
        self.model_dir = Path(cfg.model) if cfg.model else ensure_tiny_model(progress=progress)
        torch.manual_seed(cfg.seed)
        if self.device.type == "cuda":
            self._check_memory()
            torch.cuda.manual_seed_all(cfg.seed)
        dtype = getattr(torch, cfg.dtype)  # the weights' and AdamW state's (fp32 in every preset)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=dtype).to(self.device)
        if cfg.gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            self.model.config.use_cache = False
        self.model.train()
        self.ref_model = None
        if cfg.beta > 0 or cfg.track_kl:
            # no optimizer, no master copy: the reference lives in the compute dtype
            ref_dtype = self.compute_dtype if self.device.type == "cuda" else dtype
            self.ref_model = AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=ref_dtype)
            self.ref_model = self.ref_model.to(self.device).eval()
            self.ref_model.requires_grad_(False)
        self.task = training_task(cfg)
        self.plugins = plugins if plugins is not None else PluginHost(load_entrypoints=False)
        self.schedule = schedule if schedule is not None else initial_schedule(cfg)
        self.batch, lr = self.schedule.current.batch, self.schedule.current.lr
        self.driver = ScheduleDriver(
            self.schedule,
            self.set_batch,
            self.plugins,
            in_effect=(self.batch, float(lr)),
            advisory=advisory,
            save=self.save_at_alarm,
            checkpoint_on_alarm=checkpoint_on_alarm,
        )
        self.optimizer = make_optimizer(cfg, self.model.parameters(), lr)
        # greedy accuracy on held-out prompts (short-answer: exact expected reward), or None
        self.evaluator = make_evaluator(cfg, self.model, self.tokenizer)
        self.step = 0
        self.samples = 0
        self.next_problem = 0
        self.engine = None
        self.prefetch: Prefetch | None = None  # overlap mode: the batch being sampled for the next update
        self.metrics_path = self.out_dir / "metrics.jsonl"
        self.decisions_path = self.out_dir / "decisions.jsonl"
        self.checkpoint_path = self.out_dir / "checkpoint.pt"
        self._saved_step: int | None = None  # the step checkpoint.pt was last saved at (this process)
        (self.out_dir / "config.json").write_text(json.dumps(self.cfg.to_dict(), indent=2))

    def _check_memory(self) -> None:
        """Refuse a CUDA run whose ``--dry-run`` estimate exceeds the device's memory (names the knob)."""
        from rlvr_trainer.memory import dry_run

        dry_run(self.cfg, check=True)

    # --- schedule control ---------------------------------------------------------------------
    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def set_batch(self, batch: int, lr: float) -> bool:
        """Rollouts per update and LR for the next update (the driver's ``apply``)."""
        g = self.cfg.group_size
        if batch < g or batch % g:
            raise ValueError(f"batch {batch} is not a positive multiple of group_size {g}")
        self.batch = int(batch)
        for group in self.optimizer.param_groups:
            group["lr"] = float(lr)
        return True

    # --- checkpoint ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}
        if self.prefetch is not None:
            if self.prefetch.groups is None:  # in flight: the next update waits for it anyway
                self.prefetch.groups, self.prefetch.times = self.engine.result()
            extra["prefetch"] = self.prefetch.to_dict()
        driver = self.driver.state_dict()
        return {
            **extra,
            "config": self.cfg.to_dict(),
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "step": self.step,
            "samples": self.samples,
            "next_problem": self.next_problem,
            "batch": self.batch,
            "lr": self.lr,
            "watch": {k: v for k, v in driver.items() if k in ("watch", "alarm_checkpoints")},
        }

    def save(self) -> Path:
        """``checkpoint.pt`` at this step (once: the end of a run that just saved keeps the one before)."""
        if self._saved_step == self.step and self.checkpoint_path.exists():
            return self.checkpoint_path
        path = save_checkpoint(self.checkpoint_path, self.state_dict())
        self._saved_step = self.step
        return path

    def save_at_alarm(self, alarms: list[Any], record: StepRecord) -> Path:
        """The driver's ``save`` at a raised alarm: a checkpoint of its own, with what it holds."""
        path = self.out_dir / f"alarm-checkpoint-{self.step}.pt"
        info = {"step": self.step, "samples": self.samples, "alarms": [a.to_dict() for a in alarms]}
        save_checkpoint(path, self.state_dict())
        path.with_suffix(".json").write_text(json.dumps(info, indent=1))
        return path

    def resume(self, path: str | Path | None = None) -> bool:
        """Continue from ``checkpoint.pt`` (or ``path``: an alarm checkpoint) if present (logs are cut
        back to its step)."""
        if path is not None:  # a named checkpoint (an alarm's): that one, or an error naming it
            if not Path(path).exists():
                return False
            st = load_checkpoint(path)
        elif self.checkpoint_path.exists() or previous_path(self.checkpoint_path).exists():
            for p in (self.metrics_path, self.decisions_path):
                repair_torn_tail(p)  # a torn last line: cut (warned, its bytes counted) before reading
            st, used = load_latest_checkpoint(self.checkpoint_path)  # damaged: the one before it
            if used != self.checkpoint_path and self.checkpoint_path.exists():  # set aside, so the next
                aside = self.checkpoint_path.with_name(self.checkpoint_path.name + ".damaged")  # save keeps
                os.replace(self.checkpoint_path, aside)  # the good one as .prev
            st = self._consistent_with_log(st, used)
        else:
            return False
        self.model.load_state_dict(st["model"])  # copies into the device tensors
        self.optimizer.load_state_dict(st["optimizer"])
        self.schedule.load_state_dict(st["schedule"])
        self.step, self.samples, self.next_problem = st["step"], st["samples"], st["next_problem"]
        self._saved_step = None
        self.set_batch(st["batch"], st["lr"])
        self.driver.in_effect, self.driver.samples = (int(st["batch"]), float(st["lr"])), int(st["samples"])
        set_rng_state(st["rng"])
        watch = st.get("watch") or {}
        if self.driver.watch is not None and watch.get("watch") is not None:
            from rlvr_schedule.policy.base import decode_floats

            self.driver.watch.load_state_dict(decode_floats(watch["watch"]))
        self.driver.alarm_checkpoints = [dict(c) for c in watch.get("alarm_checkpoints") or []]
        self.prefetch = None
        if st.get("prefetch") is not None:
            if self.cfg.overlap:
                self.prefetch = Prefetch.from_dict(st["prefetch"])
            else:  # next_problem is the prefetched batch's first prompt: sampled again, on-policy
                log.info("resuming without overlap: the checkpoint's prefetched batch is sampled again")
        truncate_jsonl(self.metrics_path, self.step)
        truncate_jsonl(self.decisions_path, self.step)
        log.info("resumed %s at step %d (%d samples)", self.out_dir, self.step, self.samples)
        return True

    def _consistent_with_log(self, st: dict, used: Path) -> dict:
        """The checkpoint to resume from given the log: one whose step is past the log's last whole
        record (that record torn after the save) would leave a gap, so the one before it is used."""
        last = _last_step(self.metrics_path)
        prev = previous_path(self.checkpoint_path)
        if last is None or last >= st["step"] or used == prev or not prev.exists():
            return st
        try:
            before = load_checkpoint(prev)
        except CheckpointError:
            before = None
        if before is None or before["step"] > last:
            log.warning(
                "%s ends at step %d, before %s's step %d: the records between are missing",
                self.metrics_path,
                last,
                used,
                st["step"],
            )
            return st
        log.warning(
            "%s ends at step %d, before %s's step %d (its last record torn): resuming from %s (step %d)",
            self.metrics_path,
            last,
            used,
            st["step"],
            prev,
            before["step"],
        )
        return before

    # --- loop ----------------------------------------------------------------------------------
    def _engine(self):
        if self.engine is None and self.cfg.overlap:
            from rlvr_trainer.overlap import EngineProcess

            c = self.cfg
            self.engine = EngineProcess(
                self.model_dir,
                self.model,
                max_tokens=c.max_tokens,
                temperature=c.temperature,
                seed=c.seed,
                max_model_len=c.max_model_len,
                dtype=c.dtype,
                log_file=self.out_dir / "vllm.log",
            )
        if self.engine is None:
            c = self.cfg
            cuda = self.device.type == "cuda"
            self.engine = make_engine(
                c.rollout,
                model_dir=self.model_dir,
                model=self.model,
                tokenizer=self.tokenizer,
                max_tokens=c.max_tokens,
                temperature=c.temperature,
                seed=c.seed,
                max_model_len=c.max_model_len,
                # vLLM on CUDA gets a copy in the compute dtype (bf16); the CPU engine the weights'
                dtype=str(self.compute_dtype).removeprefix("torch.") if cuda else c.dtype,
                device=str(self.device),
                gpu_memory_utilization=c.gpu_memory_utilization,
                compute_dtype=self.compute_dtype,
                log_file=self.out_dir / "vllm.log",
            )
            self.engine.push_weights(self.model)  # the engine always runs the trainer's weights
        return self.engine

    def _set_aside_old_logs(self) -> None:
        """A fresh start in a directory that holds another run's logs renames them (``*.jsonl.old-N``)
        instead of appending to them: appending would interleave two runs' steps in one log."""
        for p in (self.metrics_path, self.decisions_path):
            if p.exists() and p.stat().st_size > 0:
                n = 1
                while p.with_name(f"{p.name}.old-{n}").exists():
                    n += 1
                p.rename(p.with_name(f"{p.name}.old-{n}"))
                log.warning(
                    "%s held another run's records and no checkpoint: set aside as %s.old-%d", p, p.name, n
                )

    def train(
        self, *, resume: bool = False, max_steps: int | None = None, resume_from: str | Path | None = None
    ) -> list[StepRecord]:
        """Run until ``cfg.max_samples`` rollouts (or ``max_steps`` more updates); return new records.
        ``resume_from``: continue from that checkpoint (an alarm checkpoint) instead of ``checkpoint.pt``."""
        if resume_from is not None:
            if not self.resume(resume_from):
                raise FileNotFoundError(f"{resume_from}: no such checkpoint")
        elif not (resume and self.resume()) and self.step == 0:
            self._set_aside_old_logs()
        engine = self._engine()
        records: list[StepRecord] = []
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(
                total=self.cfg.max_samples,
                initial=min(self.samples, self.cfg.max_samples),
                desc=self.desc,
                unit="rollout",
                dynamic_ncols=True,
            )
        done = 0
        with JsonlWriter(self.metrics_path) as mfh, JsonlWriter(self.decisions_path) as dfh:
            while self.samples < self.cfg.max_samples and (max_steps is None or done < max_steps):
                ev = self._evaluate(engine)
                record = self.train_step(engine)
                record.extra.update(ev)
                if self.samples >= self.cfg.max_samples and self.evaluator and self.evaluator.final:
                    # the budget's end (eval_spacing "log"): after the last update, in its record
                    fin = self._evaluate(engine, force=True)
                    record.extra.update({f"eval_final_{k[5:]}": v for k, v in fin.items()})
                    record.extra["eval_final_samples"] = float(self.samples)
                decision = self.driver.observe(record)  # observers, schedule, set_batch on a switch
                mfh.write(record)
                dfh.write(decision.to_dict())
                records.append(record)
                done += 1
                if bar is not None:
                    bar.update(record.batch)
                    bar.set_postfix(
                        batch=record.batch,
                        reward=f"{record.reward_mean:.3f}",
                        entropy=f"{record.entropy:.3f}",
                        refresh=False,
                    )
                if self.cfg.checkpoint_every and self.step % self.cfg.checkpoint_every == 0:
                    self.save()
        if bar is not None:
            bar.close()
        self.save()
        return records

    def _evaluate(self, engine, *, force: bool = False) -> dict[str, float]:
        """Held-out accuracy before the next update when one is due (overlap mode: sampled by the
        policy itself, the engine process being busy with the next batch)."""
        if self.evaluator is None or not (force or self.evaluator.due(self.samples, self.batch)):
            return {}
        if self.cfg.overlap:
            from rlvr_trainer.rollout import HFEngine

            engine = HFEngine(self.model, self.tokenizer, max_tokens=self.cfg.max_tokens)
        return self.evaluator(engine, step=self.step)

    def close(self) -> None:
        """Shut the rollout engine down (its memory and, with vLLM, its worker state)."""
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def train_step(self, engine) -> StepRecord:
        """One rollout batch and its optimizer update(s); returns the canonical record."""
        if self.cfg.overlap:
            return self._overlap_step(engine)
        g = self.cfg.group_size
        batch, lr = self.batch, self.lr
        t0 = time.perf_counter()
        problems = [self.task.problem(self.next_problem + i) for i in range(batch // g)]
        groups = engine.generate([p.prompt for p in problems], g, step=self.step, logprobs=True)
        t_gen = time.perf_counter()
        sampler = [r.logprobs for grp in groups for r in grp]
        return self._update(
            batch,
            lr,
            problems,
            groups,
            t0,
            t_gen,
            push=engine.push_weights,
            sampler=None if any(lp is None for lp in sampler) else sampler,  # type: ignore[arg-type]
            engine=engine,
        )

    def _request(self, engine, first_problem: int, gen_step: int) -> None:
        """Overlap mode: ask for the batch of update ``gen_step`` (the schedule's stage now),
        sampled by the current weights with that update's seeds."""
        g, batch = self.cfg.group_size, self.batch
        prompts = [self.task.problem(first_problem + i).prompt for i in range(batch // g)]
        t0 = time.perf_counter()
        engine.submit(prompts, g, step=gen_step, model=self.model)
        self._submit_s = time.perf_counter() - t0
        self.prefetch = Prefetch(batch, self.lr, first_problem, self.step)

    def _overlap_step(self, engine) -> StepRecord:
        """Train on the prefetched batch while the engine process samples the next one."""
        g = self.cfg.group_size
        self._submit_s = 0.0
        if self.prefetch is None:  # a fresh start (or a checkpoint without one): sample on-policy now
            self._request(engine, self.next_problem, self.step)
        pf = self.prefetch
        assert pf is not None
        t0 = time.perf_counter()
        waited = pf.groups is None  # else it arrived while a checkpoint was written
        if pf.groups is None:
            pf.groups, pf.times = engine.result()
        t_gen = time.perf_counter()
        self.prefetch = None
        if self.samples + pf.batch < self.cfg.max_samples:
            # the batch of the next update is sampled now, by the weights before this update
            self._request(engine, pf.first_problem + pf.batch // g, self.step + 1)
        problems = [self.task.problem(pf.first_problem + i) for i in range(pf.batch // g)]
        behaviour = [r.logprobs or [] for grp in pf.groups for r in grp]
        extra = {
            "generate_s": pf.times.get("child_generate_s", math.nan),
            # CPU seconds the engine process spent sampling (wall above that: it waited for a core)
            "generate_cpu_s": pf.times.get("child_generate_cpu_s", math.nan),
            "wait_s": pf.times.get("wait_s", 0.0) if waited else 0.0,
            "push_s": self._submit_s,
            "engine_push_s": pf.times.get("child_push_s", math.nan),
            "staleness": self.step - pf.weights_step,
        }
        return self._update(
            pf.batch,
            pf.lr,
            problems,
            pf.groups,
            t0,
            t_gen,
            behaviour=behaviour,
            sampler=behaviour,
            extra=extra,
        )

    def _update(
        self,
        batch: int,
        lr: float,
        problems: list,
        groups: list[list[Rollout]],
        t0: float,
        t_gen: float,
        *,
        push=None,
        behaviour: list[list[float]] | None = None,
        sampler: list[list[float]] | None = None,
        extra: dict[str, Any] | None = None,
        engine=None,
    ) -> StepRecord:
        """Score, pack and train on one sampled batch; ``lr`` is the stage it was sampled under.

        The clock's ``span`` runs from the rollouts in hand to the weights updated (the span the
        benchmarks time TRL over too); its parts are in the record as ``timing_s/<part>``."""
        clock = PartClock(self.device)
        rollouts = [r for grp in groups for r in grp]
        sched_lr, warm = self.lr, self._warmup(batch)
        self._set_lr(lr * warm)  # the batch's LR, ramped over the first warmup_samples rollouts
        if engine is not None and hasattr(engine, "sleep"):
            with clock.part("engine_sleep"):
                engine.sleep()  # vLLM on CUDA with sleep mode: its memory back for the step
        span = clock.start("span")
        with clock.part("reward"):
            rewards = self._rewards(problems, rollouts)
        with clock.part("pack"):
            tb = self._pack(rollouts, rewards, behaviour, sampler)
        with clock.part("transfer"):
            tb = tb.to(self.device)  # one host-to-device copy per update, before the micro-batch loop
        with clock.part("reference"):
            tb.ref_logp = self._reference_logp(tb.packed)
        upd = self._train(tb, clock)
        clock.stop(span)
        self._set_lr(sched_lr)  # the schedule's LR stays the optimizer's state (checkpoints, set_batch)
        with clock.part("push"):
            if push is not None:
                push(self.model)
        self.step += 1
        self.samples += tb.packed.n_seqs
        self.next_problem += len(problems)  # overlap: the prefetched batch's first prompt
        return self._record(batch, lr, warm, rollouts, tb, upd, clock, t_gen - t0, extra)

    # --- the update's steps (read in the order _update runs them) --------------------------
    def _warmup(self, batch: int) -> float:
        """The LR ramp's factor for a batch: the same ramp over ``warmup_samples`` at every batch."""
        w = self.cfg.warmup_samples
        return min(1.0, (self.samples + batch) / w) if w else 1.0

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _rewards(self, problems: list, rollouts: list[Rollout]) -> torch.Tensor:
        golds = [p.answer for p in problems for _ in range(self.cfg.group_size)]
        rewards = score([r.text for r in rollouts], golds, reward_for(self.cfg.task))
        return torch.tensor(rewards, dtype=torch.float32)

    def _pack(
        self,
        rollouts: list[Rollout],
        rewards: torch.Tensor,
        behaviour: list[list[float]] | None,
        sampler: list[list[float]] | None,
    ) -> TrainBatch:
        """Advantages and the packed micro-batches (with the sampler's log-probs laid out like them)."""
        cfg = self.cfg
        packed = pack_rollouts(
            [r.prompt_ids for r in rollouts],
            [r.completion_ids for r in rollouts],
            pad_id=self.tokenizer.pad_token_id,
            micro_batch=cfg.micro_batch,
            token_budget=cfg.token_budget(),
            seed=f"{cfg.seed}/{self.step}",
        )
        return TrainBatch(
            rewards,
            group_advantages(rewards, cfg.group_size, scale=cfg.scale_rewards),
            packed,
            behaviour_logprobs(packed, behaviour) if behaviour is not None else None,
            behaviour_logprobs(packed, sampler) if sampler is not None else None,
        )

    def _reference_logp(self, packed: PackedBatch) -> list[torch.Tensor] | None:
        """The reference policy's log-probs (only with ``beta > 0`` or ``track_kl``)."""
        if self.ref_model is None:
            return None
        return reference_logprobs(self.ref_model, packed, compute_dtype=self.compute_dtype)

    def _train(self, tb: TrainBatch, clock: PartClock) -> UpdateResult:
        cfg = self.cfg
        return packed_update(
            self.model,
            self.optimizer,
            tb.packed,
            tb.advantages,
            loss_type=cfg.loss_type,
            max_len=cfg.max_tokens,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
            beta=cfg.beta,
            ppo_epochs=cfg.ppo_epochs,
            max_grad_norm=cfg.max_grad_norm,
            ref_logp=tb.ref_logp,
            behaviour_logp=tb.behaviour,
            sampler_logp=tb.sampler,
            tis_cap=cfg.tis_cap,
            compute_dtype=self.compute_dtype,
            clock=clock,
        )

    def _record(
        self,
        batch: int,
        lr: float,
        warm: float,
        rollouts: list[Rollout],
        tb: TrainBatch,
        upd: UpdateResult,
        clock: PartClock,
        generate_s: float,
        extra: dict[str, Any] | None,
    ) -> StepRecord:
        """The canonical record of the update just taken."""
        cfg, stats, rewards, n_seqs = self.cfg, upd.stats, tb.rewards, tb.packed.n_seqs
        tok = max(stats.tokens, 1.0)
        return StepRecord(
            step=self.step,
            samples=self.samples,
            batch=batch,
            lr=lr,
            reward_mean=float(rewards.mean()),
            reward_std=float(rewards.std()) if n_seqs > 1 else 0.0,
            entropy=stats.entropy / tok,
            kl=stats.kl / tok if tb.ref_logp is not None else math.nan,
            grad_norm=upd.grad_norm,
            clip_frac=stats.clipped / (tok * cfg.ppo_epochs),
            response_length=float(tb.packed.completion_lengths.mean()),
            frac_zero_std=float((rewards.view(-1, cfg.group_size).std(dim=1) == 0).float().mean()),
            grad_norm_micro=upd.grad_norm_micro,
            micro_batch=upd.micro_batch,
            extra={
                "lr_effective": lr * warm,
                # 1 when a clip at clip_reference would act on this update (clipping on or off)
                "clip_would_act": float(upd.grad_norm > cfg.clip_reference),
                **_wall_times(clock.host_seconds(), generate_s),
                # seconds per part of the span (CUDA: device time from CUDA events)
                **{f"timing_s/{k}": v for k, v in clock.seconds().items()},
                "micro_batches": upd.n_micro,
                "padded_positions": upd.positions,
                "truncated_frac": float(sum(not r.finished for r in rollouts) / n_seqs),
                # |log pi_trainer - log pi_sampler| over the batch's tokens (mean, max): the
                # numerics' mismatch (HF: batched, padded sampling; vLLM: its kernels and dtype)
                "sampler_logp_diff_mean": upd.logp_diff_mean,
                "sampler_logp_diff_max": upd.logp_diff_max,
                **({"tis_weight_mean": upd.tis_weight_mean} if cfg.tis_cap > 0 else {}),
                **(
                    {**extra, "is_ratio_mean": upd.ratio_mean, "is_ratio_max": upd.ratio_max}
                    if extra is not None
                    else {}
                ),
            },
        )

    def _tensors(self, rollouts: list[Rollout]) -> tuple[torch.Tensor, ...]:
        """Right-padded ``prompt + completion`` ids; ``mask[i, t]`` marks completion targets."""
        pad = self.tokenizer.pad_token_id
        seqs = [r.prompt_ids + r.completion_ids for r in rollouts]
        width = max(map(len, seqs))
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        mask = torch.zeros((len(seqs), width - 1), dtype=torch.float32)
        for i, (s, r) in enumerate(zip(seqs, rollouts, strict=True)):
            ids[i, : len(s)] = torch.tensor(s)
            attn[i, : len(s)] = 1
            mask[i, len(r.prompt_ids) - 1 : len(s) - 1] = 1.0
        return ids[:, :-1], attn[:, :-1], ids[:, 1:], mask


def _last_step(path: Path) -> int | None:
    """The step of a JSONL log's last record (None: no log, or no record)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - (1 << 16)))
            lines = [ln for ln in fh.read().splitlines() if ln.strip()]
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return None
