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
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from openforgerl.env.errors import TaskFormatError
from openforgerl.tasks.families import family_of
from openforgerl.tasks.schema import FaultSpec, OpenforgeMeta, Task, TaskConfig

__all__ = [
    "FaultSpec",
    "OpenforgeMeta",
    "Task",
    "TaskConfig",
    "TaskFormatError",
    "check_verifier_file",
    "find_tasks",
    "load_task",
    "read_tree",
    "validate_model",
]


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
    meta: dict[str, Any] = {
        "verifier": verifier,
        "source": "harbor" if verifier == "script" else "claw-bench",
    }
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
    family_of(task).check(task)
    return task


VERIFIER_FILES = {
    "checks": "tests/checks.toml",
    "script": "tests/test.sh",
    "pytest": "verifier/test_output.py",
    "python": "tests/grade.py",
}


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
