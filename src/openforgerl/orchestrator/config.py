"""Orchestrator settings (one frozen dataclass; the CLI and the trainer build it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from openforgerl.sandbox.base import Limits

__all__ = ["OrchestratorConfig"]


def _default_tools() -> Path:
    from openforgerl.harness.install import tools_dir

    return tools_dir()


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
    harness_cache: Path = field(default_factory=_default_tools)
    """Where harness CLIs are installed (the harness package's `tools_dir()`). The local backend shows
    the host root read-only inside, so it must not be under /tmp (each sandbox has its own /tmp)."""
    limits: Limits = field(default_factory=Limits)
    """Default sandbox limits when the task has none."""
    verify_timeout_s: float = 600.0
    """Upper bound on a verifier run; past it the verifier counts as broken (infra)."""
    keep_output_bytes: int = 4096
    """Tail of the harness stdout/stderr kept in `RolloutRecord.metadata`."""
    artifacts_dir: Path | None = None
    """If set: full harness stdout/stderr and the adapter's `outputs` files are saved under
    `<artifacts_dir>/<rollout_id>/` (best effort; a missing output file is not an error)."""

    @property
    def retries(self) -> int:
        return self.n if self.max_retries is None else self.max_retries
