"""Metric-name alias tables: what TRL, verl and OpenRLHF log, mapped onto :class:`StepRecord` fields.

Each framework logs the same quantity under its own name (TRL ``reward``, verl ``critic/score/mean``,
OpenRLHF ``rollout/reward_mean``). :data:`FIELD_ALIASES` lists, per canonical field, the names that
mean it, **highest priority first**: when one metrics dict holds two names of one field (verl logs
both ``actor/kl_loss`` and ``actor/ppo_kl``), the earlier name fills the field and the other is kept
in ``extra`` under its own name, so nothing logged is lost and the choice never flips between steps.

Names also resolve behind a ``train/`` prefix (how the HF Trainer's TensorBoard/W&B loggers write
TRL metrics, e.g. ``train/reward``) or ``rlvr/`` (this library's TensorBoard sink), one rank below
the bare name. Plugins add names through the
``rlvr_schedule_metric_aliases`` hook; :func:`collect_aliases` merges them.

Sources: the key lists of TRL 1.16 (``on_log``), verl 0.9.1 (``Tracking.log``) and OpenRLHF 0.11.2
(``save_logs_and_checkpoints``) in the project's INTEGRATION notes.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import fields
from types import MappingProxyType
from typing import TYPE_CHECKING

from rlvr_schedule.errors import ConfigError
from rlvr_schedule.records import StepRecord

if TYPE_CHECKING:  # pragma: no cover
    from rlvr_schedule.plugins import PluginHost

__all__ = [
    "CANONICAL_FIELDS",
    "FIELD_ALIASES",
    "FRAMEWORK_METRICS",
    "ALIASES",
    "KNOWN_EXTRA",
    "STRIP_PREFIXES",
    "TRAIN_PREFIX",
    "AliasTable",
    "as_table",
    "collect_aliases",
    "default_aliases",
    "is_known_extra",
    "merge_aliases",
]

log = logging.getLogger("rlvr_schedule.ingest")

#: Fields of :class:`StepRecord` an alias may point at.
CANONICAL_FIELDS: frozenset[str] = frozenset(f.name for f in fields(StepRecord) if f.name != "extra")

#: Prefix loggers put before trainer metrics (HF Trainer's TensorBoard writer: ``train/reward``).
TRAIN_PREFIX = "train/"

#: Prefixes stripped when a name is not known as written, one rank below the bare name:
#: ``train/`` (HF Trainer loggers) and ``rlvr/`` (this library's TensorBoard sink).
STRIP_PREFIXES: tuple[str, ...] = (TRAIN_PREFIX, "rlvr/")

#: canonical field -> logged names, highest priority first (the canonical name itself leads).
FIELD_ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "step": (
            "step",
            "global_step",
            "training/global_step",  # verl
            "trainer/global_step",  # W&B exports
            "_step",
        ),
        "samples": (
            "samples",
            "total_samples",
            "consumed_samples",
            "num_samples_total",
            "episode",  # TRL PPO/RLOO: rollouts so far
        ),
        "batch": (
            "batch",
            "rollout_batch",
            "batch_size",
            "rollout/num_samples",  # OpenRLHF: rollouts generated for this update
        ),
        "lr": (
            "lr",
            "learning_rate",  # TRL
            "actor/lr",  # verl
            "actor_lr",  # OpenRLHF
        ),
        "reward_mean": (
            "reward_mean",
            "reward",  # TRL
            "critic/score/mean",  # verl: verifier score before KL shaping
            "rollout/reward_mean",  # OpenRLHF
            "critic/rewards/mean",  # verl: after KL-in-reward shaping (fallback only)
            "rollout/reward",
            "objective/scores",  # TRL PPO/RLOO: verifier/reward-model score
            "objective/rlhf_reward",  # TRL PPO/RLOO: score minus KL penalty (fallback only)
        ),
        "reward_std": (
            "reward_std",  # TRL
            "critic/score/std",
            "rollout/reward_std",
        ),
        "entropy": (
            "entropy",  # TRL
            "actor/entropy",  # verl
            "entropy_loss",  # OpenRLHF (only with an entropy coefficient)
            "policy_entropy",
            "actor/entropy_loss",  # verl before 0.3: the entropy under its old name
            "objective/entropy",  # TRL PPO/RLOO
        ),
        # KL to the reference policy first (TRL/OpenRLHF ``kl``, verl ``actor/kl_loss``); the
        # old-vs-new policy KL of the PPO ratio (``ppo_kl``) only when that is all a run logs.
        "kl": (
            "kl",  # TRL (beta > 0), OpenRLHF
            "actor/kl_loss",  # verl (use_kl_loss)
            "actor/reward_kl_penalty",  # verl (KL in reward)
            "critic/kl",  # verl before 0.3: KL to the reference (in-reward)
            "objective/kl",  # TRL PPO/RLOO
            "actor/ppo_kl",  # verl
            "ppo_kl",  # OpenRLHF
        ),
        "grad_norm": (
            "grad_norm",  # TRL
            "actor/grad_norm",  # verl
            "actor_grad_norm",  # OpenRLHF
        ),
        "clip_frac": (
            "clip_frac",
            "clip_ratio/region_mean",  # TRL
            "actor/pg_clipfrac",  # verl
            "ppo_clip_ratio",  # OpenRLHF
            "clip_ratio",
            "policy/clipfrac_avg",  # TRL PPO/RLOO
        ),
        "response_length": (
            "response_length",
            "completions/mean_length",  # TRL
            "completion_length",  # TRL before 0.15
            "response_length/mean",  # verl
            "rollout/response_length_mean",  # OpenRLHF
            "rollout/response_length",
        ),
        "frac_zero_std": (
            "frac_zero_std",
            "frac_reward_zero_std",  # TRL
        ),
        # not logged by the frameworks themselves: the reference trainer and the adapters add them
        "grad_norm_micro": ("grad_norm_micro", "actor/grad_norm_micro"),  # verl adapter: actor/
        "micro_batch": ("micro_batch", "actor/micro_batch"),
    }
)

#: logged name -> canonical field, in priority order (earlier wins within a field).
ALIASES: Mapping[str, str] = MappingProxyType(
    {name: fld for fld, names in FIELD_ALIASES.items() for name in names}
)

#: What each framework logs, by canonical field (one key per field: the one its adapter reads and the
#: synthetic writers write): TRL 1.16 ``on_log``, verl 0.9.1 ``Tracking.log``, OpenRLHF 0.11.2
#: ``save_logs_and_checkpoints``. The one table of framework names; each is in :data:`FIELD_ALIASES`.
FRAMEWORK_METRICS: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "trl": MappingProxyType(
            {
                "step": "step",
                "lr": "learning_rate",
                "reward_mean": "reward",
                "reward_std": "reward_std",
                "entropy": "entropy",
                "kl": "kl",
                "grad_norm": "grad_norm",
                "clip_frac": "clip_ratio/region_mean",
                "response_length": "completions/mean_length",
                "frac_zero_std": "frac_reward_zero_std",
            }
        ),
        "verl": MappingProxyType(
            {
                "step": "training/global_step",
                "lr": "actor/lr",
                "reward_mean": "critic/score/mean",
                "reward_std": "critic/score/std",
                "entropy": "actor/entropy",
                "kl": "actor/kl_loss",
                "grad_norm": "actor/grad_norm",
                "clip_frac": "actor/pg_clipfrac",
                "response_length": "response_length/mean",
            }
        ),
        "openrlhf": MappingProxyType(
            {
                "lr": "actor_lr",
                "reward_mean": "rollout/reward_mean",
                "reward_std": "rollout/reward_std",
                "entropy": "entropy_loss",
                "kl": "kl",
                "grad_norm": "actor_grad_norm",
                "clip_frac": "ppo_clip_ratio",
                "response_length": "rollout/response_length_mean",
            }
        ),
    }
)

#: Names the frameworks log that have no canonical field: kept in ``extra`` without the
#: "unknown columns" warning. Entries ending in ``/`` or ``_`` are prefixes.
KNOWN_EXTRA: frozenset[str] = frozenset(
    {
        # TRL
        "loss",
        "num_tokens",
        "completions/",
        "clip_ratio/",
        "step_time",
        "epoch",
        "total_flos",
        "train_runtime",
        "train_samples_per_second",
        "train_steps_per_second",
        "train_loss",
        "rewards/",
        "eval_",
        "eval/",
        # this library's sinks (decision lines, rlvr/decision/* scalars); W&B exports
        "kind",
        "decision/",
        "stage",
        "_runtime",
        "_timestamp",
        # the reference trainer (rlvr_trainer): applied LR with warm-up, phase timings
        "lr_effective",
        "truncated_frac",
        "rollout_s",
        "update_s",
        "push_s",
        "generate_s",
        "reward_s",
        "logprob_s",
        "backward_s",
        "micro_batches",
        "padded_positions",
        "sampler_logp_diff_",
        # verl: its metric namespaces (trainer/ppo/metric_utils.py, workers' "actor/" metrics)
        "critic/",
        "actor/",
        "training/",
        "response_length/",
        "prompt_length/",
        "timing_s/",
        "timing_per_token_ms/",
        "perf/",
        "val-core/",
        "val-aux/",
        "global_seqlen/",
        # TRL: train/rollout log-prob mismatch, PPO/RLOO namespaces; W&B chart/run exports; ms-swift
        "sampling/",
        "objective/",
        "policy/",
        "loss/",
        "val/",
        "eps",
        "Step",
        "global_step/max_steps",
        "percentage",
        "elapsed_time",
        "remaining_time",
        "memory(GiB)",
        "train_speed(iter/s)",
        "entropy/",
        "test_score/",
        # OpenRLHF
        "policy_loss",
        "rollout/",
        "timing/",
        "dynamic_filtering_pass_rate",
        "kl_coef",
        "actor_loss",
        "critic_loss",
        "values",
        "return",
        "advantages",
        "response_clip_ratio",
        "total_length",
    }
)


class AliasTable(Mapping[str, str]):
    """A read-only ``{logged_name: field}`` mapping that also knows each name's priority.

    :meth:`resolve` also accepts every name behind a :data:`STRIP_PREFIXES` prefix
    (``train/reward``) and returns the name's rank: among names of one field, lower wins.
    """

    __slots__ = ("_map", "_rank", "_cache")

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        self._map: dict[str, str] = {}
        for name, fld in items:
            if fld not in CANONICAL_FIELDS:
                raise ConfigError(
                    f"alias {name!r} points at unknown field {fld!r}; "
                    f"canonical fields are {sorted(CANONICAL_FIELDS)}",
                    field=name,
                )
            self._map.setdefault(str(name), fld)  # the first (highest-priority) entry wins
        self._rank = {name: i for i, name in enumerate(self._map)}
        self._cache: dict[str, tuple[str, float] | None] = {}

    def __getitem__(self, name: str) -> str:
        return self._map[name]

    def __iter__(self):
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def resolve(self, name: str) -> tuple[str, float] | None:
        """``(field, rank)`` of a logged name, bare or behind a :data:`STRIP_PREFIXES` prefix (or None)."""
        try:
            return self._cache[name]
        except KeyError:
            pass
        hit: tuple[str, float] | None = None
        if name in self._map:
            hit = self._map[name], float(self._rank[name])
        else:
            for prefix in STRIP_PREFIXES:
                bare = name[len(prefix) :]
                if name.startswith(prefix) and bare in self._map:
                    hit = self._map[bare], self._rank[bare] + 0.5
                    break
        if len(self._cache) < 100_000:
            self._cache[name] = hit
        return hit

    def __repr__(self) -> str:
        return f"AliasTable({len(self._map)} names)"


_KNOWN_PREFIXES = tuple(sorted(p for p in KNOWN_EXTRA if p.endswith(("/", "_"))))


@functools.lru_cache(maxsize=4096)
def is_known_extra(name: str) -> bool:
    """True for framework names that have no canonical field but are expected (no warning)."""
    for prefix in STRIP_PREFIXES:
        name = name.removeprefix(prefix)
    return name in KNOWN_EXTRA or name.startswith(_KNOWN_PREFIXES)


def merge_aliases(*tables: Mapping[str, str] | None) -> AliasTable:
    """Merge alias mappings; **earlier tables take precedence** (over later ones and within a field).

    The built-in :data:`ALIASES` always come last, so ``merge_aliases(mine)`` is "mine, then the
    defaults". Passing an :class:`AliasTable` keeps its priority order.
    """
    items: list[tuple[str, str]] = []
    for t in tables:
        if t:
            items.extend((str(k), str(v)) for k, v in t.items())
    items.extend(ALIASES.items())
    return AliasTable(items)


def collect_aliases(plugin_host: PluginHost | None = None) -> AliasTable:
    """The built-in aliases plus those plugins return from ``rlvr_schedule_metric_aliases``.

    ``plugin_host=None`` loads the entry-point plugins (group ``rlvr_schedule``); without pluggy
    installed the built-ins are returned. Built-in names keep their meaning: a plugin cannot
    remap ``reward``; it adds names (a bad target field is logged and skipped, never fatal).
    """
    if plugin_host is None:
        try:
            from rlvr_schedule.plugins import get_plugin_host
        except ImportError:  # pluggy missing: the core still works with the built-ins
            return AliasTable(ALIASES.items())
        plugin_host = get_plugin_host()
    items: list[tuple[str, str]] = list(ALIASES.items())
    for contributed in plugin_host.call("rlvr_schedule_metric_aliases"):
        try:
            for name, fld in dict(contributed).items():
                if fld not in CANONICAL_FIELDS:
                    raise ConfigError(f"alias {name!r} points at unknown field {fld!r}", field=str(name))
                items.append((str(name), str(fld)))
        except Exception:  # one bad plugin must not stop ingestion
            if getattr(plugin_host, "strict", False):
                raise
            log.exception("ignoring bad metric aliases from a plugin: %r", contributed)
    return AliasTable(items)


@functools.lru_cache(maxsize=1)
def default_aliases() -> AliasTable:
    """:func:`collect_aliases` of the entry-point plugins, computed once per process.

    Readers and :func:`canonicalize` use it when given ``aliases=None``; pass
    ``collect_aliases(host)`` to include plugins registered by hand.
    """
    return collect_aliases()


def as_table(aliases: Mapping[str, str] | None) -> AliasTable:
    """``aliases`` as an :class:`AliasTable` (None: :func:`default_aliases`; a table: as is)."""
    if aliases is None:
        return default_aliases()
    if isinstance(aliases, AliasTable):
        return aliases
    return merge_aliases(aliases)
