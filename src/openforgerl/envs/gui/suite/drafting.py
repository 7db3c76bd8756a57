"""A GUI task before it is written (`GuiDraft`), the builders of its oracle steps (`click`, `type_`, `key`,
`fill`, `choose`; its checks are the SDK's `env.checks.spec.record_entry`), and how a draft becomes a
Harbor task folder with the GUI oracle and verifier scripts (`write_gui_task`). The suite's families
(families.py) and the importers (importers/) write their tasks through it."""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.tasks import _toml
from openforgerl.tasks.draft import TaskDraft, write_task

__all__ = ["GuiDraft", "Step", "choose", "click", "fill", "key", "type_", "write_gui_task"]

Step = dict[str, Any]


@dataclass
class GuiDraft:
    name: str
    instruction: str
    kind: str  # "browser" | "desktop"
    env: dict[str, Any]  # environment/gui.json: start_url, apps, desktop
    checks: list[dict[str, Any]]
    oracle: list[Step]
    workspace: dict[str, str] = field(default_factory=dict)
    difficulty: str = "easy"
    tags: list[str] = field(default_factory=list)
    split: str = "train"
    budget_s: float = 300.0
    source: str = "openforgerl/gui"
    extra_meta: dict[str, Any] = field(default_factory=dict)
    """Flags of imported tasks (`requires_internet`, `requires_llm_judge`, `unsupported`, `no_oracle`...)."""
    extra_files: dict[str, str] = field(default_factory=dict)


def click(target: str, **kw: Any) -> Step:
    return {"action": "click", "target": target, **kw}


def type_(text: str) -> Step:
    return {"action": "type", "text": text}


def key(keys: str) -> Step:
    return {"action": "key", "keys": keys}


def fill(target: str, text: str) -> list[Step]:
    return [click(target), type_(text)]


def choose(target: str, option: str) -> list[Step]:
    """A <select>: focus it, type the option's label (type-ahead), Enter closes the list."""
    return [click(target), type_(option), key("enter")]


_SOLVE_SH = """#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the computer service (needs the rollout's token).
set -euo pipefail
"${OPENFORGERL_PYTHON:-python3}" -I -m openforgerl.envs.gui.oracle --actions "$(dirname "$0")/actions.json" \\
  --token "$OPENFORGERL_GUI_TOKEN"
"""
_TEST_SH = """#!/usr/bin/env bash
# Harbor entry point: judge the apps' state and the workdir, write /logs/verifier/reward.json.
set -euo pipefail
mkdir -p /logs/verifier
"${OPENFORGERL_PYTHON:-python3}" -I -m openforgerl.envs.gui.verify --checks "$(dirname "$0")/checks.toml" \\
  --state-url "${OPENFORGERL_GUI_APPS_URL:-}" --token "${OPENFORGERL_GUI_TOKEN:-}" --workdir "${WORKDIR:-$PWD}" \\
  --out /logs/verifier/reward.json
"""  # noqa: E501  (every shipped GUI task's tests/test.sh is these bytes: a change rewrites the suite)


def write_gui_task(d: GuiDraft, suite: Path) -> Path:
    """Lay `d` out in the Harbor layout, with `[environment] kind` and the GUI oracle/verifier scripts."""
    draft = TaskDraft(
        name=d.name,
        instruction=d.instruction,
        services=[],
        checks=d.checks,
        workspace=d.workspace,
        difficulty=d.difficulty,
        split=d.split,
        tags=[d.kind, *d.tags],
        budget_s=d.budget_s,
        source=d.source,
        extra_meta=d.extra_meta,
        extra_files={
            "environment/gui.json": json.dumps(d.env, indent=1) + "\n",
            "solution/actions.json": json.dumps(d.oracle, indent=1) + "\n",
            "solution/solve.sh": _SOLVE_SH,
            "tests/test.sh": _TEST_SH,
            **d.extra_files,
        },
    )
    root = write_task(draft, suite)
    toml_path = root / "task.toml"
    data = tomllib.loads(toml_path.read_text())
    data["environment"] = {"kind": d.kind, "cpus": 1, "memory_mb": 2048}
    toml_path.write_text(_toml.dumps(data))
    for script in ("solution/solve.sh", "tests/test.sh"):
        (root / script).chmod(0o755)
    return root
