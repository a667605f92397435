"""Every ``two_clock`` file in ``examples/schedules`` inside a real TRL ``GRPOTrainer``, on a host whose
grid of runnable batches is multiples of 48 (24 completions per micro-step x 1 process x
steps_per_generation 2), as a user runs them.

The files' own constraints (whole groups, ``max_batch``) do not know the host's grid: the callback
publishes it at train begin, and from then on every decided batch is runnable. The only knobs changed
are the two evidence counts, scaled down so that a CPU run reaches its switches in about a minute,
and the price, stated:

- ``estimate_samples`` -> 480 (the estimate still waits for its 100 records, the EMA's horizon);
- ``forecast_samples`` -> 480;
- ``rollouts_per_update`` -> 20.5, stated: the files leave the price to be measured, and the tiny
  model's CPU step times, proportional to the batch, measure it near 0 once a second batch has run
  three updates; the policy then moves to the smallest batch, two updates after the tracking switch
  this test follows and before that switch is in effect. 20.5 puts the start at 0.18 x B* at the
  B* of about 1000 both files meet (192 on this host); at the default 16 (0.16 x B*, 144) the B*
  estimate after the noise step moves the batch several times within a few updates, faster than a
  decided batch reaches an aligned boundary (each decision must run here).

The task is the TRL example's (repeat the prompt's first word) with a zero-mean Gaussian noise added
to each reward and ``scale_rewards="none"``, so the gradient noise (B_simple) of the tiny model is
set by the host: noise 0.3 for the first 100 updates (B_simple about 1000, so the auto start moves off
the fallback batch), 0.6 after (B_simple rises, so B* tracking switches again). Each run stops three
updates after its second switch is in effect in the trainer (at most 260 updates).

Measured, not taken from the callback: the completions that reached the reward function at each
optimizer step and the accumulation count at each update (``trl_harness.Measured``).
"""

from __future__ import annotations

import logging
import random
import warnings
from pathlib import Path

import pytest
from transformers import TrainerCallback
from trl_harness import Measured, _Probe, grpo_args, prompts

from rlvr_schedule.policy import read_config, schedule_from_dict
from rlvr_schedule_adapters.trl import RlvrScheduleCallback, ScheduleSetupWarning, find_callback

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "schedules"
#: (a file with ``host`` values starts at the Trainer's own batch: tests/trl/test_trl_new_user.py)
TWO_CLOCK = sorted(
    p.name
    for p in EXAMPLES.glob("*.yaml")
    if read_config(p).get("type") == "two_clock" and "host" not in read_config(p).values()
)
PER_DEVICE, S = 24, 2
GRID = PER_DEVICE * S  # 48: the host's grid (one process)
SCALED = {"estimate_samples": 480, "forecast_samples": 480, "rollouts_per_update": 20.5}  # the knobs changed
NOISE_SWITCH = 100  # updates at reward noise 0.3, then 0.6
MAX_STEPS = 260


class _Noise:
    """The example's reward plus zero-mean noise whose scale steps up after ``NOISE_SWITCH`` updates."""

    def __init__(self, measured: Measured) -> None:
        self.m, self.updates, self.rng = measured, 0, random.Random(0)
        self.__name__ = "noisy_repeat_first_word"
        from trl_grpo_cpu import repeat_first_word  # on the path trl_harness set

        self.signal = repeat_first_word

    def __call__(self, prompts, completions, **kwargs):
        self.m.reward(completions, prompts)  # count what reached the reward function
        sigma = 0.3 if self.updates < NOISE_SWITCH else 0.6
        return [r + sigma * self.rng.gauss(0.0, 1.0) for r in self.signal(prompts, completions)]


class _Stop(TrainerCallback):
    """Count updates for the noise; stop three updates after the second switch is in effect."""

    def __init__(self, cb, noise: _Noise, switches: int) -> None:
        self.cb, self.noise, self.switches, self.left = cb, noise, switches, None

    def on_step_end(self, args, state, control, **kwargs):
        self.noise.updates = state.global_step
        done = [d for d in self.cb.decisions if d.switched]
        if (
            self.left is None
            and len(done) >= self.switches
            and self.cb.run.applied == (done[-1].batch, done[-1].lr)
        ):
            self.left = 3
        if self.left is not None:
            self.left -= 1
            control.should_training_stop = self.left <= 0


