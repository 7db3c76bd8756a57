"""The task folder format (Harbor-compatible) and its loader.

```
<task>/
  task.toml            Harbor TaskConfig fields; our settings under [metadata.openforgerl]
  instruction.md       the prompt
  environment/
    fixtures/<service>.json   initial state of each Claw service (envs/claw)
    workspace/...             files laid out in the agent's /workdir
  tests/checks.toml    declarative verifier spec (env/checks/spec.py); tests/test.sh for Harbor
  solution/solve.sh    oracle
```
Loading never half-succeeds: a bad folder raises `TaskFormatError` naming the file, the field and why.
The format is the same for every environment; what a field may name (a Claw service, a tool) is checked
by the task's family (tasks/families.py) when the folder loads.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openforgerl.tasks.errors import TaskFormatError

__all__ = ["FaultSpec", "OpenforgeMeta", "Task", "TaskConfig", "TaskFormatError", "check_verifier_file",
           "find_tasks", "load_task", "read_tree", "validate_model"]


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


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise TaskFormatError(path, "", "missing (every task folder needs task.toml)")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TaskFormatError(path, "", f"not valid TOML: {exc}") from exc


def validate_model(model: type[BaseModel], data: Any, path: Path, prefix: str) -> Any:
    """`model` from `data`, or a `TaskFormatError` naming the first bad field under `prefix`."""
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
    config: TaskConfig = validate_model(TaskConfig, _read_toml(toml_path), toml_path, "")
    ours = config.metadata.get("openforgerl")
    ours = _foreign_meta(root, config) if ours is None else ours
    meta: OpenforgeMeta = validate_model(OpenforgeMeta, ours, toml_path, "metadata.openforgerl")
    instruction_path = root / "instruction.md"
    if not instruction_path.is_file():
        raise TaskFormatError(instruction_path, "", "missing (the prompt given to the agent)")
    instruction = instruction_path.read_text().strip()
    if not instruction:
        raise TaskFormatError(instruction_path, "", "empty")
    task = Task(root, _task_id(root, config), instruction, config, meta)
    from openforgerl.tasks.families import family_of  # families import this module: imported late

    family_of(task).check(task)
    return task


VERIFIER_FILES = {"checks": "tests/checks.toml", "script": "tests/test.sh", "pytest": "verifier/test_output.py",
                  "python": "tests/grade.py"}


def check_verifier_file(task: Task) -> Path:
    """The file the task's `verifier` runs (raises `TaskFormatError` when it is missing)."""
    path = task.root / VERIFIER_FILES[task.meta.verifier]
    if not path.is_file():
        raise TaskFormatError(path, "", f"missing (verifier = {task.meta.verifier!r} needs it)")
    return path


def read_tree(root: Path, prefix: str = "") -> dict[str, bytes]:
    """Every file under `root` as {prefix + relative path: bytes}."""
    if not root.is_dir():
        return {}
    return {prefix + str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def find_tasks(root: Path | str) -> list[Path]:
    """Every task folder under `root` (a folder holding task.toml, or `builtin:<suite>`), sorted; `root`
    itself if it is one."""
    from openforgerl.tasks.suites import resolve_task_root

    root = resolve_task_root(root, must_exist=False)
    if (root / "task.toml").is_file():
        return [root]
    return sorted(p.parent for p in root.rglob("task.toml"))
