"""The verl 0.9.1 adapter, split by job; :mod:`rlvr_schedule_adapters.verl_plugin` is its entry point.

controller  framework-free: metrics -> records -> schedule -> (batch, lr) to apply
batch       rollouts per step via the per-step config reads; start-up checks
state       scheduler state beside checkpoints (atomic JSON)
tracking    the ``Tracking`` backend
trainer     the verl classes (imports verl): trainer, worker, Ray task runner
launch      the command line

The LR change (base_lrs and param groups together) is the adapters' shared
:func:`rlvr_schedule_adapters._common.scale_base_lr`. Only ``trainer`` and ``launch`` import verl,
and only when used.
"""
