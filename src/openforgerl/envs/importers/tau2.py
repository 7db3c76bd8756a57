"""tau2-bench `tasks.json` → our task folders (flagged: their domain tools are not ours).

Each task becomes a folder whose instruction is the simulated user's scenario (reason for call,
known info, task instructions: "solo mode"), whose checks record the intent (gold `actions` as
`called` checks, `communicate_info` as answer checks) and whose `tests/tau2_criteria.json` keeps the
original evaluation criteria. Running them needs tau2's domain DB and tools (airline, retail, …),
so every imported task is marked `unsupported: tau2_domain:<domain>`; `NL_ASSERTION` in the reward
basis also marks `requires_llm_judge`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openforgerl.envs.draft import TaskDraft

__all__ = ["convert_tau2"]


def _instruction(task: dict[str, Any]) -> str:
    scenario = task.get("user_scenario") or {}
    inst = scenario.get("instructions") or {}
    if isinstance(inst, str):
        return inst
    parts = [inst.get("reason_for_call"), inst.get("known_info"), inst.get("task_instructions")]
    return "\n\n".join(str(p).strip() for p in parts if p)


def _checks(criteria: dict[str, Any]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for i, action in enumerate(criteria.get("actions") or []):
        compare = action.get("compare_args")
        args = action.get("arguments") or {}
        match = {k: v for k, v in args.items() if (compare is None or k in compare)
                 and isinstance(v, (str, int, float, bool))}
        checks.append({"kind": "called", "name": f"action_{i}_{action.get('name')}", "tool": str(action.get("name")),
                       **({"match": match} if match else {})})
    for i, info in enumerate(criteria.get("communicate_info") or []):
        checks.append({"kind": "answer", "name": f"communicate_{i}", "contains": str(info)})
    return checks


def convert_tau2(tasks_json: Path, domain: str | None = None) -> list[TaskDraft]:
    domain = domain or tasks_json.parent.name
    drafts = []
    for task in json.loads(tasks_json.read_text()):
        criteria = task.get("evaluation_criteria") or {}
        basis = [str(b) for b in criteria.get("reward_basis") or []]
        draft = TaskDraft(
            name=f"tau2/{domain}/{task.get('id')}", instruction=_instruction(task), services=[],
            checks=_checks(criteria) or [{"kind": "answer", "name": "no_criteria", "equals": "<no criteria>"}],
            source="tau2", split="test", tags=[f"tau2:{domain}", *[f"basis:{b}" for b in basis]],
            extra_files={"tests/tau2_criteria.json": json.dumps(criteria, indent=1)})
        draft.extra_meta = {"requires_llm_judge": "NL_ASSERTION" in basis,
                            "unsupported": [f"tau2_domain:{domain}"]}
        drafts.append(draft)
    return drafts
