"""The task folder's types: `task.toml` as parsed (`TaskConfig`, our `[metadata.openforgerl]` as
`OpenforgeMeta`) and a loaded folder (`Task`). Apart from the loader (`format`) because the families
(`families`) that check a folder name `Task` too, and the loader asks the families: both stand on this.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FaultSpec", "OpenforgeMeta", "Task", "TaskConfig", "TaskSection", "TimeoutSection"]


class FaultSpec(BaseModel):
    """Make the `call`-th call (1-based) of `tool` fail transiently, so the agent must retry."""

    model_config = ConfigDict(extra="forbid")
    tool: str
    call: int = Field(1, ge=1)
    kind: Literal["error", "timeout"] = "error"
    status: int = Field(503, ge=500, le=599)
    delay_s: float = Field(2.0, ge=0, le=60)


class OpenforgeMeta(BaseModel):
    """`[metadata.openforgerl]`: what the orchestrator and the trainer need to know about a task."""

    model_config = ConfigDict(extra="forbid")
    services: list[str] = Field(default_factory=list)
    """Claw services the task uses; their tools are exposed unless `tools` narrows them."""
    tools: list[str] = Field(default_factory=list)
    """Exact tool names to expose (default: every tool of `services`, plus the workspace files)."""
    budget_s: float = Field(300.0, gt=0)
    split: Literal["train", "test"] = "train"
    difficulty: Literal["easy", "medium", "hard"] = "medium"
    tags: list[str] = Field(default_factory=list)
    faults: list[FaultSpec] = Field(default_factory=list)
    verifier: Literal["checks", "pytest", "script", "python"] = "checks"
    """checks = tests/checks.toml; pytest = claw-bench verifier/test_output.py; script = Harbor
    tests/test.sh; python = tests/grade.py with `grade(transcript, workspace_path) -> dict[str, float]`."""
    requires_internet: bool = False
    requires_llm_judge: bool = False
    unsupported: list[str] = Field(default_factory=list)
    """Why this imported task cannot run here (e.g. a service we do not implement); flagged, not run."""
    needs: list[str] = Field(default_factory=list)
    """What this task needs that is not given (e.g. `user_simulator`, `transcript`); flagged, not run."""
    max_turns: int | None = Field(None, ge=1)
    """The task's own cap on the agent's turns (Claw-Eval `environment.max_turns`); a harness with a turn
    limit (`zero`) runs with the lower of its own and this one."""
    no_oracle: str = ""
    """Why the task ships no oracle ("" = it has one); `tasks validate` skips it, `eval` still runs it."""
    source: str = ""


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow")


class TaskSection(_Section):
    name: str | None = None
    description: str = ""


class TimeoutSection(_Section):
    timeout_sec: float | None = None


class TaskConfig(BaseModel):
    """task.toml. Harbor's sections are accepted as they are; only ours is strict."""

    model_config = ConfigDict(extra="allow")
    schema_version: str = "1.4"
    task: TaskSection = Field(default_factory=TaskSection)
    metadata: dict[str, Any] = Field(default_factory=dict)
    agent: TimeoutSection = Field(default_factory=TimeoutSection)
    verifier: TimeoutSection = Field(default_factory=TimeoutSection)
    environment: _Section = Field(default_factory=_Section)


@dataclass(frozen=True)
class Task:
    """A loaded task folder."""

    root: Path
    task_id: str
    instruction: str
    config: TaskConfig
    meta: OpenforgeMeta

    @property
    def budget_s(self) -> float:
        return self.config.agent.timeout_sec or self.meta.budget_s

    @property
    def flags(self) -> list[str]:
        """Reasons this task cannot run offline and deterministically (empty = runnable)."""
        out = ["requires_internet"] if self.meta.requires_internet else []
        out += ["requires_llm_judge"] if self.meta.requires_llm_judge else []
        out += [f"needs:{n}" for n in self.meta.needs]
        return out + [f"unsupported:{u}" for u in self.meta.unsupported]