@pytest.fixture(scope="module", params=TWO_CLOCK)
def example_run(request, tiny_model, tmp_path_factory):
    name = request.param
    spec = {**read_config(EXAMPLES / name), **SCALED}
    group = int(spec["constraints"]["group_size"])
    cb = RlvrScheduleCallback(spec, strict=False)  # faults logged and counted, not raised
    m = Measured()
    noise = _Noise(m)
    # the auto start from a known critical batch is the first stage; from the noise estimate, a switch
    switches = 1 if spec.get("critical_batch") is not None else 2
    model, tok = tiny_model
    from trl import GRPOTrainer

    args = grpo_args(
        tmp_path_factory.mktemp(name.replace(".", "-")),
        per_device_train_batch_size=PER_DEVICE,
        num_generations=group,
        gradient_accumulation_steps=S,
        steps_per_generation=S,
        max_steps=MAX_STEPS,
        max_completion_length=4,
        scale_rewards="none",
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=noise,
        args=args,
        train_dataset=prompts(20_000),
        processing_class=tok,
        callbacks=[cb, _Stop(cb, noise, switches), _Probe(m)],
    )
    logs: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda rec: logs.append(rec.getMessage())  # type: ignore[method-assign]
    logging.getLogger("rlvr_schedule").addHandler(handler)
    try:
        # a file whose first stage is on the host's grid may give no set-up warning at all
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.train()
    finally:
        logging.getLogger("rlvr_schedule").removeHandler(handler)
    setup = [w for w in caught if issubclass(w.category, ScheduleSetupWarning)]
    cb = find_callback(trainer)
    print(  # the run in one line (pytest -s)
        f"\n{name}: {trainer.state.global_step} updates, first stage {cb.schedule.stages[0].batch}, switches "
        f"{[(d.step, d.batch, d.reason[:70]) for d in cb.decisions if d.switched]}, ran {sorted(set(m.completions))}"
    )
    return name, cb, m, switches, [str(w.message) for w in setup], logs


def test_no_callback_errors_and_nothing_logged_as_not_runnable(example_run):
    name, cb, _, _, _, logs = example_run
    assert cb.errors == [], name
    assert not [msg for msg in logs if "not runnable" in msg]


def test_every_decided_batch_is_on_the_hosts_grid(example_run):
    name, cb, m, _, setup, _ = example_run
    assert cb.decisions and all(d.batch % GRID == 0 for d in cb.decisions), name
    assert all(c % GRID == 0 for c in m.completions)
    assert cb.schedule.constraints.multiple % GRID == 0
    # where the file's first stage was not on the grid, the set-up warning says where it went
    # (two_clock.yaml, at the stated price 20.5, starts at the batch cheapest for B* 1024, 185, the
    # nearest whole groups of 16: 192, on the grid; two_clock_auto.yaml at its fallback 64, snapped to 48)
    own = schedule_from_dict({**read_config(EXAMPLES / name), **SCALED}).current.batch
    said = any("snapped to the host's grid (multiples of 48)" in w for w in setup)
    assert said == (own % GRID != 0), (own, setup)


def test_the_auto_start_and_a_further_switch_are_seen_in_the_accumulation_the_trainer_ran(example_run):
    name, cb, m, switches, _, _ = example_run
    first = cb.schedule.stages[0]
    assert first.reason.startswith("initial") and "auto" in str(read_config(EXAMPLES / name)["initial_batch"])
    assert m.completions[0] == first.batch and m.ga[0] == first.batch // PER_DEVICE
    done = [d for d in cb.decisions if d.switched]
    assert len(done) >= switches, [(d.step, d.batch, d.reason) for d in cb.decisions[-5:]]
    if switches == 2:
        assert done[0].reason.startswith("auto:")
    for d, nxt in zip(done, [*done[1:], None], strict=True):
        # the updates after the decision and before the next switch: within a few updates (an aligned
        # boundary) the trainer runs the decided batch, through the accumulation count
        ran = m.completions[d.step : nxt.step if nxt else None]
        gas = m.ga[d.step : nxt.step if nxt else None]
        assert d.batch in ran, (name, d.step, d.batch, ran[:8])
        k = ran.index(d.batch)
        assert k <= 4 and gas[k] == d.batch // PER_DEVICE
