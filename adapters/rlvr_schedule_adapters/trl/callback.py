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

The records carry the micro-batch gradient norm (``grad_norm_micro``, taken at the first
``on_substep_end`` of each update, :mod:`rlvr_schedule_adapters.trl.noise`), so the online
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
import math
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
    keep_alarm_checkpoint,
    scale_base_lr,
    schedule_spec,
    split_watch,
    warn_setup,
)
from rlvr_schedule_adapters.trl.checks import check_plan
from rlvr_schedule_adapters.trl.data_order import (
    SamplerSite,
    detach_loader_seed,
    find_sampler,
    generator_state,
    restore_order,
)
from rlvr_schedule_adapters.trl.epochs import BatchUnit
from rlvr_schedule_adapters.trl.noise import grad_sq_norm, mean_over_ranks, micro_meter

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.records import BatchSchedule

__all__ = ["RlvrScheduleCallback", "find_callback"]

log = logging.getLogger("rlvr_schedule.adapters.trl")

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
    ``ExportableState`` (see the module docstring).
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
        ``noise_meter``: how: "grad" reads the accumulated ``.grad`` after the first micro-step (one
        fused norm); "hooks" sums what tensor hooks see in the first backward (DeepSpeed ZeRO and FSDP
        leave ``.grad`` empty there); "auto" (default) takes hooks when the run is sharded or
        ``.grad`` turns out empty, else ``.grad``.
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
        if noise_meter not in ("auto", "grad", "hooks"):
            raise ValueError(f"noise_meter must be 'auto', 'grad' or 'hooks', got {noise_meter!r}")
        self.noise_meter = noise_meter
        self.name = str(name)
        if plugins is None and from_checkpoint:
            plugins = _HOSTS.get(self.name)
        self.host = plugins if plugins is not None else PluginHost(strict=strict)
        _HOSTS[self.name] = self.host
        body, watch = split_watch(schedule)
        if checkpoint_on_alarm is None:
            checkpoint_on_alarm = watch.get("checkpoint_on_alarm")
        self.checkpoint_on_alarm = checkpoint_on_alarm
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
        # progress of the run (the rollout count and the stage asked for live in the driver)
        self.start_samples = 0  # rollouts consumed when this train() call began (resume)
        self.last_batch: int | None = None  # rollouts of the last update (measured micro-steps)
        self.last_step = 0  # global step of the last record fed
        self.applied: tuple[int, float] | None = None  # stage in effect in the trainer
        self.pending: tuple[int, float] | None = None  # asked for, waiting for an aligned boundary
        self._errors: list[str] = []
        self.decisions: list[Decision] = []
        self.overhead_s = 0.0
        # trainer-side state (not saved)
        self._args: Any = None
        self._optimizer: Any = None
        self._lr_scheduler: Any = None
        self._unit: BatchUnit | None = None
        self._micro = 0  # micro-steps of the update in progress
        self._epoch_pos = 0  # micro-steps done in the current epoch
        self._resume_pos: int | None = None
        self._saved_epoch_pos: int | None = None
        self._saved_sampler_rng: str | None = None
        self._site: SamplerSite | None = None  # the train sampler (its shuffle state rides in checkpoints)
        self._epoch_rng: str | None = None  # the sampler's generator state when the epoch began
        self._micro_per_epoch: int | None = None
        self._offset = 0  # micro-steps done in this epoch minus the Trainer's count of them (resume)
        self._trainer_pos = 0  # the Trainer's count of them at the resume
        self._loader: Any = None  # the train dataloader (on_train_begin)
        self._reattach_seed: Callable[[], None] | None = None  # undo of data_order.detach_loader_seed
        self._warned_spec = False
        self._micro_sq: Any = None  # squared norm of the last update's first micro-batch (a device tensor)
        self._grad_norm_micro = math.nan  # its norm, read when the update's metrics are logged
        self._micro_batch: int | None = None
        self._meter: Any = None  # the hook meter (sharded runs, noise_meter="hooks")
        self.grid_notes: list[str] = []  # what publishing the host's grid found (set-up warnings)
        self._control: Any = None  # the Trainer's control of the event being handled (on_log)
        self._alarm_saves: dict[int, dict[str, Any]] = {}  # step -> what its alarm checkpoint holds
        self._local_zero = True  # the console line is printed by one process per node
        self._board: Any = None  # the TensorBoard writer of the schedule's state (report_to)

    # --- the run's counters, kept by the driver ----------------------------------------------------
    @property
    def samples(self) -> int:
        """Rollouts consumed, the last update included."""
        return self.driver.samples

    @samples.setter
    def samples(self, value: int) -> None:
        self.driver.samples = int(value)

    @property
    def wanted(self) -> tuple[int, float] | None:
        """The stage the schedule asked for (the driver's stage in effect; the trainer may still wait
        for an aligned boundary, see :attr:`pending`)."""
        return self.driver.in_effect

    @wanted.setter
    def wanted(self, value: tuple[int, float] | None) -> None:
        self.driver.in_effect = None if value is None else (int(value[0]), float(value[1]))

    @property
    def errors(self) -> list[str]:
        """Every fault of this run: the callback's own and the driver's (schedule, apply, plugins)."""
        return self._errors + [
            f"{where}: {type(exc).__name__}: {exc}" for _, where, exc in self.driver.faults
        ]

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
                "noise_meter": self.noise_meter,
                "name": self.name,
                "from_checkpoint": True,
                "checkpoint_on_alarm": self.checkpoint_on_alarm,
            },
            "attributes": {"rlvr_state": self.rlvr_state},
        }

    @property
    def rlvr_state(self) -> dict[str, Any]:
        """The JSON-able run state (the driver's: schedule, samples, stage asked for; and the stage in
        effect in the trainer) saved in checkpoints, with where the data stream stands: micro-steps done
        in the epoch and the train sampler's shuffle state when the epoch began
        (:mod:`~rlvr_schedule_adapters.trl.data_order`)."""
        epoch_pos, rng = self._epoch_pos, self._epoch_rng
        if self._micro_per_epoch and epoch_pos >= self._micro_per_epoch and self._site is not None:
            # saved after the epoch's last update: the next epoch starts from the generator as it is now
            epoch_pos, rng = 0, generator_state(self._site.sampler)
        return {
            "version": 2,
            "driver": self.driver.state_dict(),
            "last_batch": self.last_batch,
            "last_step": self.last_step,
            "applied": list(self.applied) if self.applied else None,
            "pending": list(self.pending) if self.pending else None,
            "epoch_pos": epoch_pos,
            "sampler_rng": rng,
        }

    @rlvr_state.setter
    def rlvr_state(self, state: Mapping[str, Any]) -> None:
        self.driver.load_state_dict(state["driver"])
        self.wanted = self.driver.resume_target  # on_train_begin re-applies the stage itself
        self.last_batch = state.get("last_batch")
        self.last_step = int(state.get("last_step", 0))

        def pair(v: Any) -> tuple[int, float] | None:
            return (int(v[0]), float(v[1])) if v else None

        self.applied, self.pending = pair(state.get("applied")), pair(state.get("pending"))
        self._saved_epoch_pos = state.get("epoch_pos")
        self._saved_sampler_rng = state.get("sampler_rng")

    # --- applying decisions ------------------------------------------------------------------------
    def request(self, batch: int, lr: float) -> bool:
        """The driver's ``apply``: ask for ``batch`` rollouts per update at base LR ``lr``, put in effect
        now if the boundary is aligned, else at the next aligned one.

        Raises ValueError when ``batch`` is not runnable (not a multiple of per-device batch x world x
        ``steps_per_generation``); the driver keeps the current stage.
        """
        if self._unit is not None:
            self._unit.accumulation(batch)  # validate before accepting
        self.wanted = self.pending = (int(batch), float(lr))
        log.info("rlvr-schedule: stage %s rollouts/update, lr %g requested", batch, lr)
        self._try_apply()
        return True

    def _try_apply(self) -> None:
        if self.pending is None or self._args is None or self._unit is None:
            return
        batch, lr = self.pending
        ga = self._unit.accumulation(batch)
        if ga != self._stage_accumulation() and self._epoch_pos % ga:
            return  # the next update would be cut short: wait for an aligned boundary
        self._apply(batch, lr, ga)
        self.pending = None

    def _apply(self, batch: int, lr: float, ga: int | None = None) -> None:
        """Put ``batch`` rollouts per update and base LR ``lr`` in effect in the trainer now."""
        assert self._unit is not None and self._args is not None
        ga = self._unit.accumulation(batch) if ga is None else ga
        if self.applied is None or self.applied[1] != lr:
            scale_base_lr(self._optimizer, self._lr_scheduler, lr)
        self._args.gradient_accumulation_steps = ga
        self.applied = (batch, lr)
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
        self._args, self._optimizer, self._lr_scheduler = args, optimizer, lr_scheduler
        self._local_zero = bool(getattr(state, "is_local_process_zero", True))
        self._open_board(args, state)
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
        self._unit = BatchUnit(
            per_step=int(args.per_device_train_batch_size) * int(args.world_size), accumulation_multiple=s
        )
        self._publish_grid(args)
        self._setup_meter(args, kwargs.get("model"))
        if getattr(args, "num_iterations", 1) != 1:
            log.warning(
                "num_iterations=%s: each rollout is used %s times; samples count completions per update",
                args.num_iterations,
                args.num_iterations,
            )
        micro_per_epoch = (
            len(train_dataloader)
            if train_dataloader is not None and hasattr(train_dataloader, "__len__")
            else None
        )
        self._micro = 0
        self._micro_per_epoch = micro_per_epoch
        self._site = find_sampler(train_dataloader) if train_dataloader is not None else None
        self._loader = train_dataloader
        if state.global_step == 0 and self.last_step > 0:
            log.warning(
                "the callback is reused for a new run: its counters restart, but the schedule keeps its "
                "state (stage %s); build a new callback per run",
                getattr(self.schedule, "index", "?"),
            )
            self.samples, self.last_step, self.last_batch = 0, 0, None
            self.pending = None
        self.start_samples = self.samples
        restored = state.global_step > 0 and self.last_step > 0
        if state.global_step > 0:
            self._resume_pos = self._resume_position(args, state, micro_per_epoch, ga0)
            self._epoch_pos = self._resume_pos
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
        in_effect, self.applied = self.applied, None
        if restored and in_effect is not None and not self.advisory:
            # the stage that ran the saved updates runs the next one too (the uninterrupted run did not
            # stop between them); a stage still waiting for its boundary keeps waiting, as it would have
            pending, wanted = self.pending, self.wanted
            self._apply(*in_effect)
            self.pending, self.wanted = pending, wanted
            self._try_apply()
            if self._offset:
                self._check_first_micro()
        elif not self.advisory:
            target = (
                self.pending or self.wanted or (self.schedule.current.batch, float(self.schedule.current.lr))
            )
            self.request(*target)
        if self.check_setup and micro_per_epoch and not self.advisory:  # advisory: the plan is the user's
            self._check_plan(state, micro_per_epoch, ga0)

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

    # --- console, dashboard and checkpoints at an alarm ----------------------------------------------
    def _console(self, line: str) -> None:
        """The driver's one line per switch or alarm: written above the Trainer's progress bar, as
        the Trainer prints its own logs (one process per node)."""
        if self._local_zero:
            from tqdm.auto import tqdm

            tqdm.write(line, file=sys.stderr)

    def _open_board(self, args: Any, state: Any) -> None:
        """With ``report_to`` naming TensorBoard, the schedule's state goes into the Trainer's own
        TensorBoard directory (the reporting callbacks run before user callbacks, so the state of an
        update cannot join the Trainer's ``logs`` of that update: it is written beside them, at the
        same global step, under ``rlvr/``)."""
        if self._board is not None or not getattr(state, "is_world_process_zero", True):
            return
        report = getattr(args, "report_to", None) or []
        report = [report] if isinstance(report, str) else list(report)
        if "tensorboard" not in report and "all" not in report:
            return
        from rlvr_schedule.plugins.sinks import TensorBoardSink

        self._board = TensorBoardSink(_tensorboard_dir(args))

    def _dashboard(self, state: Any) -> None:
        values = self.driver.scalars()
        if self._board is not None:
            self._board.add_scalars(values, int(state.global_step))
        report = getattr(self._args, "report_to", None) or []
        if "wandb" in report or "all" in report:
            wandb = sys.modules.get("wandb")
            run = getattr(wandb, "run", None)
            if run is not None:
                run.log(
                    {**{f"rlvr/{k}": v for k, v in values.items()}, "train/global_step": state.global_step}
                )

    def _save_at_alarm(self, alarms: list[Any], record: StepRecord) -> str | None:
        """The driver's ``save``: the Trainer saves ``checkpoint-<step>`` right after this log
        (``control.should_save``); :meth:`on_save` keeps it apart from the rotation."""
        if self._control is None or self._args is None:
            return None
        self._control.should_save = True
        self._alarm_saves[int(record.step)] = {
            "step": int(record.step),
            "samples": int(record.samples),
            "batch": int(record.batch),
            "alarms": [a.to_dict() for a in alarms],
        }
        return os.path.join(str(self._args.output_dir), f"{ALARM_PREFIX}checkpoint-{int(record.step)}")

    @_guarded
    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """A checkpoint saved at an alarm is kept apart as ``alarm-checkpoint-<step>``."""
        info = self._alarm_saves.pop(int(state.global_step), None)
        if info is None or not getattr(state, "is_world_process_zero", True):
            return
        src = os.path.join(str(args.output_dir), f"checkpoint-{int(state.global_step)}")
        keep_alarm_checkpoint(src, info)

    def _publish_grid(self, args: Any) -> None:
        """Tell the schedule which batches this trainer runs (per-device batch x world x
        steps_per_generation, whole groups of ``num_generations``); a conflicting user divisor, and a
        stage off the grid (a resume at another world size), are set-up warnings and get snapped."""
        from rlvr_schedule.policy.constraints import BatchConstraints

        assert self._unit is not None
        group = getattr(args, "num_generations", None)
        grid = BatchConstraints(
            group_size=int(group) if isinstance(group, int) and group > 0 else 1, divisor=self._unit.multiple
        )
        notes = self.driver.set_host_grid(grid)
        for name in ("applied", "pending"):
            pair = getattr(self, name)
            if pair is not None and not self.driver.grid.is_valid(pair[0]):  # type: ignore[union-attr]
                batch = self.driver.snap(pair[0])
                notes.append(
                    f"the saved stage {name} ({pair[0]} rollouts) is off this trainer's grid (multiples of "
                    f"{self._unit.multiple}: per_device_train_batch_size {args.per_device_train_batch_size} x "
                    f"world {args.world_size} x steps_per_generation {self._unit.accumulation_multiple}): "
                    f"snapped to {batch}"
                )
                setattr(self, name, (batch, pair[1]))
        self.grid_notes = notes
        warn_setup(notes, framework="TRL", stacklevel=5)

    def _setup_meter(self, args: Any, model: Any) -> None:
        """The hook meter when ``.grad`` will be empty after a micro-step (DeepSpeed ZeRO, FSDP) or asked for."""
        if self._meter is not None:
            self._meter.remove()
            self._meter = None
        if not self.measure_noise or model is None or self.noise_meter == "grad":
            return
        if self.noise_meter == "hooks" or _sharded(args):
            self._meter = micro_meter(model)
            self._meter.begin()

    def _check_plan(self, state: Any, micro_per_epoch: int, ga0: int) -> None:
        assert self._unit is not None
        epochs = max(
            int(state.num_train_epochs) - int(state.global_step) // max(-(-micro_per_epoch // ga0), 1), 1
        )
        reasons = check_plan(
            self.schedule,
            self._unit,
            remaining=int(state.max_steps) - int(state.global_step),
            samples=self.samples,
            micro_per_epoch=micro_per_epoch,
            ga0=ga0,
            epochs=epochs,
            # B* tracking can move the batch only when the records carry the noise estimate's input
            noise_estimate=self._noise_measurable(ga0)
            or getattr(getattr(self.schedule, "noise", None), "n_updates", 0) > 0,
            snap=self.driver.snap,
        )
        warn_setup(reasons, framework="TRL", stacklevel=4)

    def _noise_measurable(self, ga: int) -> bool:
        return self.measure_noise and ga >= 2

    def _resume_position(self, args: Any, state: Any, micro_per_epoch: int | None, ga0: int) -> int:
        """Micro-steps of the current epoch behind the resumed run (saved), or the Trainer's guess.

        The Trainer skips ``(global_step % updates_per_epoch) x gradient_accumulation_steps`` batches,
        counted with the initial accumulation (``_init_training_state``, before any callback runs), and
        ends an update whenever its micro-step count since the epoch began divides by the accumulation
        in effect (``_run_epoch``). After a schedule has grown the batch its count is short of what the
        run really did, so an update of the restored stage would end early. The difference is kept in
        ``_offset`` and :meth:`_steer` keeps the updates whole for the rest of the epoch.
        """
        self._offset = 0
        if not micro_per_epoch or getattr(args, "ignore_data_skip", False):
            trainer_pos = 0
        else:
            trainer_pos = (state.global_step % max(-(-micro_per_epoch // ga0), 1)) * ga0
        self._trainer_pos = trainer_pos
        saved = self._saved_epoch_pos if self.last_step > 0 else None
        if saved is None or int(saved) == trainer_pos:
            return trainer_pos
        self._offset = int(saved) - trainer_pos
        log.info(
            "resume: the Trainer counts %s micro-steps into the epoch (it assumes a constant "
            "gradient_accumulation_steps) where the run had done %s; the callback moves the data stream "
            "there and keeps updates whole until the epoch ends",
            trainer_pos,
            saved,
        )
        return int(saved)

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
        try:
            moved = restore_order(
                self._site,
                rng=self._saved_sampler_rng,
                trainer_pos=self._trainer_pos,
                true_pos=self._epoch_pos,
            )
        except Exception as exc:  # the stage must still be re-applied (the rest of on_train_begin)
            if self.strict:
                raise
            self._errors.append(f"on_train_begin: data order: {type(exc).__name__}: {exc}")
            log.exception("resume: the data order could not be restored; the Trainer's own skip applies")
            return
        if moved and self._trainer_pos == 0 and self._loader is not None:
            # the Trainer loads the RNG states before making the epoch's iterator (the run stood
            # after it): that iterator must not draw its worker seed from the global RNG
            self._reattach_seed = detach_loader_seed(self._loader, int(getattr(args, "seed", 0) or 0))
        if moved:
            log.info(
                "resume: the data stream is moved from the Trainer's micro-step %s to the run's %s",
                self._trainer_pos,
                self._epoch_pos,
            )

    def _stage_accumulation(self) -> int:
        """The accumulation count of the stage in effect (``args`` may hold a steering value)."""
        if self.applied is not None and self._unit is not None:
            return self._unit.accumulation(self.applied[0])
        return int(self._args.gradient_accumulation_steps)

    def _steer(self, args: Any) -> None:
        """Make the Trainer end the update after exactly the stage's micro-steps (offset count).

        ``_run_epoch`` reads ``gradient_accumulation_steps`` at each update to fetch that many batches
        (and to scale the loss), then ends the update at the first micro-step whose count
        ``step + 1`` divides by the value read *at that micro-step*. With a count that is off by
        ``_offset``, the stage's value would end updates early; so between micro-steps the callback
        sets a value that divides the count only at the update's last micro-step, and puts the
        stage's value back after the update (for the next fetch). Only a resumed epoch needs this.
        """
        ga = self._stage_accumulation()
        if self._offset % ga == 0:
            args.gradient_accumulation_steps = ga
            return
        count = self._epoch_pos - self._offset + self._micro + 1  # the Trainer's step + 1, next micro-step
        args.gradient_accumulation_steps = count if self._micro + 1 >= ga else count + 1

    @_guarded
    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._epoch_rng = generator_state(self._site.sampler) if self._site is not None else None
        self._epoch_pos = self._resume_pos or 0
        self._resume_pos = None
        self._try_apply()

    @_guarded
    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._meter is not None:  # the hooks go with the run
            self._meter.remove()
            self._meter = None
        if self._board is not None:
            self._board.close()
            self._board = None

    @_guarded
    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._reattach_seed is not None:  # later epochs draw from the global RNG, as the run did
            self._reattach_seed()
            self._reattach_seed = None
        if self._offset:  # a new epoch: the Trainer's count and the callback's agree again
            self._offset = 0
            if self._args is not None:
                self._args.gradient_accumulation_steps = self._stage_accumulation()

    def on_substep_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self._micro == 0 and self.measure_noise and model is not None:
            self._measure_micro(args, model)
        self._micro += 1  # hot path: no guard needed for an increment
        if self._offset:
            self._steer(args)

    @_guarded
    def _measure_micro(self, args: Any, model: Any) -> None:
        """After the first micro-batch of an update the accumulated gradient is that micro-batch's,
        scaled by the loss's 1/GA: its norm x GA is |G_small| for B_small = the local micro-batch
        (the two-batch estimator's small batch; the update's ``grad_norm`` is the big one). Kept on
        the device as a squared norm; :meth:`record` reads it (averaged over the ranks: the gradient
        here is rank-local, DDP syncs at the last micro-batch) when the update's metrics are logged.
        Sharded runs (empty ``.grad``) take the hook meter, from the next update on."""
        ga = int(args.gradient_accumulation_steps)
        if self._meter is not None:
            sq = self._meter.sq_value(ga)
        else:
            sq = grad_sq_norm(model)
            if sq is None and self.noise_meter == "auto":
                log.info("rlvr-schedule: no .grad after the first micro-step (a sharded engine): hook meter")
                self._meter = micro_meter(model)
            sq = None if sq is None else sq * float(ga * ga)
        # NaN when nothing was seen: every rank still joins the mean at the log (no rank waits alone)
        self._micro_sq = math.nan if sq is None else sq
        self._micro_batch = int(args.per_device_train_batch_size)

    @_guarded
    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Count the update just done from its micro-steps; apply a waiting stage if now aligned."""
        micro, self._micro = self._micro + 1, 0
        self._epoch_pos += micro
        if self._meter is not None:
            self._meter.begin()  # the next update's first backward
        if self._unit is not None:
            self.last_batch = self._unit.batch(micro)
            self.driver.consume(self.last_batch)
        self._try_apply()
        if self._offset and self._args is not None:
            self._args.gradient_accumulation_steps = self._stage_accumulation()  # the next fetch
            self._check_first_micro()

    def _check_first_micro(self) -> None:
        """The first micro-step of an update is tested with the stage's own value: warn if it divides."""
        ga = self._stage_accumulation()
        if ga > 1 and (self._epoch_pos - self._offset + 1) % ga == 0:
            log.warning(
                "resume: with steps_per_generation=1 the Trainer ends the next update after one "
                "micro-step (count %s); updates stay whole from the next epoch",
                self._epoch_pos - self._offset + 1,
            )

    @_guarded
    def on_log(
        self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> None:
        """A training log after an update: record -> schedule -> (switch) -> host."""
        if not logs or state.global_step <= self.last_step or self.last_batch is None:
            return
        if "train_runtime" in logs or any(str(k).startswith("eval_") for k in logs):
            return
        self.last_step = int(state.global_step)
        record = self.record(logs, step=self.last_step)
        self._control = control
        try:
            self.feed(record)
        finally:
            self._control = None
        self._dashboard(state)

    def record(self, logs: Mapping[str, Any], *, step: int) -> StepRecord:
        """TRL's log dict as a canonical record (samples and batch measured, not logged)."""
        from rlvr_schedule.ingest import canonicalize

        if self._micro_sq is not None:  # the one host read of the micro-batch norm, at the log
            sq, self._micro_sq = self._micro_sq, None
            mean = mean_over_ranks(sq)
            self._grad_norm_micro = math.sqrt(max(mean, 0.0)) if math.isfinite(mean) else math.nan
        if math.isfinite(self._grad_norm_micro) and "grad_norm_micro" not in logs:
            logs = {**logs, "grad_norm_micro": self._grad_norm_micro, "micro_batch": self._micro_batch}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NaN metrics (a reward returned None) stay NaN, no warning spam
            return canonicalize(
                logs, step=step, samples=self.samples, batch=self.last_batch, aliases=self._aliases
            )

    def feed(self, record: StepRecord) -> Decision:
        """One turn of the driver's loop (observers, schedule, :meth:`request` on a new stage)."""
        decision = self.driver.observe(record)
        self.decisions.append(decision)
        return decision


def _sharded(args: Any) -> bool:
    """Whether the Trainer runs a DeepSpeed or FSDP engine (``.grad`` is empty between micro-steps)."""
    import os

    if getattr(args, "deepspeed", None) or getattr(args, "fsdp", None):
        return True
    return any(
        os.environ.get(k, "").lower() in ("1", "true")
        for k in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP")
    )


def _tensorboard_dir(args: Any) -> str:
    """The Trainer's TensorBoard directory: ``TENSORBOARD_LOGGING_DIR``, else the newest
    ``<output_dir>/runs/*`` holding an event file of this process (transformers names it by time
    and host; torch's event file names end with the writer's pid), else ``<output_dir>/runs/rlvr``."""
    env = os.environ.get("TENSORBOARD_LOGGING_DIR")
    if env:
        return os.path.expanduser(env)
    runs = os.path.join(str(args.output_dir), "runs")
    mine = []
    if os.path.isdir(runs):
        for d in os.scandir(runs):
            if d.is_dir():
                for f in os.scandir(d.path):
                    if "tfevents" in f.name and f".{os.getpid()}." in f.name:
                        mine.append((f.stat().st_mtime, d.path))
    return max(mine)[1] if mine else os.path.join(runs, "rlvr")


def find_callback(trainer: Any) -> Any:
    """The schedule callback a trainer runs (after a checkpoint restore it is a new instance)."""
    for cb in trainer.callback_handler.callbacks:
        if isinstance(cb, RlvrScheduleCallback):
            return cb
    return None
