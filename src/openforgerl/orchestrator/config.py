"""Orchestrator settings: one frozen dataclass, the stage's contract. Users configure the `rollout`
section of `openforgerl.config.Config`; `Config.orchestrator()` builds this from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from openforgerl.sandbox.base import Limits

__all__ = [
    "DEFAULT_CALL_DEADLINE_S",
    "OrchestratorConfig",
    "call_deadline_s",
    "check_call_deadline",
    "deadline_margin_s",
    "max_tokens_cap",
]

DEFAULT_CALL_DEADLINE_S = 600.0
"""The gateway's per-call engine limit when nothing else bounds it."""


def deadline_margin_s(budget_s: float) -> float:
    """Time left between an engine call's deadline and its rollout's: 10 % of the budget, 2-10 s."""
    return min(10.0, max(2.0, 0.1 * budget_s))


def call_deadline_s(budget_s: float | None, configured_s: float | None = None) -> float:
    """The per-call engine limit nested inside a rollout budget: min(configured, budget - margin).

    Derived, never restated: a config names the rollout budget, the call limit follows from it
    (nested deadlines: engine call < rollout budget < sandbox lifetime).
    """
    limit = DEFAULT_CALL_DEADLINE_S if configured_s is None else configured_s
    if budget_s is None:
        return limit
    return max(0.1, min(limit, budget_s - deadline_margin_s(budget_s)))


# The fastest single-answer decode the served models reach (tokens/s: small models on one GPU; a CPU
# engine is far slower). Only used to bound one answer by its rollout's budget, so the fast end.
DECODE_TOKENS_PER_S = 100.0
DEFAULT_TASK_BUDGET_S = 300.0  # the task format's default `budget_s` (tasks/format.py)


def max_tokens_cap(budget_s: float | None, configured: int | None = None) -> int:
    """The most tokens the gateway lets one answer ask for: `configured`, else derived from the budget.

    Why: an answer still being written when its rollout's time is up only ends the rollout as a
    timeout, and meanwhile it holds an engine slot every other rollout on that replica shares. One
    answer may take at most half the budget at the fastest decode rate (`DECODE_TOKENS_PER_S`), so
    an agent keeps time for its tools and next turn: a 300 s budget gives 15000 tokens, so a client's
    `max_tokens: 32000` (Claude Code) or 100000 is clamped, and one that sends none (zero, Codex) gets
    the cap instead of vLLM's whole remaining context. A cap under 1024 would cut ordinary tool-call
    turns, so it never goes below that."""
    if configured is not None:
        return configured
    budget = budget_s if budget_s is not None else DEFAULT_TASK_BUDGET_S
    return max(1024, int(budget / 2 * DECODE_TOKENS_PER_S))


def check_call_deadline(call_deadline: float | None, budget_s: float | None) -> None:
    """Refuse a per-call deadline that does not fit inside the rollout budget (one clear line)."""
    if call_deadline is not None and budget_s is not None and call_deadline >= budget_s:
        raise ValueError(
            f"call_deadline_s ({call_deadline:g} s) must be shorter than the rollout budget "
            f"({budget_s:g} s): an engine call cannot outlive its rollout"
        )


def _default_tools() -> Path:
    from openforgerl.harness.install import tools_dir

    return tools_dir()


@dataclass(frozen=True)
class OrchestratorConfig:
    group_size: int = 8
    """Rollouts per task: one GRPO group."""
    min_group_size: int = 2
    """A group with fewer kept rollouts than this is dropped whole (no usable advantage)."""
    retries: int | None = None
    """Extra attempts per group to refill infra-failed slots (None: `group_size`)."""
    timeout_policy: Literal["drop", "zero"] = "drop"
    """`drop` (default): a timed-out rollout leaves the batch; `zero`: it is kept with reward 0."""
    max_running: int = 64
    """Rollouts in flight at once (sandbox open to sandbox closed)."""
    max_booting: int = 16
    """Sandbox boots in flight at once (open + files + services), separately capped."""
    budget_s: float | None = None
    """Override every task's wall-clock budget (None: the task's own `budget_s`)."""
    model: str = "policy"
    """Model name handed to the harness config (the gateway serves whatever it is called)."""
    harness_cache: Path = field(default_factory=_default_tools)
    """Where harness CLIs are installed (the harness package's `tools_dir()`). The sandbox root is an
    allow-list of binds (`sandbox/bwrap.py`); a folder other than the default is bound in read-only."""
    limits: Limits = field(default_factory=Limits)
    """Default sandbox limits when the task has none."""
    verify_timeout_s: float = 600.0
    """Upper bound on a verifier run; past it the verifier counts as broken (infra)."""
    keep_output_bytes: int = 4096
    """Tail of the harness stdout/stderr kept in `RolloutRecord.metadata`."""
    end_at_taint: bool = True
    """End a rollout's harness as soon as the gateway has infra-tainted it (it is dropped whatever happens
    next); False lets it run to its own end or budget (tests of a harness's own fault handling)."""
    artifacts_dir: Path | None = None
    """If set: full harness stdout/stderr and the adapter's `outputs` files are saved under
    `<artifacts_dir>/<rollout_id>/` (best effort; a missing output file is not an error)."""

    def __post_init__(self) -> None:
        if self.budget_s is not None and self.budget_s <= 0:
            raise ValueError(f"budget_s must be positive (got {self.budget_s:g})")
        # The sandbox's working directory is not the caller's: a relative `--tools-dir .tools` named a
        # CLI the sandbox could not find (`infra_error:harness_start` for every rollout). Seen by hand.
        object.__setattr__(self, "harness_cache", Path(self.harness_cache).resolve())

    @property
    def retry_budget(self) -> int:
        """The extra attempts a group may spend: `retries`, or `group_size` when unset."""
        return self.group_size if self.retries is None else self.retries
