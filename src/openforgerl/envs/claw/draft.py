"""`TaskDraft`: a task in memory, and `write_task` to lay it out as a task folder.

Used by the suite generator and by the importers, so every task we produce has the same shape:
task.toml, instruction.md, environment/{fixtures,workspace}, tests/{checks.toml,test.sh},
solution/{actions.json,solve.sh}. The oracle is a gold tool-call sequence; solve.sh replays it through
the shell CLI, retrying a call that the task's fault injection makes fail.
"""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.envs.claw.tools import get_tool
from openforgerl.tasks import _toml

__all__ = ["Action", "TaskDraft", "solve_script", "write_task"]


@dataclass(frozen=True)
class Action:
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

    @property
    def folder(self) -> str:
        return self.name.rsplit("/", 1)[-1]


def _cli_words(action: Action) -> list[str]:
    spec = get_tool(action.tool)
    if spec is None:
        raise KeyError(f"unknown tool {action.tool!r}")
    words = [spec.service, spec.command]
    for key, value in action.args.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            words += [flag] if value else []
        elif isinstance(value, list):
            words += [flag, *map(str, value)]
        else:
            words += [flag, str(value)]
    return words


def solve_script(actions: list[Action], faults: list[dict[str, Any]]) -> str:
    """bash oracle: one CLI call per action; a call hit by an injected fault is retried once."""
    failing = {(f["tool"], int(f.get("call", 1))) for f in faults}
    counts: dict[str, int] = {}
    lines = ["#!/usr/bin/env bash", "# Oracle: replays solution/actions.json through the shell CLI.",
             "set -euo pipefail", 'claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }', ""]
    for action in actions:
        counts[action.tool] = counts.get(action.tool, 0) + 1
        call = "claw " + " ".join(shlex.quote(w) for w in _cli_words(action))
        if (action.tool, counts[action.tool]) in failing:
            counts[action.tool] += 1
            call = f"{call} || {{ sleep 0.2; {call}; }}"
        lines.append(call)
    return "\n".join(lines) + "\n"


def _task_toml(d: TaskDraft) -> dict[str, Any]:
    meta: dict[str, Any] = {"services": d.services, "budget_s": d.budget_s, "split": d.split,
                            "difficulty": d.difficulty, "tags": d.tags, "source": d.source}
    if d.tools:
        meta["tools"] = d.tools
    if d.faults:
        meta["faults"] = d.faults
    meta |= d.extra_meta
    if meta.get("verifier", "checks") != "checks":
        meta.pop("tools", None)
    return {"schema_version": "1.4", "task": {"name": d.name, "description": d.description},
            "metadata": {"openforgerl": meta}, "agent": {"timeout_sec": d.budget_s},
            "verifier": {"timeout_sec": 60.0}}


_TEST_SH = """#!/usr/bin/env bash
# Harbor entry point: judge the live Claw service, write /logs/verifier/reward.json.
set -euo pipefail
mkdir -p /logs/verifier
"${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.verify --checks "$(dirname "$0")/checks.toml" \\
  --workdir "${WORKDIR:-$PWD}" --out /logs/verifier/reward.json
"""


def _write(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(0o755)


def write_task(d: TaskDraft, suite_dir: Path) -> Path:
    """Lay `d` out under `suite_dir/<folder>` (replacing an existing folder) and return the path."""
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
        _write(root / "tests" / "test.sh", _TEST_SH, executable=True)
    actions = [{"tool": a.tool, "args": a.args} for a in d.actions]
    _write(root / "solution" / "actions.json", json.dumps(actions, indent=1) + "\n")
    _write(root / "solution" / "solve.sh", solve_script(d.actions, d.faults), executable=True)
    for rel, data in d.extra_files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data if isinstance(data, bytes) else data.encode())
    return root
