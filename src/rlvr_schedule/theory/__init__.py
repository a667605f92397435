"""Theory: LR scaling rules, the local quadratic model, McCandlish's noise scale (and its two-batch
probe, ``noise_scale``), a noisy-quadratic simulator.

numpy only. Each module's docstring gives its formulas and their sources
(McCandlish et al. 2018, Malladi et al. 2022).
"""

from rlvr_schedule.theory import mccandlish, noise_scale
from rlvr_schedule.theory.mccandlish import (
    b_noise,
    b_simple,
    eps_max,
    eps_opt,
    gradient_noise_from_two_batches,
    progress_opt,
    sgd_expected_decrease,
    steps_for_samples,
)
from rlvr_schedule.theory.quadratic import LocalQuadratic
from rlvr_schedule.theory.scaling import RULES, AdamHparams, adam_hparams_for_batch, lr_for_batch
from rlvr_schedule.theory.simulator import NoisyQuadratic, StepEstimate

__all__ = [
    "RULES",
    "AdamHparams",
    "LocalQuadratic",
    "NoisyQuadratic",
    "StepEstimate",
    "adam_hparams_for_batch",
    "b_noise",
    "b_simple",
    "eps_max",
    "eps_opt",
    "gradient_noise_from_two_batches",
    "lr_for_batch",
    "mccandlish",
    "noise_scale",
    "progress_opt",
    "sgd_expected_decrease",
    "steps_for_samples",
]
