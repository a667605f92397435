"""OpenRLHF 0.11.2 adapter: drive a rollout-batch schedule inside ``openrlhf.cli.train_ppo_ray``.

OpenRLHF has no callbacks, so the adapter replaces two Ray actor classes before the CLI module
runs (see :mod:`rlvr_schedule_adapters.openrlhf.actors`):

* the trainer (``PPOTrainer``, one Ray actor, the single controller) turns each step's
  ``save_logs_and_checkpoints(global_step, logs_dict, client_states)`` into a
  :class:`~rlvr_schedule.records.StepRecord`, steps the schedule and, on a switch, changes the
  rollout batch that its ``SamplesGenerator`` reads next step (``args.rollout.batch_size`` and
  ``vllm_generate_batch_size`` together, else the next batch comes out short) and the
  samples per optimizer update and LR of the policy workers; the schedule's state rides in
  ``client_states``, which OpenRLHF checkpoints and hands back on resume;
* the policy workers (``PolicyModelActor``, one per DeepSpeed rank) get the worker method
  :data:`WORKER_METHOD` that sets DeepSpeed's train batch (gradient-accumulation steps) and the
  base LR of the AdamW + LambdaLR pair together.

Run it as ``python -m rlvr_schedule_adapters.openrlhf_plugin --schedule FILE <openrlhf args>``.
This module is also the ``openrlhf`` entry point of the ``rlvr_schedule`` plugin group, so it
imports neither OpenRLHF nor Ray nor torch at import time. A failure inside the adapter is
logged and training goes on at the current stage.

Units: a record is one OpenRLHF global step (one rollout batch); ``batch`` is rollouts per
optimizer update (``args.train.batch_size``) and ``samples`` counts rollouts generated
(``rollout/num_samples`` summed). With one update per rollout batch (the GRPO default) the rollout
batch of a step equals ``batch``; otherwise the ratio is kept when the batch changes.
"""

from __future__ import annotations

import logging
import math
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr_schedule.plugins import hookimpl

__all__ = [
    "ARGS_ATTR",
    "OPENRLHF_ALIASES",
    "OPENRLHF_METRICS",
    "STATE_KEY",
    "WORKER_METHOD",
    "RolloutPlan",
    "ScheduleController",
    "apply_plan_to_args",
    "check_setup",
    "main",
    "openrlhf_cli_args",
    "patch_openrlhf",
    "plan_for_batch",
    "set_worker_batch_and_lr",
    "translate_metrics",
]

log = logging.getLogger("rlvr_schedule.openrlhf")

#: Attribute of OpenRLHF's args namespace that carries the adapter settings to every Ray actor
#: (the strategy, and with it ``args``, is pickled into each actor).
ARGS_ATTR = "rlvr_schedule"
#: Key of the adapter's state inside OpenRLHF's checkpointed ``client_states``.
STATE_KEY = "rlvr_schedule"
#: Name of the policy-worker method that sets samples per update and LR.
WORKER_METHOD = "rlvr_set_batch_and_lr"
CLI_MODULE = "openrlhf.cli.train_ppo_ray"

#: OpenRLHF's ``save_logs_and_checkpoints`` keys the adapter reads (canonical field in brackets):
#: rollout/reward_mean [reward_mean], rollout/reward_std [reward_std], rollout/response_length_mean
#: [response_length], rollout/num_samples [rollouts this step], kl [kl], ppo_kl, ppo_clip_ratio
#: [clip_frac], actor_grad_norm [grad_norm], actor_lr [lr], entropy_loss [entropy, only with an
#: entropy coefficient].
OPENRLHF_METRICS: tuple[str, ...] = (
    "rollout/reward_mean",
    "rollout/reward_std",
    "rollout/response_length_mean",
    "rollout/truncated_rate",
    "rollout/num_samples",
    "kl",
    "ppo_kl",
    "ppo_clip_ratio",
    "actor_grad_norm",
    "actor_lr",
    "entropy_loss",
    "policy_loss",
    "reward",
    "return",
    "response_length",
    "total_length",
)


# --- metrics --------------------------------------------------------------------------------------
def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    item = getattr(v, "item", None)  # torch / numpy scalars
    if callable(item):
        try:
            return _number(item())
        except (ValueError, RuntimeError, TypeError):
            return None
    return None


