"""The TRL callback's run state is a plain object: the stage waits for an aligned boundary, a resumed
epoch's updates are kept whole, and the saved form comes back (no Trainer, no transformers)."""

from __future__ import annotations

import json
import subprocess
import sys

from rlvr_schedule_adapters.trl.epochs import BatchUnit
from rlvr_schedule_adapters.trl.state import TrlRunState

UNIT = BatchUnit(per_step=4, accumulation_multiple=2)  # batches 8, 16, ...: accumulation 2, 4, ...


def test_a_new_stage_waits_for_a_boundary_its_accumulation_divides():
    run = TrlRunState(unit=UNIT, applied=(8, 1e-3), pending=(16, 1e-3))
    run.micro = 1  # one update of 2 micro-steps: 2 done, which 4 does not divide
    assert run.update_done() == 2 and run.epoch_pos == 2 and run.last_batch == 8
    assert run.ready(current_ga=2) is None
    run.micro = 1
    run.update_done()
    assert run.ready(current_ga=2) == (16, 1e-3, 4)


def test_steering_ends_each_update_after_the_stages_micro_steps_despite_the_offset():
    # resumed 4 micro-steps into the epoch where the Trainer counts 2: left alone, it would end the
    # first update at its count 4, after 2 of the stage's 4 micro-steps
    run = TrlRunState(unit=UNIT, applied=(16, 1e-3), epoch_pos=4, offset=2)
    ends, ga = [], run.accumulation(4)  # what on_step_end leaves for the next update's fetch
    for _ in range(8):  # the Trainer: a micro-step ends the update when its count divides by ga
        count = run.epoch_pos - run.offset + run.micro + 1
        if count % ga == 0:  # on_step_end
            ends.append(run.update_done())
            ga = run.accumulation(4)
        else:  # on_substep_end sets the value the next micro-step is tested with
            run.micro += 1
            ga = run.steering(current_ga=ga)
    assert ends == [4, 4]  # whole updates of the stage's 4 micro-steps


def test_the_saved_form_is_json_and_loads_back():
    run = TrlRunState(unit=UNIT, applied=(16, 1e-3), pending=(32, 1e-3), last_batch=16, last_step=7)
    run.epoch_pos, run.epoch_rng, run.micro_per_epoch = 10, "rng-at-epoch-start", 40
    saved = json.loads(json.dumps(run.state_dict({"samples": 96}, rng_now="rng-now")))
    assert saved["driver"] == {"samples": 96} and saved["sampler_rng"] == "rng-at-epoch-start"
    back = TrlRunState()
    back.load_state_dict(saved)
    assert (back.applied, back.pending, back.last_batch, back.last_step) == ((16, 1e-3), (32, 1e-3), 16, 7)
    assert back.saved_epoch_pos == 10
    # saved after the epoch's last update: the next epoch starts from the sampler as it is now
    run.epoch_pos = 40
    assert run.state_dict({}, rng_now="rng-now")["epoch_pos"] == 0
    assert run.state_dict({}, rng_now="rng-now")["sampler_rng"] == "rng-now"


def test_the_run_state_imports_neither_transformers_nor_trl():
    code = (
        "import sys\n"
        "import rlvr_schedule_adapters.trl.state\n"
        "print(any(m.split('.')[0] in ('transformers', 'trl', 'torch') for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
