"""The task folder format (Harbor-compatible) and its loader.

```
<task>/
  task.toml            Harbor TaskConfig fields; our settings under [metadata.openforgerl]
  instruction.md       the prompt
  environment/
    fixtures/<service>.json   initial state of each Claw service
    workspace/...             files laid out in the agent's /workdir
  tests/checks.toml    declarative verifier spec (see verify/spec.py); tests/test.sh for Harbor
  solution/solve.sh    oracle, uses the shell CLI
```
Loading never half-succeeds: a bad folder raises `TaskFormatError` naming the file, the field and why.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openforgerl.envs.errors import TaskFormatError
from openforgerl.envs.tools import SERVICES, get_tool, tools_for

__all__ = ["FaultSpec", "OpenforgeMeta", "Task", "TaskConfig", "TaskFormatError", "find_tasks", "load_task"]


class FaultSpec(BaseModel):
    """Make the `call`-th call (1-based) of `tool` fail transiently, so the agent must retry."""

    model_config = ConfigDict(extra="forbid")
    tool: str
    call: int = Field(1, ge=1)
    kind: Literal["error", "timeout"] = "error"
    status: int = Field(503, ge=500, le=599)
    delay_s: float = Field(2.0, ge=0, le=60)

    @field_validator("tool")
    @classmethod
    def _known_tool(cls, v: str) -> str:
        if get_tool(v) is None:
            raise ValueError(f"unknown tool {v!r}")
        return v


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
    no_oracle: str = ""
    """Why the task ships no oracle ("" = it has one); `tasks validate` skips it, `eval` still runs it."""
    source: str = ""

    @field_validator("services")
    @classmethod
    def _known_services(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if s not in SERVICES]
        if bad:
            raise ValueError(f"unknown service(s) {bad}; known: {', '.join(SERVICES)}")
        return v

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if get_tool(t) is None]
        if bad:
            raise ValueError(f"unknown tool(s) {bad}")
        return v


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
    def tool_names(self) -> list[str]:
        if self.meta.tools:
            return list(self.meta.tools)
        services = list(self.meta.services)
        services += [s for s in ("files", "answer") if s not in services] if services else []
        return [t.name for t in tools_for(services=services)]

    @property
    def flags(self) -> list[str]:
        """Reasons this task cannot run offline and deterministically (empty = runnable)."""
        out = ["requires_internet"] if self.meta.requires_internet else []
        out += ["requires_llm_judge"] if self.meta.requires_llm_judge else []
        out += [f"needs:{n}" for n in self.meta.needs]
        return out + [f"unsupported:{u}" for u in self.meta.unsupported]


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise TaskFormatError(path, "", "missing (every task folder needs task.toml)")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError(path, "", f"not valid TOML: {exc}") from exc


def _validate(model: type[BaseModel], data: Any, path: Path, prefix: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join([prefix, *map(str, err["loc"])]).strip(".")
        raise TaskFormatError(path, field, f"{err['msg']} (got {err.get('input')!r})") from exc


def _task_id(root: Path, config: TaskConfig) -> str:
    extra = config.model_extra or {}
    return config.task.name or str(extra.get("id") or root.name)


def _foreign_meta(root: Path, config: TaskConfig) -> dict[str, Any]:
    """Settings for a folder without [metadata.openforgerl]: Harbor (tests/test.sh) or claw-bench."""
    extra = config.model_extra or {}
    verifier = "pytest" if (root / "verifier" / "test_output.py").is_file() else "script"
    meta: dict[str, Any] = {"verifier": verifier, "source": "harbor" if verifier == "script" else "claw-bench"}
    if verifier == "script" and (root / "environment" / "Dockerfile").is_file():
        meta["unsupported"] = ["container_image:environment/Dockerfile"]  # needs an image build
    if isinstance(extra.get("timeout"), (int, float)):
        meta["budget_s"] = float(extra["timeout"])
    level = str(extra.get("level", ""))
    meta["difficulty"] = {"L1": "easy", "L2": "medium"}.get(level, "hard" if level else "medium")
    meta["tags"] = [str(t) for t in extra.get("tags", []) if isinstance(t, str)]
    if extra.get("domain"):
        meta["tags"].append(f"domain:{extra['domain']}")
    return meta


def load_task(root: Path | str) -> Task:
    """Load and validate one task folder; raises TaskFormatError."""
    root = Path(root)
    if not root.is_dir():
        raise TaskFormatError(root, "", "not a folder")
    toml_path = root / "task.toml"
    config: TaskConfig = _validate(TaskConfig, _read_toml(toml_path), toml_path, "")
    ours = config.metadata.get("openforgerl")
    ours = _foreign_meta(root, config) if ours is None else ours
    meta: OpenforgeMeta = _validate(OpenforgeMeta, ours, toml_path, "metadata.openforgerl")
    instruction_path = root / "instruction.md"
    if not instruction_path.is_file():
        raise TaskFormatError(instruction_path, "", "missing (the prompt given to the agent)")
    instruction = instruction_path.read_text().strip()
    if not instruction:
        raise TaskFormatError(instruction_path, "", "empty")
    task = Task(root, _task_id(root, config), instruction, config, meta)
    from openforgerl.envs.families import family_of  # families name their runtimes lazily: no cycle

    if family_of(task).verifier_files:
        _check_verifier_files(task)
    return task


def _check_verifier_files(task: Task) -> None:
    need = {"checks": "tests/checks.toml", "script": "tests/test.sh", "pytest": "verifier/test_output.py",
            "python": "tests/grade.py"}
    path = task.root / need[task.meta.verifier]
    if not path.is_file():
        raise TaskFormatError(path, "", f"missing (verifier = {task.meta.verifier!r} needs it)")
    if task.meta.verifier == "checks":
        from openforgerl.envs.verify.spec import load_spec

        load_spec(path)


def find_tasks(root: Path | str) -> list[Path]:
    """Every task folder under `root` (a folder holding task.toml), sorted; `root` itself if it is one."""
    root = Path(root)
    if (root / "task.toml").is_file():
        return [root]
    return sorted(p.parent for p in root.rglob("task.toml"))
