"""Each imported benchmark's own scoring rule, as its authors compute it (read from upstream).

The benchmark of a task is its `[metadata] source` (set by the importer: `claw-eval`, `qwenclawbench`,
`tau2`). Per benchmark and harness the report gives:

- **Claw-Eval** (`claw_eval/models/scoring.py`, `cli.py` batch summary): a trial passes when its task
  score ≥ 0.75 (`is_pass`); pass^k = share of tasks whose k trials all pass, pass@k = share with at
  least one (our unbiased estimators give exactly these when a task has k valid trials); the score is
  the mean over tasks of the mean task score.
- **QwenClawBench** (`scripts/lib_grading.py` `pass_k_stats`, `benchmark.py`): a run passes only
  with a perfect score (≥ 1 − 1e-9); pass@k / pass^k are the unbiased `1 − C(n−c,k)/C(n,k)` /
  `C(c,k)/C(n,k)`, macro-averaged over tasks; the headline score is the mean over tasks of the mean
  (penalized hybrid) score; strict accuracy is the share of tasks whose mean score is 1.
- **tau2** (`tau2/metrics/agent_metrics.py`): success = reward ≥ 1 (within 1e-6), pass^k =
  `C(c,k)/C(n,k)` averaged over tasks; the average reward.

Differences from upstream, on purpose: infrastructure failures and configuration errors are not
trials (own columns; upstream scores an errored run 0), timeouts are trials that failed and count as
a score of 0 in the benchmark score (upstream grades what a timed-out run left, which is usually 0).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SCORING", "Scoring", "benchmark_of"]


@dataclass(frozen=True)
class Scoring:
    name: str
    threshold: float
    score: str  # what the headline score is called upstream
    strict_accuracy: bool = False


SCORING = {
    "claw-eval": Scoring("Claw-Eval", 0.75, "avg task score"),
    "qwenclawbench": Scoring("QwenClawBench", 1.0, "mean score", strict_accuracy=True),
    "tau2": Scoring("tau2-bench", 1.0, "avg reward"),
}


def benchmark_of(source: str) -> str | None:
    """The benchmark key of a task's `source` (`tau2/airline` → `tau2`), None for our own suites."""
    head = source.split("/", 1)[0].lower()
    return head if head in SCORING else None
