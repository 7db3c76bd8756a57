"""`TaskDraft`: a task in memory, and `write_task` to lay it out as a task folder.

Used by the suite generators, the importers and synthesis, so every task we produce has the same shape:
task.toml, instruction.md, environment/{fixtures,workspace}, tests/checks.toml, solution/actions.json
(the oracle as a gold tool-call sequence), plus the scripts an environment derives from the draft
(`scripts`: e.g. the Claw environment's tests/test.sh and solution/solve.sh, `envs/claw/drafts.py`) and
any `extra_files`.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.tasks import _toml

__all__ = ["Action", "DraftScripts", "TaskDraft", "write_task"]


@dataclass(frozen=True)
class Action:
    """One gold tool call of the oracle."""

    tool: str
    args: dict[str, Any]


@dataclass
class TaskDraft:
    name: str  # task id, e.g. "claw/mail-send-01"; the folder is its last path part
    instruction: str
    services: list[str]
    checks: list[dict[str, Any]]
    actions: list[Action] = field(default_factory=list)
    fixtures: dict[str, dict[str, Any]] = field(default_factory=dict)
    workspace: dict[str, str] = field(default_factory=dict)
    tools: list[str] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    difficulty: str = "medium"
    split: str = "train"
    tags: list[str] = field(default_factory=list)
    budget_s: float = 300.0
    description: str = ""
    source: str = "openforgerl/claw"
    extra_meta: dict[str, Any] = field(default_factory=dict)
    pass_threshold: float = 1.0
    extra_files: dict[str, str | bytes] = field(default_factory=dict)
    """More files, relative to the task root (e.g. tests/grade.py of an imported task)."""
    environment: dict[str, Any] = field(default_factory=dict)
    """task.toml's `[environment]` table, e.g. `{"kind": "tau2"}`: the kind picks the task's family."""

    @property
    def folder(self) -> str:
        return self.name.rsplit("/", 1)[-1]


def _task_toml(d: TaskDraft) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "services": d.services,
        "budget_s": d.budget_s,
        "split": d.split,
        "difficulty": d.difficulty,
        "tags": d.tags,
        "source": d.source,
    }
    if d.tools:
        meta["tools"] = d.tools
    if d.faults:
        meta["faults"] = d.faults
    meta |= d.extra_meta
    if meta.get("verifier", "checks") != "checks":
        meta.pop("tools", None)
    out: dict[str, Any] = {
        "schema_version": "1.4",
        "task": {"name": d.name, "description": d.description},
        "metadata": {"openforgerl": meta},
        "agent": {"timeout_sec": d.budget_s},
        "verifier": {"timeout_sec": 60.0},
    }
    return out | ({"environment": dict(d.environment)} if d.environment else {})


def _write(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(0o755)


DraftScripts = Callable[[TaskDraft], Mapping[str, str]]
"""A draft -> the scripts its environment runs it with, {path relative to the task root: text}."""


def write_task(d: TaskDraft, suite_dir: Path, scripts: DraftScripts | None = None) -> Path:
    """Lay `d` out under `suite_dir/<folder>` (replacing an existing folder) and return the path; the
    `scripts` (executable) come before `extra_files`, which may replace them."""
    root = suite_dir / d.folder
    if root.exists():
        shutil.rmtree(root)
    _write(root / "task.toml", _toml.dumps(_task_toml(d)))
    _write(root / "instruction.md", d.instruction.strip() + "\n")
    for service, state in d.fixtures.items():
        _write(root / "environment" / "fixtures" / f"{service}.json", json.dumps(state, indent=1) + "\n")
    for rel, text in d.workspace.items():
        _write(root / "environment" / "workspace" / rel, text)
    if d.checks:
        checks = {"pass_threshold": d.pass_threshold, "checks": d.checks}
        _write(root / "tests" / "checks.toml", _toml.dumps(checks))
    actions = [{"tool": a.tool, "args": a.args} for a in d.actions]
    _write(root / "solution" / "actions.json", json.dumps(actions, indent=1) + "\n")
    for rel, text in (scripts(d) if scripts else {}).items():
        _write(root / rel, text, executable=True)
    for rel, data in d.extra_files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data if isinstance(data, bytes) else data.encode())
    return root
