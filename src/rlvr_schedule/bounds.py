"""Plausibility bounds: values beyond these are input errors (a unit slip, a corrupt cell), not runs.

Each bound is far beyond any real run, so that it never refuses one, and far below where the
arithmetic goes wrong (float overflow in the clocks, integer batches of 31 digits):

- :data:`MAX_BATCH` rollouts per update, 2**24 (16,777,216): the largest RLVR runs use tens of
  thousands per update; 2**24 is also the largest integer a float32 (TensorBoard) holds exactly.
- :data:`MAX_LR`, 10: language-model learning rates are 1e-7..1e-3 (Adam) and SGD on small models
  stays under 1; an LR above 10 is a unit or exponent slip.
- :data:`MAX_ABS_REWARD`, 1e6: verifiable rewards are 0/1 or small scores, reward-model scores a
  few tens; a summed token-level reward of a long answer stays far below a million.
- :data:`MAX_SAMPLES` rollouts, 2**53: counts stay exact as floats (JSON, numpy).
- :data:`MAX_SIMULATE_UPDATES`: ``simulate`` runs at most this many updates per schedule (a
  ``--max-samples`` over a ``--base-batch`` beyond it is refused, not run for hours).

A log's reward or LR beyond its bound is read as a missing value (NaN) with a warning naming the
line and field, as a NaN is; a batch beyond its bound, or not whole, is an error naming them; a
schedule's or an option's is an error naming the field or option.
"""

from __future__ import annotations

__all__ = ["MAX_BATCH", "MAX_LR", "MAX_ABS_REWARD", "MAX_SAMPLES", "MAX_SIMULATE_UPDATES", "WHY"]

MAX_BATCH = 2**24
MAX_LR = 10.0
MAX_ABS_REWARD = 1e6
MAX_SAMPLES = 2**53
MAX_SIMULATE_UPDATES = 1_000_000

#: Why each bound, as the messages say it.
WHY = {
    "batch": f"at most {MAX_BATCH} rollouts per update (2**24: beyond any machine)",
    "lr": f"at most {MAX_LR:g} (a learning rate above it is a unit or exponent slip)",
    "reward": f"|reward| at most {MAX_ABS_REWARD:g} (beyond any verifiable or model reward)",
    "samples": f"at most {MAX_SAMPLES} rollouts (2**53: exact as a float)",
}
