"""Theory: LR scaling rules, the local quadratic model, McCandlish's noise scale, a noisy-quadratic simulator.

numpy only. The formulas are those of the project's THEORY notes (sections 1-3).
"""

from rlvr_schedule.theory.scaling import RULES, AdamHparams, adam_hparams_for_batch, lr_for_batch

__all__ = ["RULES", "AdamHparams", "adam_hparams_for_batch", "lr_for_batch"]