def translate_metrics(logs_dict: Mapping[str, Any]) -> dict[str, float]:
    """The numeric part of an OpenRLHF ``logs_dict`` (drops ``generated_samples`` and non-numbers).

    ``rollout/num_samples`` is left out: it is this step's rollout count, which the adapter turns
    into cumulative ``samples`` itself (the alias table would read it as ``batch``).
    """
    out: dict[str, float] = {}
    for k, v in logs_dict.items():
        if k in ("generated_samples", "rollout/num_samples"):
            continue
        x = _number(v)
        if x is not None:
            out[str(k)] = x
    return out


# --- batch plan -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RolloutPlan:
    """What one rollout batch means in OpenRLHF's args.

    ``train_batch`` samples per optimizer update (``args.train.batch_size``), ``rollout_prompts``
    prompts per step (``args.rollout.batch_size`` = ``vllm_generate_batch_size``); a step yields
    ``rollout_prompts x n_samples_per_prompt`` rollouts = ``updates_per_rollout x train_batch``.
    """

    train_batch: int
    rollout_prompts: int
    n_samples_per_prompt: int
    updates_per_rollout: int

    @property
    def rollouts_per_step(self) -> int:
        return self.rollout_prompts * self.n_samples_per_prompt


def _dp_world(args: Any) -> tuple[int, int]:
    """(data-parallel ranks, micro-batch size): a train batch must be a multiple of their product."""
    world = int(args.actor.num_nodes) * int(args.actor.num_gpus_per_node)
    dup = int(getattr(args.ds, "ring_attn_size", 1) or 1) * int(
        getattr(args.ds, "tensor_parallel_size", 1) or 1
    )
    return max(world // dup, 1), int(args.train.micro_batch_size)


def updates_per_rollout(args: Any) -> int:
    """Optimizer updates per rollout step as the args stand (rollouts per step / train batch)."""
    per_step = int(args.rollout.batch_size) * int(args.rollout.n_samples_per_prompt)
    tb = int(args.train.batch_size)
    return max(per_step // tb, 1) if tb > 0 else 1


def plan_for_batch(args: Any, batch: int, *, updates: int | None = None) -> RolloutPlan:
    """The args values that give ``batch`` rollouts per update; ValueError naming what does not divide.

    ``updates`` (updates per rollout step) defaults to the run's present ratio, which stays fixed.
    """
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    n = int(args.rollout.n_samples_per_prompt)
    k = updates if updates is not None else updates_per_rollout(args)
    rollouts = batch * k
    if rollouts % n:
        raise ValueError(
            f"batch {batch} x {k} update(s) per rollout step is not a whole number of prompts "
            f"(n_samples_per_prompt {n}); use BatchConstraints(group_size={n})"
        )
    if not getattr(args.train, "dynamic_batch_enable", False):
        dp, micro = _dp_world(args)
        if batch % (dp * micro):
            raise ValueError(
                f"batch {batch} does not split over {dp} data-parallel rank(s) x micro_batch_size "
                f"{micro}; use BatchConstraints(divisor={dp * micro})"
            )
    return RolloutPlan(
        train_batch=batch, rollout_prompts=rollouts // n, n_samples_per_prompt=n, updates_per_rollout=k
    )


def apply_plan_to_args(args: Any, plan: RolloutPlan) -> None:
    """Write ``plan`` into an OpenRLHF args namespace where ``SamplesGenerator`` reads it each step.

    ``rollout.batch_size`` and ``rollout.vllm_generate_batch_size`` change together (the generator
    generates ``vllm_generate_batch_size`` prompts and slices ``batch_size x n`` rollouts: a stale
    one gives a short or buffered batch); ``train.batch_size`` is what the replay buffer and the
    KL controller read.
    """
    args.rollout.batch_size = plan.rollout_prompts
    args.rollout.vllm_generate_batch_size = plan.rollout_prompts
    args.train.batch_size = plan.train_batch


def check_setup(args: Any, schedule: Any) -> list[str]:
    """Reasons this OpenRLHF set-up cannot hold ``schedule`` as written (empty: it can).

    Checked before the run starts; each reason is logged as a warning and the run goes ahead.
    """
    out: list[str] = []
    train, rollout = args.train, args.rollout
    if getattr(train, "async_enable", False):
        out.append(
            "--train.async_enable: the async trainer (PPOTrainerAsync) is not patched; the schedule "
            "is not applied"
        )
    if getattr(train, "dynamic_batch_enable", False):
        out.append(
            "--train.dynamic_batch_enable: optimizer steps follow a token budget; samples per update "
            "are set through train.batch_size only approximately"
        )
    if getattr(args.critic, "model_name_or_path", None):
        out.append("a critic (GAE) is trained: its samples per update and LR are not changed by the schedule")
    vgen = getattr(rollout, "vllm_generate_batch_size", None)
    if vgen and int(vgen) != int(rollout.batch_size):
        out.append(
            f"rollout.vllm_generate_batch_size {vgen} != rollout.batch_size {rollout.batch_size}: "
            "the adapter sets both to the scheduled prompts per step"
        )
    if getattr(args.algo, "dynamic_filtering_enable", False):
        out.append(
            "--algo.dynamic_filtering_enable: filtered prompts make steps shorter than the scheduled batch"
        )
    k = updates_per_rollout(args)
    per_step = int(rollout.batch_size) * int(rollout.n_samples_per_prompt)
    if per_step % int(train.batch_size):
        out.append(
            f"rollout.batch_size x n_samples_per_prompt = {per_step} is not a multiple of "
            f"train.batch_size {train.batch_size}"
        )
    sched_name = getattr(args.actor, "lr_scheduler", "constant")
    if sched_name not in ("constant", "constant_with_warmup"):
        out.append(
            f"--actor.lr_scheduler {sched_name}: its multiplier keeps running on the planned "
            "max_steps (computed from the initial batch); the schedule sets the base LR under it"
        )
    stages = list(getattr(schedule, "stages", ()) or ())
    cons = getattr(schedule, "constraints", None) or getattr(
        getattr(schedule, "config", None), "constraints", None
    )
    gs = getattr(cons, "group_size", None)
    if gs is not None and gs not in (1, int(rollout.n_samples_per_prompt)):
        out.append(
            f"schedule constraints group_size {gs} != rollout.n_samples_per_prompt "
            f"{rollout.n_samples_per_prompt}"
        )
    for i, st in enumerate(stages):
        try:
            plan_for_batch(args, int(st.batch), updates=k)
        except ValueError as exc:
            out.append(f"stage {i}: {exc}")
    cfg = getattr(schedule, "config", None)
    if (
        cfg is not None
        and getattr(cfg, "initial_batch", None) == "auto"
        and getattr(cfg, "critical_batch", None) is None
    ):
        out.append(
            "initial_batch auto needs the gradient-noise estimate, which needs a micro-batch gradient "
            "norm OpenRLHF does not log: the run stays at the fallback batch; give critical_batch or "
            "an integer initial_batch"
        )
    if stages and int(stages[0].batch) != int(train.batch_size):
        out.append(
            f"stage 0 batch {stages[0].batch} differs from --train.batch_size {train.batch_size}: "
            "it is applied at the start, but max_steps and the LR schedule length were planned from "
            "the command line"
        )
    return out


# --- worker side ------------------------------------------------------------------------------------
def set_worker_batch_and_lr(
    strategy: Any,
    engine: Any,
    optimizer: Any,
    scheduler: Any,
    *,
    train_batch: int | None = None,
    lr: float | None = None,
) -> dict[str, Any]:
    """Set samples per update and base LR on one policy worker (DeepSpeed rank); returns what it set.

    Samples per update: DeepSpeed's ``set_train_batch_size`` (its gradient-accumulation steps, with
    its micro-step count realigned to the new boundary), the
    strategy's ``train_batch_size`` / ``accumulated_gradient`` (OpenRLHF groups micro-batches into
    optimizer steps by it) and ``args.train.batch_size`` (dynamic batching reads it). LR: the
    scheduler's ``base_lrs``, the live ``param_groups`` and the last-LR value together, keeping the
    LambdaLR warm-up/decay multiplier (:func:`rlvr_schedule_adapters._common.scale_base_lr`).
    """
    from rlvr_schedule_adapters._common import scale_base_lr

    args = strategy.args
    out: dict[str, Any] = {}
    if train_batch is not None:
        ring = int(getattr(strategy, "ring_attn_size", 1) or 1)
        tp = int(getattr(strategy, "ds_tensor_parallel_size", 1) or 1)
        if getattr(args.train, "dynamic_batch_enable", False):
            gas = 1
        else:
            micro, world = int(strategy.micro_train_batch_size), int(strategy.world_size)
            if (train_batch * ring * tp) % (micro * world):
                raise ValueError(
                    f"train batch {train_batch} does not split over world size {world} x "
                    f"micro_batch_size {micro}"
                )
            engine.set_train_batch_size(train_batch * ring * tp)
            gas = train_batch * ring * tp // micro // world
            # DeepSpeed counts micro-steps over the whole run and steps the optimizer when
            # (micro_steps + 1) % gas == 0: realign the count to the new gas, else the first
            # update after a change is cut short (and OpenRLHF's loss windows no longer match)
            steps = getattr(engine, "micro_steps", None)
            if isinstance(steps, int):
                engine.micro_steps = -(-steps // gas) * gas
            got = int(engine.gradient_accumulation_steps())
            if got != gas:
                raise RuntimeError(f"DeepSpeed took {got} accumulation steps, expected {gas}")
        strategy.train_batch_size = train_batch
        strategy.accumulated_gradient = gas
        args.train.batch_size = train_batch
        out.update(train_batch=train_batch, accumulated_gradient=gas)
    if lr is not None:
        lrs = scale_base_lr(optimizer, scheduler, float(lr))
        adam = getattr(args.actor, "adam", None)
        if adam is not None:
            adam.lr = float(lr)
        out.update(lr=float(lr), group_lrs=lrs)
    return out


# --- trainer side -----------------------------------------------------------------------------------
_ACTIVE: ScheduleController | None = None


class ScheduleController:
    """The trainer-side state: schedule, cumulative samples, and how to apply a (batch, lr).

    ``apply_workers(train_batch, lr)`` reaches the policy workers (in the Ray trainer:
    ``actor_model_group.async_run_method`` of :data:`WORKER_METHOD`); it raises when a worker
    failed. ``args`` is the trainer's OpenRLHF namespace, mutated for ``SamplesGenerator``.
    A :class:`~rlvr_schedule.policy.TwoClockScheduler` applies its switches through the
    ``rlvr_schedule_apply_decision`` hook (this module's hookimpl forwards to the active
    controller); other schedules are applied here when ``decision.switched``.
    """

    def __init__(
        self, schedule: Any, args: Any, apply_workers: Callable[[int, float], Any], *, plugins: Any = None
    ) -> None:
        self.schedule = schedule
        self.args = args
        self.apply_workers = apply_workers
        self.plugins = plugins
        self.samples = 0
        self.updates = updates_per_rollout(args)
        self.batch = int(args.train.batch_size)
        self.lr = float(getattr(getattr(args.actor, "adam", None), "lr", math.nan))
        self.last_decision: Any = None
        self.faults: list[tuple[str, BaseException]] = []
        self._applied_in_step = False

    # -- applying --------------------------------------------------------------------------------
    def apply(self, batch: int, lr: float) -> None:
        """Workers first (they may refuse), then the trainer's args; raises on failure."""
        plan = plan_for_batch(self.args, int(batch), updates=self.updates)
        self.apply_workers(plan.train_batch, float(lr))
        apply_plan_to_args(self.args, plan)
        self.batch, self.lr = plan.train_batch, float(lr)
        self._applied_in_step = True
        log.info(
            "rlvr-schedule: %d rollouts per update (%d prompts x %d per step), lr %g",
            plan.train_batch,
            plan.rollout_prompts,
            plan.n_samples_per_prompt,
            lr,
        )

    def begin(self) -> None:
        """Apply the schedule's current stage at the start of ``fit`` (fresh or resumed run)."""
        st = self.schedule.current
        self._guard("begin", lambda: self.apply(int(st.batch), float(st.lr)))

    # -- one step ---------------------------------------------------------------------------------
    def on_step(self, global_step: int, logs_dict: Mapping[str, Any]) -> Any:
        """Record the finished step, step the schedule, apply a switch; returns the decision (or None)."""
        from rlvr_schedule.ingest import canonicalize

        n = _number(logs_dict.get("rollout/num_samples"))
        step_samples = int(n) if n is not None and n > 0 else self.batch * self.updates
        self.samples += step_samples
        lr = _number(logs_dict.get("actor_lr"))
        record = canonicalize(
            translate_metrics(logs_dict),
            step=int(global_step),
            samples=self.samples,
            batch=self.batch,
            lr=lr if lr is not None else self.lr,
        )
        record.extra.setdefault("rollouts_step", float(step_samples))
        self._applied_in_step = False
        global _ACTIVE
        prev, _ACTIVE = _ACTIVE, self
        try:
            driven = getattr(self.schedule, "plugins", None) is not None
            if not driven and self.plugins is not None:
                self.plugins.call("rlvr_schedule_on_record", record=record)
            decision = self.schedule.step(record)
            # a switch, or a stage a failed apply left behind (a static schedule has moved on)
            behind = (int(decision.batch), float(decision.lr)) != (self.batch, self.lr)
            if not self._applied_in_step and (decision.switched or behind):
                self.apply(int(decision.batch), float(decision.lr))
            if not driven and self.plugins is not None:
                self.plugins.call("rlvr_schedule_on_decision", decision=decision, record=record)
        finally:
            _ACTIVE = prev
        self.last_decision = decision
        return decision

    def step_logs(self, global_step: int, logs_dict: dict[str, Any]) -> None:
        """:meth:`on_step` with faults logged; adds ``rlvr/samples`` (cumulative rollouts),
        ``rlvr/batch`` (this update's rollouts) and ``rlvr/stage`` (the next update's stage) to the
        logs OpenRLHF writes (TensorBoard: ``train/rlvr/*``, read back through :data:`OPENRLHF_ALIASES`)."""
        batch = self.batch
        decision = self._guard("step", lambda: self.on_step(global_step, logs_dict))
        if decision is not None:
            logs_dict["rlvr/samples"] = float(self.samples)
            logs_dict["rlvr/batch"] = float(batch)
            logs_dict["rlvr/stage"] = float(decision.stage)

    def _guard(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # the run must go on at the current stage
            log.exception(
                "rlvr-schedule: %s failed; training continues at %d rollouts per update", what, self.batch
            )
            self.faults.append((what, exc))
            return None

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "version": 1,
            "samples": int(self.samples),
            "batch": int(self.batch),
            "lr": self.lr,
            "updates_per_rollout": int(self.updates),
            "schedule": self.schedule.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.schedule.load_state_dict(state["schedule"])
        self.samples = int(state["samples"])
        self.updates = int(state.get("updates_per_rollout", self.updates))

    def restore(self, checkpoint_states: Mapping[str, Any] | None) -> None:
        """Load the state saved beside OpenRLHF's ``client_states`` (no-op for a fresh run)."""
        state = (checkpoint_states or {}).get(STATE_KEY)
        if state:
            self._guard("restore", lambda: self.load_state_dict(state))


#: Extra names for reading OpenRLHF logs back (its TensorBoard logger writes ``train/<key>``; the
#: core strips one prefix, so the adapter's own ``train/rlvr/*`` scalars need naming here).
OPENRLHF_ALIASES: dict[str, str] = {"train/rlvr/samples": "samples", "train/rlvr/batch": "batch"}


@hookimpl
def rlvr_schedule_metric_aliases() -> Mapping[str, str]:
    """OpenRLHF names the core table lacks (this module is the ``openrlhf`` entry-point plugin)."""
    return dict(OPENRLHF_ALIASES)


@hookimpl
def rlvr_schedule_apply_decision(decision: Any) -> bool | None:
    """Apply a switched decision to the OpenRLHF run of this process (None when there is none)."""
    ctl = _ACTIVE
    if ctl is None:
        return None
    ctl.apply(int(decision.batch), float(decision.lr))
    return True


def make_controller(args: Any, apply_workers: Callable[[int, float], Any]) -> ScheduleController | None:
    """A controller from ``args.rlvr_schedule`` (set by the launcher), or None when it is absent."""
    settings = getattr(args, ARGS_ATTR, None)
    if not settings:
        return None
    from rlvr_schedule.plugins import get_plugin_host
    from rlvr_schedule_adapters._common import build_schedule

    host = get_plugin_host()
    me = sys.modules[__name__]
    if not host.pm.is_registered(me):
        host.register(me, name="rlvr_schedule_openrlhf")
    schedule = build_schedule(settings["schedule"], plugins=host)
    return ScheduleController(schedule, args, apply_workers, plugins=host)


# --- launcher ---------------------------------------------------------------------------------------
class _ArgsCaptured(Exception):
    def __init__(self, args: Any) -> None:
        super().__init__("captured")
        self.captured = args


def openrlhf_cli_args(argv: Sequence[str]) -> Any:
    """OpenRLHF's own parsed, hierarchized args for ``argv`` (its parser and defaults; nothing runs).

    The CLI module builds its parser under ``if __name__ == "__main__"``; it is run up to
    ``hierarchize`` and stopped there. The CLI's later fix-ups are mirrored for the fields the
    adapter reads (``vllm_generate_batch_size`` defaults to ``rollout.batch_size``).
    """
    import runpy

    from openrlhf.utils import config

    real = config.hierarchize

    def capture(ns: Any) -> Any:
        raise _ArgsCaptured(real(ns))

    old_argv = sys.argv
    config.hierarchize = capture
    sys.argv = [CLI_MODULE, *argv]
    try:
        runpy.run_module(CLI_MODULE, run_name="__main__")
    except _ArgsCaptured as got:
        args = got.captured
    finally:
        config.hierarchize = real
        sys.argv = old_argv
    if not args.rollout.vllm_generate_batch_size:
        args.rollout.vllm_generate_batch_size = args.rollout.batch_size
    return args


def patch_openrlhf(spec: Mapping[str, Any]) -> None:
    """Swap in the scheduled Ray actor classes and hand ``spec`` (a schedule config) to every actor.

    ``openrlhf.utils.get_strategy`` is wrapped so that the args it gets carry ``spec`` under
    :data:`ARGS_ATTR` (Ray pickles the strategy, and with it the args, into each actor) and so
    that :func:`check_setup` warns before the actors start.
    """
    import openrlhf.utils as outils
    from openrlhf.trainer import ppo_trainer
    from openrlhf.trainer.ray import ppo_actor

    from rlvr_schedule_adapters.openrlhf import actors

    ppo_trainer.PPOTrainer = actors.ScheduledPPOTrainer
    ppo_actor.PolicyModelActor = actors.ScheduledPolicyModelActor
    real = getattr(outils.get_strategy, "__wrapped_by_rlvr__", outils.get_strategy)

    def get_strategy(args: Any) -> Any:
        setattr(args, ARGS_ATTR, {"schedule": dict(spec)})
        try:
            from rlvr_schedule_adapters._common import build_schedule

            for reason in check_setup(args, build_schedule(dict(spec))):
                log.warning("rlvr-schedule: %s", reason)
                warnings.warn(f"rlvr-schedule: {reason}", RuntimeWarning, stacklevel=2)
        except Exception:
            log.exception("rlvr-schedule: set-up check failed")
        return real(args)

    get_strategy.__wrapped_by_rlvr__ = real  # type: ignore[attr-defined]
    outils.get_strategy = get_strategy


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m rlvr_schedule_adapters.openrlhf_plugin --schedule FILE <openrlhf args>``."""
    import argparse
    import runpy

    parser = argparse.ArgumentParser(
        prog="python -m rlvr_schedule_adapters.openrlhf_plugin",
        description="Run openrlhf.cli.train_ppo_ray under a rollout-batch schedule.",
    )
    parser.add_argument("--schedule", required=True, help="schedule file (YAML/JSON: static or two_clock)")
    ours, rest = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO)

    from rlvr_schedule_adapters._common import build_schedule, schedule_spec

    spec = schedule_spec(ours.schedule)
    build_schedule(ours.schedule)  # ConfigError (file, field) before anything starts
    patch_openrlhf(spec)
    sys.argv = [CLI_MODULE, *rest]
    runpy.run_module(CLI_MODULE, run_name="__main__", alter_sys=True)


if __name__ == "__main__":  # pragma: no cover - the launcher
    from rlvr_schedule_adapters.openrlhf_plugin import main as _main

    _main()
