"""Orchestrator settings (one frozen dataclass; the CLI and the trainer build it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from openforgerl.sandbox.base import Limits

__all__ = ["OrchestratorConfig"]


@dataclass(frozen=True)
class OrchestratorConfig:
    n: int = 8
    """Rollouts per task: one GRPO group."""
    min_group_size: int = 2
    """A group with fewer kept rollouts than this is dropped whole (no usable advantage)."""
    max_retries: int | None = None
    """Extra attempts per group to refill infra-failed slots (default: n)."""
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
    harness_cache: Path = Path("/tmp/openforgerl-harness-cache")
    """Where harness CLIs are installed (visible read-only inside local sandboxes)."""
    limits: Limits = field(default_factory=Limits)
    """Default sandbox limits when the task has none."""
    verify_timeout_s: float = 600.0
    """Upper bound on a verifier run; past it the verifier counts as broken (infra)."""
    keep_output_bytes: int = 4096
    """Tail of the harness stdout/stderr kept in `RolloutRecord.metadata`."""

    @property
    def retries(self) -> int:
        return self.n if self.max_retries is None else self.max_retries
