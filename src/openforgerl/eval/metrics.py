"""pass@k and pass^k with the unbiased estimators, per group, with bootstrap confidence intervals.

Pure functions, no I/O. For one task with n valid trials of which c succeeded:

- pass@k = 1 − C(n−c, k) / C(n, k)   (Chen et al. 2021: at least one of k draws succeeds)
- pass^k = C(c, k) / C(n, k)         (tau-bench, Yao et al. 2024: all k draws succeed)

The suite value is the mean over tasks; tasks with n < k are left out of that k and counted.

Each attempt is one of four kinds (`Trial.kind`), each reported in its own column:
- `scored`: the verifier scored it (`ok` / `agent_failed`);
- `timeout`: the agent did not finish within its budget (and no infra fault explains it). It is a
  trial that did not succeed — counted in n, never in c — but it has no reward: it is left out of
  the mean reward, not folded in as 0;
- `infra`: an infrastructure fault (engine, gateway, sandbox, verifier; a hung engine is
  `infra_error:engine`): not a trial, excluded from every metric;
- `config`: the harness could not start (`infra_error:harness_start`: its CLI is missing, or it ended
  before its first model call, as the gateway's call log shows) or its first prompt does not fit the
  model's context (`config_error:context`): a setup problem, not a trial either (the model decided
  nothing), counted apart from the other infra faults.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import comb

__all__ = [
    "CONFIG",
    "INFRA",
    "SCORED",
    "TIMEOUT",
    "Estimate",
    "GroupMetrics",
    "TaskCounts",
    "Threshold",
    "Trial",
    "count_tasks",
    "group_metrics",
    "pass_at_k",
    "pass_hat_k",
]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task (needs 1 ≤ k ≤ n, 0 ≤ c ≤ n)."""
    _check(n, c, k)
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k for one task (tau-bench `comb(c, k) / comb(n, k)`)."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (1 <= k <= n and 0 <= c <= n):
        raise ValueError(f"need 1 <= k <= n and 0 <= c <= n (got n={n}, c={c}, k={k})")


SCORED, TIMEOUT, INFRA, CONFIG = "scored", "timeout", "infra", "config"
_HARNESS_START = "infra_error:harness_start"


@dataclass(frozen=True)
class Trial:
    """One attempt of one task by one harness."""

    task_id: str
    harness: str
    reward: float | None
    infra: bool = False  # infrastructure failure: excluded from every metric
    services: tuple[str, ...] = ()
    status: str = "ok"

    @property
    def kind(self) -> str:
        """scored / timeout / infra / config (module docstring)."""
        if self.status == _HARNESS_START or self.status.startswith("config_error:"):
            return CONFIG
        if self.infra or self.status.startswith("infra_error:"):
            return INFRA
        return TIMEOUT if self.status == "timeout" else SCORED


@dataclass(frozen=True)
class TaskCounts:
    task_id: str
    n: int  # valid trials: scored + timed out
    c: int  # successful trials
    infra: int  # infra-dropped attempts (not trials)
    mean_reward: float  # over scored trials (a timeout has no reward)
    timeouts: int = 0  # trials that ran out of time (in n, never in c)
    config: int = 0  # attempts whose harness could not start (not trials)
    mean_score: float = 0.0  # over all valid trials, a timeout scoring 0 (the benchmarks' task score)


def _task_counts(task_id: str, ts: Sequence[Trial], threshold: float) -> TaskCounts:
    kinds = [t.kind for t in ts]
    rewards = [t.reward or 0.0 for t, k in zip(ts, kinds, strict=True) if k == SCORED]
    c = sum(1 for r in rewards if r >= threshold - 1e-6)
    timeouts = kinds.count(TIMEOUT)
    return TaskCounts(
        task_id,
        len(rewards) + timeouts,
        c,
        kinds.count(INFRA),
        _mean(rewards),
        timeouts,
        kinds.count(CONFIG),
        _mean([*rewards, *[0.0] * timeouts]),
    )


Threshold = float | Mapping[str, float]
"""One success threshold for every task, or one per task id (a task missing from the map: 1.0)."""


def _threshold_of(threshold: Threshold, task_id: str) -> float:
    return threshold if isinstance(threshold, float | int) else threshold.get(task_id, 1.0)


def count_tasks(trials: Iterable[Trial], threshold: Threshold = 1.0) -> list[TaskCounts]:
    """Per-task (n, c) with success = reward ≥ the task's threshold (within 1e-6, as tau2 does)."""
    by_task: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        by_task[t.task_id].append(t)
    return [
        _task_counts(task_id, ts, _threshold_of(threshold, task_id))
        for task_id, ts in sorted(by_task.items())
    ]


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float
    tasks: int  # tasks that entered this estimate (n ≥ k)


@dataclass(frozen=True)
class GroupMetrics:
    """Metrics of one group of trials (a harness, or a harness × service)."""

    tasks: int
    trials: int
    infra_dropped: int
    mean_reward: float | None  # None: no scored trial (nothing to average; the report shows n/a)
    pass_at: dict[int, Estimate] = field(default_factory=dict)
    timeouts: int = 0
    config_errors: int = 0
    pass_hat: dict[int, Estimate] = field(default_factory=dict)
    score: float | None = None  # mean over tasks of the mean task score, timeouts as 0 (eval/scoring.py)
    strict_accuracy: float | None = None  # share of tasks whose mean score is 1 (QwenClawBench)


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _mean_or_none(xs: Sequence[float]) -> float | None:
    """A mean over nothing is no number: an empty group reports n/a, not a 0.000 that reads as a result."""
    return sum(xs) / len(xs) if xs else None


def bootstrap(
    values: Sequence[float], *, resamples: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile CI of the mean, resampling tasks with replacement (seeded, deterministic)."""
    if len(values) < 2:
        v = _mean(values)
        return v, v
    rng = random.Random(seed)
    means = sorted(_mean([values[rng.randrange(len(values))] for _ in values]) for _ in range(resamples))
    lo = means[int((1 - level) / 2 * (resamples - 1))]
    hi = means[int((1 + level) / 2 * (resamples - 1))]
    return lo, hi


def _estimate(
    counts: Sequence[TaskCounts], k: int, fn: Callable[[int, int, int], float], resamples: int, seed: int
) -> Estimate:
    per_task = [fn(tc.n, tc.c, k) for tc in counts if tc.n >= k]
    lo, hi = bootstrap(per_task, resamples=resamples, seed=seed)
    return Estimate(_mean(per_task), lo, hi, len(per_task))


def group_metrics(
    trials: Sequence[Trial],
    ks: Sequence[int],
    *,
    threshold: Threshold = 1.0,
    resamples: int = 1000,
    seed: int = 0,
) -> GroupMetrics:
    counts = count_tasks(trials, threshold)
    valid = [tc for tc in counts if tc.n > 0]
    return GroupMetrics(
        tasks=len(valid),
        trials=sum(tc.n for tc in counts),
        infra_dropped=sum(tc.infra for tc in counts),
        mean_reward=_mean_or_none(
            [tc.mean_reward for tc in valid if tc.n > tc.timeouts]
        ),  # scored tasks only
        pass_at={k: _estimate(valid, k, pass_at_k, resamples, seed) for k in ks},
        pass_hat={k: _estimate(valid, k, pass_hat_k, resamples, seed) for k in ks},
        timeouts=sum(tc.timeouts for tc in counts),
        config_errors=sum(tc.config for tc in counts),
        score=_mean_or_none([tc.mean_score for tc in valid]),
        strict_accuracy=_mean_or_none([float(tc.mean_score >= 1.0 - 1e-9) for tc in valid]),
    )
