"""Means with 95 % bootstrap confidence intervals over tasks (pure).

Rollouts of one task are not independent (same instruction, same world), so the resampling unit is
the task: draw tasks with replacement, pool their rollouts' values, take the mean.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Estimate", "bootstrap_mean"]


@dataclass(frozen=True, slots=True)
class Estimate:
    value: float | None
    low: float | None
    high: float | None
    n: int
    """Rollouts with a defined value."""
    tasks: int


def bootstrap_mean(
    by_task: Mapping[str, Sequence[float]], *, resamples: int = 1000, seed: int = 0, ci: float = 0.95
) -> Estimate:
    groups = [list(v) for v in by_task.values() if v]
    n = sum(len(g) for g in groups)
    if not n:
        return Estimate(None, None, None, 0, 0)
    value = sum(sum(g) for g in groups) / n
    if len(groups) == 1:
        return Estimate(value, value, value, n, 1)
    rng = random.Random(seed)
    sums = [(sum(g), len(g)) for g in groups]
    means = []
    for _ in range(resamples):
        s = c = 0.0
        for _ in range(len(sums)):
            gs, gc = sums[rng.randrange(len(sums))]
            s += gs
            c += gc
        means.append(s / c)
    means.sort()
    lo = means[int((1 - ci) / 2 * (resamples - 1))]
    hi = means[int((1 + ci) / 2 * (resamples - 1))]
    return Estimate(value, lo, hi, n, len(groups))
