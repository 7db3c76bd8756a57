"""The Claw environment's part of a task draft (tasks/draft.py): tests/test.sh runs the declarative verifier
the Harbor way, and solution/solve.sh replays the gold actions through the shell CLI, retrying a call that
the task's fault injection makes fail. `write_claw_task` lays a draft out with both."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from openforgerl.env.world_tools import get_tool
from openforgerl.tasks.draft import Action, TaskDraft, write_task

__all__ = ["claw_scripts", "cli_words", "solve_script", "write_claw_task"]


def cli_words(action: Action) -> list[str]:
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
    lines = [
        "#!/usr/bin/env bash",
        "# Oracle: replays solution/actions.json through the shell CLI.",
        "set -euo pipefail",
        'claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }',
        "",
    ]
    for action in actions:
        counts[action.tool] = counts.get(action.tool, 0) + 1
        call = "claw " + " ".join(shlex.quote(w) for w in cli_words(action))
        if (action.tool, counts[action.tool]) in failing:
            counts[action.tool] += 1
            call = f"{call} || {{ sleep 0.2; {call}; }}"
        lines.append(call)
    return "\n".join(lines) + "\n"


_TEST_SH = """#!/usr/bin/env bash
# Harbor entry point: judge the live Claw service, write /logs/verifier/reward.json.
set -euo pipefail
mkdir -p /logs/verifier
"${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.verify --checks "$(dirname "$0")/checks.toml" \\
  --workdir "${WORKDIR:-$PWD}" --out /logs/verifier/reward.json
"""


def claw_scripts(d: TaskDraft) -> dict[str, str]:
    """tests/test.sh (when the draft has checks) and solution/solve.sh."""
    out = {"tests/test.sh": _TEST_SH} if d.checks else {}
    return out | {"solution/solve.sh": solve_script(d.actions, d.faults)}


def write_claw_task(d: TaskDraft, suite_dir: Path) -> Path:
    return write_task(d, suite_dir, claw_scripts)
