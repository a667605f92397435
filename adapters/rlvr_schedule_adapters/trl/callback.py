"""TRL adapter: a ``transformers.TrainerCallback`` that runs a rollout-batch schedule inside ``GRPOTrainer``.

:class:`RlvrScheduleCallback` turns each of TRL's ``on_log`` metric dicts into a
:class:`~rlvr_schedule.records.StepRecord` (rollouts counted from the micro-steps the update really
ran: per-device batch x world x micro-steps) and hands it to a :class:`~rlvr_schedule.driver.ScheduleDriver`,
whose ``apply`` is :meth:`RlvrScheduleCallback.request`. A new stage goes into the trainer the way
TRL 1.16 is measured to honour mid-run (``docs/adapters_trl.md``):

- rollouts per update: ``steps_per_generation`` S stays fixed and ``args.gradient_accumulation_steps``
  becomes ``k x S``, set only at an update boundary where the micro-steps done in the epoch divide by
  the new count (elsewhere the next update would be cut short); until then the old stage runs on;
- LR: ``lr_scheduler.base_lrs``, the optimizer's ``param_groups`` and the scheduler's last LR together.

Where the run stands against the schedule (stage in effect, stage waiting, data position) lives in
a plain :class:`~rlvr_schedule_adapters.trl.state.TrlRunState` the callback owns; the callback binds
it to the Trainer's events and objects. The records carry the micro-batch gradient norm
(``grad_norm_micro``, taken at the first ``on_substep_end`` of each update,
:mod:`rlvr_schedule_adapters.trl.noise`), so the online
gradient-noise estimate forms. The driver's state rides in checkpoints as a transformers
``ExportableState`` (``stateful_callbacks`` of ``trainer_state.json``); with
``restore_callback_states_from_checkpoint=True`` a resumed run rebuilds the callback from it and
re-applies the stage in ``on_train_begin`` (the accumulation count is not saved by transformers); the
state also says where the data stream stood, so that the resumed run takes the uninterrupted run's
prompts (:mod:`rlvr_schedule_adapters.trl.data_order`).
Any failure inside the callback is logged and training goes on at the current stage. With
``apply=False`` (advisory) the callback decides and logs but never touches the trainer.

This module imports transformers (an ordinary subclass of ``TrainerCallback``); the package
imports it lazily, on first access to ``RlvrScheduleCallback``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

from rlvr_schedule.driver import ScheduleDriver
from rlvr_schedule.plugins import PluginHost
from rlvr_schedule.records import Decision, StepRecord
from rlvr_schedule_adapters._common import (
    ALARM_PREFIX,
    ScheduleSetupWarning,
    build_schedule,
    host_keys,
    keep_alarm_checkpoint,
    scale_base_lr,
    schedule_spec,
    split_watch,
    warn_setup,
    with_host_values,
)
from rlvr_schedule_adapters.trl.checks import check_plan
from rlvr_schedule_adapters.trl.dashboard import Dashboard
from rlvr_schedule_adapters.trl.data_order import (
    SamplerSite,
    detach_loader_seed,
    find_sampler,
    generator_state,
    restore_order,
)
from rlvr_schedule_adapters.trl.epochs import BatchUnit
from rlvr_schedule_adapters.trl.noise import MicroNorm
from rlvr_schedule_adapters.trl.state import TrlRunState

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.records import BatchSchedule

__all__ = ["RlvrScheduleCallback", "find_callback"]

log = logging.getLogger("rlvr_schedule.adapters.trl")

#: A first stage moving the LR by more than this factor from the Trainer's is a set-up warning.
LR_JUMP = 4.0

#: Plugin hosts of live callbacks by name. On resume transformers builds a new instance from
#: ``state()["args"]`` while the user's instance (same name, built in this process) is still alive:
#: the new one takes its host, so sinks and other plugins registered by hand keep working.
_HOSTS: weakref.WeakValueDictionary[str, PluginHost] = weakref.WeakValueDictionary()


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Log and swallow errors of a callback event (``strict`` re-raises): a broken schedule must not
    stop a training run, which then continues at its current stage."""

    def wrapper(self: RlvrScheduleCallback, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            fn(self, *args, **kwargs)
        except Exception as exc:
            if self.strict:
                raise
            self._errors.append(f"{fn.__name__}: {type(exc).__name__}: {exc}")
            log.exception(
                "rlvr-schedule callback failed in %s; training continues at the current stage", fn.__name__
            )
        finally:
            self.overhead_s += time.perf_counter() - t0
        return None  # TrainerCallbackHandler keeps the control object when a callback returns None

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


class RlvrScheduleCallback(TrainerCallback, ExportableState):
    """Run a rollout-batch schedule inside a TRL ``GRPOTrainer`` (a ``TrainerCallback``).

    ``RlvrScheduleCallback(schedule)`` with a YAML/JSON path, a config mapping or a schedule; pass it
    in ``callbacks=[...]``. Needs ``logging_steps=1`` for a decision after every update (else
    decisions are taken at logging steps). Rollout batches must be multiples of
    per_device_train_batch_size x world x steps_per_generation. Its state rides in checkpoints as an
    ``ExportableState`` (see the module docstring); :attr:`run` holds where the run stands.
    """

    def __init__(
        self,
        schedule: Any = None,
        *,
        plugins: PluginHost | None = None,
        strict: bool = False,
        check_setup: bool = True,
        apply: bool = True,
        measure_noise: bool = True,
        noise_meter: str = "auto",
        name: str = "default",
        from_checkpoint: bool = False,
        checkpoint_on_alarm: bool | None = None,
    ) -> None:
        """``schedule``: a YAML/JSON path, a config mapping (``schedule_from_dict``) or a schedule object.

        ``plugins``: the host whose observer hooks (sinks) see every record and decision (a new one
        with the entry-point plugins by default). ``strict``: re-raise errors (tests).
        ``check_setup``: warn at train start when the data plan cannot hold the schedule.
        ``apply``: False runs in advisory mode: decide, forecast and log every decision, change nothing.
        ``measure_noise``: record the micro-batch gradient norm (needs gradient accumulation >= 2).
        ``noise_meter``: how (:class:`~rlvr_schedule_adapters.trl.noise.MicroNorm`): "grad" reads the
        accumulated ``.grad`` after the first micro-step; "hooks" sums what tensor hooks see in the
        first backward (DeepSpeed ZeRO, FSDP); "auto" (default) takes hooks when the run is sharded
        or ``.grad`` turns out empty.
        ``name``: a callback restored from a checkpoint (``from_checkpoint=True``, set in the saved args)
        takes the plugin host of the live callback of the same name (the one given to the resumed trainer).
        ``checkpoint_on_alarm``: at a raised alarm (a failure, a raised warning, the failure clock at
        its lower bound) ask the Trainer for a checkpoint (``control.should_save``) and keep it apart
        from ``save_total_limit`` as ``alarm-checkpoint-<step>`` with ``alarm.json``; None: the
        schedule file's ``watch.checkpoint_on_alarm``, else on in advisory mode only.
        """
        if schedule is None:
            raise TypeError("RlvrScheduleCallback needs a schedule (a path, a config mapping or a schedule)")
        self.strict = strict
        self.check_setup = check_setup
        self.advisory = not apply
        self.measure_noise = measure_noise
        self.micro_norm = MicroNorm(noise_meter)
        self.name = str(name)
        if plugins is None and from_checkpoint:
            plugins = _HOSTS.get(self.name)
        self.host = plugins if plugins is not None else PluginHost(strict=strict)
        _HOSTS[self.name] = self.host
        body, watch = split_watch(schedule)
        if checkpoint_on_alarm is None:
            checkpoint_on_alarm = watch.get("checkpoint_on_alarm")
        self.checkpoint_on_alarm = checkpoint_on_alarm
        # ``host`` values (the Trainer's batch and LR) are filled in at train start; until then the
        # schedule is built at the smallest runnable batch and LR 1 (never applied)
        body, self._host_keys = host_keys(body)
        self._host_body, self._watch_group = (body, watch) if self._host_keys else (None, watch)
        if self._host_keys:
            cons = body.get("constraints") if isinstance(body.get("constraints"), Mapping) else {}
            low = int(cons.get("group_size") or 1) * int(cons.get("divisor") or 1)
            body = with_host_values(
                body, self._host_keys, batch=max(low, int(cons.get("min_batch") or 1)), lr=1.0
            )
        self.schedule: BatchSchedule = build_schedule(body, plugins=self.host)
        self.driver = ScheduleDriver(
            self.schedule,
            self.request,
            self.host,
            advisory=self.advisory,
            strict=strict,
            save=self._save_at_alarm,
            checkpoint_on_alarm=checkpoint_on_alarm,
            announce=self._console,
        )
        self._spec = schedule_spec(schedule)
        from rlvr_schedule.ingest.aliases import collect_aliases

        self._aliases = collect_aliases(self.host)
        self.run = TrlRunState()
        self.dashboard = Dashboard()
        self.decisions: list[Decision] = []
        self.grid_notes: list[str] = []  # what publishing the host's grid found (set-up warnings)
        self.overhead_s = 0.0
        self._errors: list[str] = []
        self._warned_spec = False
        self._bound: dict[str, Any] = {}  # the Trainer's objects of this train() call (not saved)
        self._site: SamplerSite | None = None  # the train sampler (its shuffle state rides in checkpoints)
        self._reattach_seed: Callable[[], None] | None = None  # undo of data_order.detach_loader_seed
        self._control: Any = None  # the Trainer's control of the event being handled (on_log)
        self._alarm_saves: dict[int, dict[str, Any]] = {}  # step -> what its alarm checkpoint holds

    # --- the run's counters, kept by the driver ----------------------------------------------------
    @property
    def samples(self) -> int:
        """Rollouts consumed, the last update included."""
        return self.driver.samples

    @property
    def wanted(self) -> tuple[int, float] | None:
        """The stage the schedule asked for (the driver's stage in effect; the Trainer may still wait
        for an aligned boundary, see ``run.pending``)."""
        return self.driver.in_effect

    @property
    def errors(self) -> list[str]:
        """Every fault of this run: the callback's own and the driver's (schedule, apply, plugins)."""
        return self._errors + [
            f"{where}: {type(exc).__name__}: {exc}" for _, where, exc in self.driver.faults
        ]

    @property
    def _args(self) -> Any:
        return self._bound.get("args")

    # --- ExportableState ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """``{"args", "attributes"}`` for ``trainer_state.json``: the rebuild spec and the run state."""
        if self._spec is None and not self._warned_spec:
            self._warned_spec = True
            log.warning(
                "the schedule %r has no config form (to_dict): a run resumed from a checkpoint in "
                "another process cannot rebuild it",
                type(self.schedule).__name__,
            )
        return {
            "args": {
                "schedule": self._spec,
                "strict": self.strict,
                "check_setup": self.check_setup,
                "apply": not self.advisory,
                "measure_noise": self.measure_noise,
                "noise_meter": self.micro_norm.mode,
                "name": self.name,
                "from_checkpoint": True,
                "checkpoint_on_alarm": self.checkpoint_on_alarm,
            },
            "attributes": {"rlvr_state": self.rlvr_state},
        }

    @property
    def rlvr_state(self) -> dict[str, Any]:
        """The JSON-able run state saved in checkpoints: the driver's (schedule, samples, stage asked
        for) and :attr:`run`'s (stage in effect and waiting, where the data stream stands: micro-steps
        done in the epoch and the train sampler's shuffle state when the epoch began,
        :mod:`~rlvr_schedule_adapters.trl.data_order`)."""
        rng_now = generator_state(self._site.sampler) if self._site is not None else None
        return self.run.state_dict(self.driver.state_dict(), rng_now)

    @rlvr_state.setter
    def rlvr_state(self, state: Mapping[str, Any]) -> None:
        self.driver.load_state_dict(state["driver"])
        self._want(self.driver.resume_target)  # on_train_begin re-applies the stage itself
        self.run.load_state_dict(state)

    def _want(self, stage: tuple[int, float] | None) -> None:
        self.driver.in_effect = None if stage is None else (int(stage[0]), float(stage[1]))

    # --- applying decisions ------------------------------------------------------------------------
    def request(self, batch: int, lr: float) -> bool:
        """The driver's ``apply``: ask for ``batch`` rollouts per update at base LR ``lr``, put in effect
        now if the boundary is aligned, else at the next aligned one.

        Raises ValueError when ``batch`` is not runnable (not a multiple of per-device batch x world x
        ``steps_per_generation``); the driver keeps the current stage.
        """
        if self.run.unit is not None:
            self.run.unit.accumulation(batch)  # validate before accepting
        self.run.pending = (int(batch), float(lr))
        self._want(self.run.pending)
        log.info("rlvr-schedule: stage %s rollouts/update, lr %g requested", batch, lr)
        self._try_apply()
        return True

    def _try_apply(self) -> None:
        args = self._args
        ready = None if args is None else self.run.ready(int(args.gradient_accumulation_steps))
        if ready is not None:
            self._apply(*ready)
            self.run.pending = None

    def _apply(self, batch: int, lr: float, ga: int | None = None) -> None:
        """Put ``batch`` rollouts per update and base LR ``lr`` in effect in the trainer now."""
        run, args = self.run, self._args
        assert run.unit is not None and args is not None
        ga = run.unit.accumulation(batch) if ga is None else ga
        if run.applied is None or run.applied[1] != lr:
            scale_base_lr(self._bound.get("optimizer"), self._bound.get("lr_scheduler"), lr)
        args.gradient_accumulation_steps = ga
        run.applied = (batch, lr)
        log.info(
            "rlvr-schedule: applied %s rollouts/update (gradient_accumulation_steps=%s), lr %g", batch, ga, lr
        )

    # --- trainer events ------------------------------------------------------------------------------
    @_guarded
    def on_train_begin(
        self,
        args: Any,
        state: Any,
        control: Any,
        optimizer: Any = None,
        lr_scheduler: Any = None,
        train_dataloader: Any = None,
        **kwargs: Any,
    ) -> None:
        """Bind to the trainer, re-apply the saved (or first) stage, and check the data plan."""
        run = self.run
        self._bound = {
            "args": args,
            "optimizer": optimizer,
            "lr_scheduler": lr_scheduler,
            "loader": train_dataloader,
            "local_zero": bool(getattr(state, "is_local_process_zero", True)),
        }
        self.dashboard.open(args, state)
        if not self.advisory:
            self._check_lr_scheduler(args)
        s = int(getattr(args, "steps_per_generation", None) or args.gradient_accumulation_steps)
        ga0 = int(args.gradient_accumulation_steps)
        if ga0 % s:
            warnings.warn(
                f"gradient_accumulation_steps {ga0} is not a multiple of steps_per_generation {s}: "
                "updates and generations are misaligned",
                ScheduleSetupWarning,
                stacklevel=2,
            )
        micro_per_epoch = (
            len(train_dataloader)
            if train_dataloader is not None and hasattr(train_dataloader, "__len__")
            else None
        )
        unit = BatchUnit(
            per_step=int(args.per_device_train_batch_size) * int(args.world_size), accumulation_multiple=s
        )
        run.begin(unit, micro_per_epoch)
        fresh = not (state.global_step > 0 and run.last_step > 0)
        host = (int(unit.per_step) * ga0, float(args.learning_rate))
        if self._host_keys and fresh:
            self._adopt_host(*host)
        self._publish_grid(args)
        if self.measure_noise:
            self.micro_norm.setup(args, kwargs.get("model"))
        if getattr(args, "num_iterations", 1) != 1:
            log.warning(
                "num_iterations=%s: each rollout is used %s times; samples count completions per update",
                args.num_iterations,
                args.num_iterations,
            )
        self._site = find_sampler(train_dataloader) if train_dataloader is not None else None
        if state.global_step == 0 and run.last_step > 0:
            log.warning(
                "the callback is reused for a new run: its counters restart, but the schedule keeps its "
                "state (stage %s); build a new callback per run",
                getattr(self.schedule, "index", "?"),
            )
            self.driver.samples = 0
            run.forget_run()
        run.start_samples = self.samples
        restored = state.global_step > 0 and run.last_step > 0
        if state.global_step > 0:
            run.resume_position(
                int(state.global_step), ga0, ignore_data_skip=bool(getattr(args, "ignore_data_skip", False))
            )
            if restored and not self.advisory:
                self._restore_data_order(args)
            if not restored:
                log.warning(
                    "resumed at step %s without saved schedule state (set "
                    "restore_callback_states_from_checkpoint=True): the schedule starts over",
                    state.global_step,
                )
        # GA is not checkpointed (args hold the initial value again) and the LR is re-applied too
        # (idempotent when scheduler.pt brought it back): nothing counts as in effect yet
        in_effect, run.applied = run.applied, None
        if restored and in_effect is not None and not self.advisory:
            # the stage that ran the saved updates runs the next one too (the uninterrupted run did not
            # stop between them); a stage still waiting for its boundary keeps waiting, as it would have
            pending, wanted = run.pending, self.wanted
            self._apply(*in_effect)
            run.pending = pending
            self._want(wanted)
            self._try_apply()
            if run.offset:
                self._check_first_micro()
        elif not self.advisory:
            target = (
                run.pending or self.wanted or (self.schedule.current.batch, float(self.schedule.current.lr))
            )
            if fresh:
                self._say_first_stage(host, (self.driver.snap(int(target[0])), float(target[1])))
            self.request(*target)
        elif fresh:
            first = (self.driver.snap(self.schedule.current.batch), float(self.schedule.current.lr))
            self._say_first_stage(host, first)
        if self.check_setup and micro_per_epoch and not self.advisory:  # advisory: the plan is the user's
            self._check_plan(state, micro_per_epoch, ga0)

    def _adopt_host(self, batch: int, lr: float) -> None:
        """Build the schedule with the Trainer's batch and LR where it says ``host``."""
        from rlvr_schedule.clocks.failure.alarms import CollapseWatch

        assert self._host_body is not None
        body = with_host_values(self._host_body, self._host_keys, batch=batch, lr=lr)
        self.schedule = build_schedule(body, plugins=self.host)
        self.driver.schedule = self.schedule
        if self.driver.watch is not None:
            self.driver.watch = CollapseWatch(clock=getattr(self.schedule, "clock", None))
        self._spec = {**body, "watch": self._watch_group} if self._watch_group else body
        self._host_keys, self._host_body = [], None

    def _say_first_stage(self, host: tuple[int, float], first: tuple[int, float]) -> None:
        """The schedule's first stage where it differs from the Trainer's set-up: one console line (in
        advisory mode, what it would do), and a set-up warning when it moves the LR more than
        :data:`LR_JUMP` x (a schedule written for another model or LR)."""
        (hb, hlr), (b, lr) = host, first
        if (hb, f"{hlr:.4g}") == (b, f"{lr:.4g}"):
            return
        mode = " (advisory, not applied)" if self.advisory else ""
        from rlvr_schedule._format import plain_reason

        why = plain_reason(getattr(self.schedule.current, "reason", "") or "the schedule's first stage")
        moves = ([f"batch {hb} -> {b} rollouts/update"] if hb != b else []) + (
            [f"LR {hlr:.3g} -> {lr:.3g}"] if f"{hlr:.4g}" != f"{lr:.4g}" else []
        )
        self._console(f"rlvr-schedule: from update 1, {' and '.join(moves)}{mode}: {why}")
        ratio = max(lr / hlr, hlr / lr) if hlr > 0 and lr > 0 else 1.0
        if ratio > LR_JUMP:
            warn_setup(
                [
                    f"the schedule's first LR {lr:.3g} is {ratio:,.0f}x "
                    f"{'below' if lr < hlr else 'above'} the Trainer's learning_rate {hlr:.3g}: a schedule "
                    "written for another model or LR? Give its base_lr (or base_lr: host) for this run"
                ],
                framework="TRL",
                stacklevel=5,
            )

    def _check_lr_scheduler(self, args: Any) -> None:
        """The Trainer's LR scheduler multiplies the schedule's LR by its own factor each update: any
        other than a constant one (after its warm-up) decays the LR the schedule holds."""
        kind = getattr(args, "lr_scheduler_type", "constant")
        kind = str(getattr(kind, "value", kind))
        if kind not in ("constant", "constant_with_warmup"):
            warn_setup(
                [
                    f"lr_scheduler_type={kind!r} scales the LR the schedule sets for each stage by its "
                    "own decaying factor, so the run does not hold the schedule's LR; set "
                    "lr_scheduler_type='constant' (or 'constant_with_warmup')"
                ],
                framework="TRL",
                stacklevel=5,
            )

    # --- console and checkpoints at an alarm -------------------------------------------------------
    def _console(self, line: str) -> None:
        """The driver's one line per switch or alarm: written above the Trainer's progress bar, as
        the Trainer prints its own logs (one process per node)."""
        if self._bound.get("local_zero", True):
            from tqdm.auto import tqdm

            tqdm.write(line, file=sys.stderr)

    def _save_at_alarm(self, alarms: list[Any], record: StepRecord) -> str | None:
        """The driver's ``save``: the Trainer saves ``checkpoint-<step>`` right after this log
        (``control.should_save``); :meth:`on_save` keeps it apart from the rotation."""
        if self._control is None or self._args is None:
            return None
        self._keep_named(alarms, record)
        self._control.should_save = True
        self._alarm_saves[int(record.step)] = {
            "step": int(record.step),
            "samples": int(record.samples),
            "batch": int(record.batch),
            "alarms": [a.to_dict() for a in alarms],
        }
        return os.path.join(str(self._args.output_dir), f"{ALARM_PREFIX}checkpoint-{int(record.step)}")

    def _keep_named(self, alarms: list[Any], record: StepRecord) -> None:
        """A raised failure names the newest checkpoint saved before its onset (the state from
        before the collapse): keep it apart from ``save_total_limit`` too, as ``alarm-checkpoint-N``."""
        if not getattr(self._args, "should_save", True):  # the main process keeps checkpoints
            return
        for a in alarms:
            path = getattr(a, "checkpoint", None)
            if a.kind != "failure" or not path or not os.path.isdir(path):
                continue
            info = {
                "kept_for": a.to_dict(),
                "why": "the newest checkpoint saved before the failure's onset",
                "raised_at_step": int(record.step),
            }
            kept = keep_alarm_checkpoint(path, info)
            self._console(f"rlvr-schedule: kept {path} as {kept} (saved before the failure's onset)")

    @_guarded
    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """A checkpoint saved at an alarm is kept apart as ``alarm-checkpoint-<step>``."""
        info = self._alarm_saves.pop(int(state.global_step), None)
        src = os.path.join(str(args.output_dir), f"checkpoint-{int(state.global_step)}")
        self.driver.note_checkpoint(src, int(state.global_step))  # a failure names the one before it
        if info is None or not getattr(state, "is_world_process_zero", True):
            return
        keep_alarm_checkpoint(src, info)

    # --- set-up checks -----------------------------------------------------------------------------
    def _publish_grid(self, args: Any) -> None:
        """Tell the schedule which batches this trainer runs (per-device batch x world x
        steps_per_generation, whole groups of ``num_generations``); a conflicting user divisor, and a
        stage off the grid (a resume at another world size), are set-up warnings and get snapped."""
        from rlvr_schedule.policy.constraints import BatchConstraints

        unit = self.run.unit
        assert unit is not None
        group = getattr(args, "num_generations", None)
        grid = BatchConstraints(
            group_size=int(group) if isinstance(group, int) and group > 0 else 1, divisor=unit.multiple
        )
        notes = self.driver.set_host_grid(grid)
        for name in ("applied", "pending"):
            pair = getattr(self.run, name)
            if pair is not None and not self.driver.grid.is_valid(pair[0]):  # type: ignore[union-attr]
                batch = self.driver.snap(pair[0])
                notes.append(
                    f"the saved stage {name} ({pair[0]} rollouts) is off this trainer's grid (multiples of "
                    f"{unit.multiple}: per_device_train_batch_size {args.per_device_train_batch_size} x "
                    f"world {args.world_size} x steps_per_generation {unit.accumulation_multiple}): "
                    f"snapped to {batch}"
                )
                setattr(self.run, name, (batch, pair[1]))
        self.grid_notes = notes
        warn_setup(notes, framework="TRL", stacklevel=5)

    def _check_plan(self, state: Any, micro_per_epoch: int, ga0: int) -> None:
        unit = self.run.unit
        assert unit is not None
        epochs = max(
            int(state.num_train_epochs) - int(state.global_step) // max(-(-micro_per_epoch // ga0), 1), 1
        )
        reasons = check_plan(
            self.schedule,
            unit,
            remaining=int(state.max_steps) - int(state.global_step),
            samples=self.samples,
            micro_per_epoch=micro_per_epoch,
            ga0=ga0,
            epochs=epochs,
            # B* tracking can move the batch only when the records carry the noise estimate's input
            noise_estimate=(self.measure_noise and ga0 >= 2)
            or getattr(getattr(self.schedule, "noise", None), "n_updates", 0) > 0,
            snap=self.driver.snap,
        )
        warn_setup(reasons, framework="TRL", stacklevel=4)

    # --- resume ------------------------------------------------------------------------------------
    def _restore_data_order(self, args: Any) -> None:
        """Make the resumed run take the prompts the uninterrupted run took next: the sampler's saved
        shuffle state back, and the Trainer's skip moved to the saved position. Not with
        ``ignore_data_skip`` (the user asked for the epoch's data from its start)."""
        if getattr(args, "ignore_data_skip", False):
            return
        if self._site is None:
            log.warning(
                "resume: no index sampler behind the train dataloader (an iterable dataset?): the "
                "prompts after the resume are the Trainer's choice and may differ from the run's"
            )
            return
        run = self.run
        try:
            moved = restore_order(
                self._site, rng=run.saved_sampler_rng, trainer_pos=run.trainer_pos, true_pos=run.epoch_pos
            )
        except Exception as exc:  # the stage must still be re-applied (the rest of on_train_begin)
            if self.strict:
                raise
            self._errors.append(f"on_train_begin: data order: {type(exc).__name__}: {exc}")
            log.exception("resume: the data order could not be restored; the Trainer's own skip applies")
            return
        loader = self._bound.get("loader")
        if moved and run.trainer_pos == 0 and loader is not None:
            # the Trainer loads the RNG states before making the epoch's iterator (the run stood
            # after it): that iterator must not draw its worker seed from the global RNG
            self._reattach_seed = detach_loader_seed(loader, int(getattr(args, "seed", 0) or 0))
        if moved:
            log.info(
                "resume: the data stream is moved from the Trainer's micro-step %s to the run's %s",
                run.trainer_pos,
                run.epoch_pos,
            )

    def _check_first_micro(self) -> None:
        """The first micro-step of an update is tested with the stage's own value: warn if it divides."""
        count = self.run.first_micro_cut(int(self._args.gradient_accumulation_steps))
        if count is not None:
            log.warning(
                "resume: with steps_per_generation=1 the Trainer ends the next update after one "
                "micro-step (count %s); updates stay whole from the next epoch",
                count,
            )

    # --- the training loop's events ----------------------------------------------------------------
    @_guarded
    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.run.epoch_begins(generator_state(self._site.sampler) if self._site is not None else None)
        self._try_apply()

    @_guarded
    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.micro_norm.close()
        self.dashboard.close()

    @_guarded
    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._reattach_seed is not None:  # later epochs draw from the global RNG, as the run did
            self._reattach_seed()
            self._reattach_seed = None
        if self.run.offset:  # a new epoch: the Trainer's count and the callback's agree again
            self.run.offset = 0
            if self._args is not None:
                self._args.gradient_accumulation_steps = self.run.accumulation(
                    self._args.gradient_accumulation_steps
                )

    def on_substep_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        run = self.run
        if run.micro == 0 and self.measure_noise and model is not None:
            self._take_micro_norm(args, model)
        run.micro += 1  # hot path: no guard needed for an increment
        if run.offset:
            # the Trainer's count is off by the offset: keep the update whole (``TrlRunState.steering``)
            args.gradient_accumulation_steps = run.steering(args.gradient_accumulation_steps)

    @_guarded
    def _take_micro_norm(self, args: Any, model: Any) -> None:
        self.micro_norm.take(args, model)

    @_guarded
    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Count the update just done from its micro-steps; apply a waiting stage if now aligned."""
        run = self.run
        run.update_done()
        self.micro_norm.next_update()
        if run.unit is not None:
            self.driver.consume(run.last_batch)
        self._try_apply()
        if run.offset and self._args is not None:
            self._args.gradient_accumulation_steps = run.accumulation(self._args.gradient_accumulation_steps)
            self._check_first_micro()

    @_guarded
    def on_log(
        self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """A training log after an update: record -> schedule -> (switch) -> host, and the
        schedule's state into the user's trackers."""
        run = self.run
        if not logs or state.global_step <= run.last_step or run.last_batch is None:
            return
        if "train_runtime" in logs or any(k[:5] == "eval_" for k in map(str, logs)):
            return
        run.last_step = int(state.global_step)
        record = self.record(logs, step=run.last_step)
        self._control = control
        try:
            self.feed(record)
        finally:
            self._control = None
        if self.dashboard.active:
            self.dashboard.write(self.driver.scalars(), int(state.global_step))

    def record(self, logs: Mapping[str, Any], *, step: int) -> StepRecord:
        """TRL's log dict as a canonical record (samples and batch measured, not logged)."""
        from rlvr_schedule.ingest import canonicalize

        norm = self.micro_norm.read() if self.measure_noise else float("nan")
        if norm == norm and "grad_norm_micro" not in logs:  # not NaN
            logs = {**logs, "grad_norm_micro": norm, "micro_batch": self.micro_norm.micro_batch}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NaN metrics (a reward returned None) stay NaN, no warning spam
            return canonicalize(
                logs, step=step, samples=self.samples, batch=self.run.last_batch, aliases=self._aliases
            )

    def feed(self, record: StepRecord) -> Decision:
        """One turn of the driver's loop (observers, schedule, :meth:`request` on a new stage)."""
        decision = self.driver.observe(record)
        self.decisions.append(decision)
        return decision


def find_callback(trainer: Any) -> Any:
    """The schedule callback a trainer runs (after a checkpoint restore it is a new instance)."""
    for cb in trainer.callback_handler.callbacks:
        if isinstance(cb, RlvrScheduleCallback):
            return cb
    return None
