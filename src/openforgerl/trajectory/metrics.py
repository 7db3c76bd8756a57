"""Reconstruction metrics per rollout and per harness.

Definitions (the README quotes them):
- ``calls``: all recorded calls; ``trainable_calls``: calls that landed in a chain;
  ``excluded``: side calls, errored calls, empty completions, calls with unusable logprobs.
- ``chains``: chains built; ``agents``: distinct agents (main + sub-agents) with trainable calls.
- ``merged_calls``: calls that continued an existing chain.
- ``merge_rate`` = merged_calls / (trainable_calls - agents): 1.0 when every agent's calls formed a
  single append-only chain, lower for each break (an agent's first call can never merge). None when
  no call could have merged.
- ``tokens_seen``: prompt + completion tokens of the trainable calls (what the engine processed);
  ``tokens_in_samples``: prompt + response tokens handed to the trainer (its compute);
  ``tokens_trained``: tokens with mask 1 in the samples; ``tokens_sampled``: completion tokens of
  trainable calls (== tokens_trained unless truncated/dropped, which is counted).
- ``images_in_samples``: image references carried by the samples (an image shared by two chains
  counts twice); breaks by an image pruned from the history are ``break_causes["image_pruned"]``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class RolloutMetrics:
    rollout_id: str
    harness: str | None = None
    calls: int = 0
    trainable_calls: int = 0
    chains: int = 0
    agents: int = 0
    merged_calls: int = 0
    tokens_seen: int = 0
    tokens_in_samples: int = 0
    tokens_trained: int = 0
    tokens_sampled: int = 0
    sampled_tokens_truncated: int = 0
    sampled_tokens_dropped: int = 0
    prompt_tokens_truncated: int = 0
    chains_truncated: int = 0
    chains_dropped: int = 0
    images_in_samples: int = 0
    break_causes: Mapping[str, int] = field(default_factory=dict)
    excluded: Mapping[str, int] = field(default_factory=dict)
    dropped_reason: str | None = None

    @property
    def merge_rate(self) -> float | None:
        return _merge_rate(self.merged_calls, self.trainable_calls, self.agents)

    def as_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["break_causes"] = dict(self.break_causes)
        out["excluded"] = dict(self.excluded)
        out["merge_rate"] = self.merge_rate
        return out


_COUNTS = tuple(
    name
    for name in RolloutMetrics.__dataclass_fields__
    if name not in ("rollout_id", "harness", "break_causes", "excluded", "dropped_reason")
)


@dataclass(frozen=True, slots=True)
class HarnessMetrics:
    """Sums of ``RolloutMetrics`` over the rollouts of one harness."""

    harness: str
    rollouts: int = 0
    dropped_rollouts: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    break_causes: Mapping[str, int] = field(default_factory=dict)
    excluded: Mapping[str, int] = field(default_factory=dict)
    drop_reasons: Mapping[str, int] = field(default_factory=dict)

    @property
    def merge_rate(self) -> float | None:
        c = self.counts
        return _merge_rate(c.get("merged_calls", 0), c.get("trainable_calls", 0), c.get("agents", 0))

    @property
    def chains_per_rollout(self) -> float:
        kept = self.rollouts - self.dropped_rollouts
        return self.counts.get("chains", 0) / kept if kept else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "harness": self.harness,
            "rollouts": self.rollouts,
            "dropped_rollouts": self.dropped_rollouts,
            **dict(self.counts),
            "merge_rate": self.merge_rate,
            "chains_per_rollout": self.chains_per_rollout,
            "break_causes": dict(self.break_causes),
            "excluded": dict(self.excluded),
            "drop_reasons": dict(self.drop_reasons),
        }

    def add(self, m: RolloutMetrics) -> HarnessMetrics:
        return replace(
            self,
            rollouts=self.rollouts + 1,
            dropped_rollouts=self.dropped_rollouts + (m.dropped_reason is not None),
            counts=_sum(self.counts, {k: getattr(m, k) for k in _COUNTS}),
            break_causes=_sum(self.break_causes, m.break_causes),
            excluded=_sum(self.excluded, m.excluded),
            drop_reasons=_sum(self.drop_reasons, {_reason_key(m.dropped_reason): 1})
            if m.dropped_reason
            else self.drop_reasons,
        )


def aggregate_by_harness(metrics: Iterable[RolloutMetrics]) -> dict[str, HarnessMetrics]:
    """Per-harness sums (rollouts without a harness are grouped under ``"unknown"``)."""
    out: dict[str, HarnessMetrics] = {}
    for m in metrics:
        key = m.harness or "unknown"
        out[key] = out.get(key, HarnessMetrics(harness=key)).add(m)
    return out


def _merge_rate(merged: int, trainable: int, agents: int) -> float | None:
    possible = trainable - agents
    return merged / possible if possible > 0 else None


def _sum(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    total = Counter(a)
    total.update(b)
    return dict(total)


def _reason_key(reason: str) -> str:
    """``infra:call_error:engine_http (call 3)`` -> ``infra:call_error:engine_http``."""
    return reason.split(" ", 1)[0]
