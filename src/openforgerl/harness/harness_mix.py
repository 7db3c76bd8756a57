"""Mixed-harness runs: one config lists several harnesses with weights; each rollout gets one.

The assignment is a pure function of (seed, rollout key), so a retried rollout (after an infra fault) or a
resumed run gets the same harness again, and no coordinator state is needed across orchestrator replicas.
Weights are relative; a zero weight disables a harness.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, TypeVar

from openforgerl.harness.base import HarnessAdapter

T = TypeVar("T")


@dataclass(frozen=True)
class HarnessMix:
    weights: Mapping[str, float]
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.weights or any(w < 0 for w in self.weights.values()) or sum(self.weights.values()) <= 0:
            raise ValueError(
                f"harness weights must be non-negative with a positive sum: {dict(self.weights)}"
            )

    @classmethod
    def parse(cls, spec: str | Mapping[str, float] | Iterable[str], seed: int = 0) -> HarnessMix:
        """Accepts `{"codex": 2, "zero": 1}`, `"codex:2,zero:1"` or `["codex", "zero"]` (equal weights)."""
        if isinstance(spec, Mapping):
            return cls(dict(spec), seed)
        items = spec.split(",") if isinstance(spec, str) else list(spec)
        pairs = [
            (i.partition(":")[0].strip(), i.partition(":")[2].strip() or "1") for i in items if i.strip()
        ]
        return cls({name: float(w) for name, w in pairs}, seed)

    def _unit(self, key: str) -> float:
        digest = hashlib.sha256(f"{self.seed}:{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def assign(self, rollout_key: str) -> str:
        """The harness for one rollout (key: e.g. `f"{group_id}/{sample_index}"`), deterministic."""
        names = sorted(n for n, w in self.weights.items() if w > 0)
        bounds = list(accumulate(self.weights[n] for n in names))
        return names[min(bisect_right(bounds, self._unit(rollout_key) * bounds[-1]), len(names) - 1)]


def adapter_for(mix: HarnessMix, group_id: str, sample_index: int, **options: Any) -> HarnessAdapter:
    """The adapter for one rollout of a mixed run; its `name` is what the rollout records."""
    from openforgerl.harness.registry import get_harness

    return get_harness(mix.assign(f"{group_id}/{sample_index}"), **options)


def split_by_harness(items: Iterable[T], harness_of: Callable[[T], str | None]) -> dict[str, list[T]]:
    """Group samples / rollouts by the harness they recorded (None -> "unknown")."""
    out: dict[str, list[T]] = {}
    for item in items:
        out.setdefault(harness_of(item) or "unknown", []).append(item)
    return out
