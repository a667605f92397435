"""The launcher: ``python -m rlvr_schedule_adapters.openrlhf --schedule FILE [--advisory] <openrlhf args>``.

OpenRLHF has no callbacks or registries: the launcher swaps in the scheduled Ray actor classes
(:mod:`rlvr_schedule_adapters.openrlhf.actors`) and hands the schedule to every actor through the
args namespace, then runs OpenRLHF's own CLI module.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr_schedule_adapters._common import warn_setup
from rlvr_schedule_adapters.openrlhf.controller import ARGS_ATTR
from rlvr_schedule_adapters.openrlhf.plan import check_setup

__all__ = ["CLI_MODULE", "main", "openrlhf_cli_args", "patch_openrlhf"]

log = logging.getLogger("rlvr_schedule.openrlhf")

CLI_MODULE = "openrlhf.cli.train_ppo_ray"


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


def patch_openrlhf(spec: Mapping[str, Any], *, advisory: bool = False) -> None:
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
        setattr(args, ARGS_ATTR, {"schedule": dict(spec), "advisory": bool(advisory)})
        try:
            from rlvr_schedule_adapters._common import build_schedule

            reasons = check_setup(args, build_schedule(dict(spec)))
            for reason in reasons:
                log.warning("rlvr-schedule: %s", reason)
            warn_setup(reasons, framework="OpenRLHF")
        except Exception:
            log.exception("rlvr-schedule: set-up check failed")
        return real(args)

    get_strategy.__wrapped_by_rlvr__ = real  # type: ignore[attr-defined]
    outils.get_strategy = get_strategy


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m rlvr_schedule_adapters.openrlhf --schedule FILE [--advisory] <openrlhf args>``."""
    import argparse
    import runpy

    parser = argparse.ArgumentParser(
        prog="python -m rlvr_schedule_adapters.openrlhf",
        description="Run openrlhf.cli.train_ppo_ray under a rollout-batch schedule.",
    )
    parser.add_argument("--schedule", required=True, help="schedule file (YAML/JSON: static or two_clock)")
    parser.add_argument(
        "--advisory",
        action="store_true",
        help="decide and log every decision with its reason, change nothing",
    )
    ours, rest = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO)

    from rlvr_schedule_adapters._common import build_schedule, schedule_spec

    spec = schedule_spec(ours.schedule)
    build_schedule(ours.schedule)  # ConfigError (file, field) before anything starts
    patch_openrlhf(spec, advisory=ours.advisory)
    sys.argv = [CLI_MODULE, *rest]
    runpy.run_module(CLI_MODULE, run_name="__main__", alter_sys=True)
