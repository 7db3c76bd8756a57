"""tau2-bench `data/tau2/domains/<domain>/tasks.json` (+ `split_tasks.json`) → our task folders.

Scored the way upstream's evaluator (`src/tau2/evaluator/evaluator.py`) does: the reward is the product
of the components named in `reward_basis`:
- `DB` / `ENV_ASSERTION` → a `tau2_db` check: the final domain DB must hash equal to the DB after
  replaying the gold `actions` on the initial state (the actions are one reference trajectory, not
  required calls; kept in `tests/tau2_gold_actions.json`);
- `COMMUNICATE` → a `communicate` check: every `communicate_info` string in the agent's messages;
- `ACTION` → one `called` check per gold action (with `compare_args`), only then;
- `NL_ASSERTION` → `requires_llm_judge`.
`split_tasks.json` next to `tasks.json` gives the split (`train` / `test`; a task in neither is test).

None of it runs here yet, and every task says why: `unsupported: tau2_domain:<domain>` (the domain's
tools and DB are not ours), `needs: user_simulator` (tau2's user is an LLM playing
`user_scenario`; not flagged when a user engine is given) and `needs: transcript` for the communicate
check. The gold actions use tau2's tools, so there is no oracle for our runtime (`no_oracle`).
The instruction is the user's scenario (reason for call, known info, task instructions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openforgerl.tasks.draft import TaskDraft

__all__ = ["convert_tau2", "load_splits"]


def _instruction(task: dict[str, Any]) -> str:
    scenario = task.get("user_scenario") or {}
    inst = scenario.get("instructions") or {}
    if isinstance(inst, str):
        return inst
    parts = [inst.get("reason_for_call"), inst.get("known_info"), inst.get("task_instructions")]
    return "\n\n".join(str(p).strip() for p in parts if p)


def _action_checks(criteria: dict[str, Any]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for i, action in enumerate(criteria.get("actions") or []):
        compare = action.get("compare_args")
        args = action.get("arguments") or {}
        match = {k: v for k, v in args.items() if (compare is None or k in compare)
                 and isinstance(v, (str, int, float, bool))}
        checks.append({"kind": "called", "name": f"action_{i}_{action.get('name')}", "tool": str(action.get("name")),
                       **({"match": match} if match else {})})
    return checks


def _checks(criteria: dict[str, Any], basis: set[str], domain: str) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    if basis & {"DB", "ENV_ASSERTION"}:
        checks.append({"kind": "tau2_db", "name": "db_state", "domain": domain, "actions": "tau2_gold_actions.json"})
    if "COMMUNICATE" in basis and criteria.get("communicate_info"):
        checks.append({"kind": "communicate", "name": "communicate",
                       "info": [str(i) for i in criteria["communicate_info"]]})
    if "ACTION" in basis:
        checks += _action_checks(criteria)
    return checks


def load_splits(tasks_json: Path) -> dict[str, str]:
    """Task id → `train` / `test` from `split_tasks.json` beside `tasks.json` ({} when absent)."""
    path = tasks_json.with_name("split_tasks.json")
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {str(t): split for split in ("test", "train") for t in data.get(split) or []}


def _needs(task: dict[str, Any], checks: list[dict[str, Any]], user_engine: str | None) -> list[str]:
    needs = [] if user_engine or not task.get("user_scenario") else ["user_simulator"]
    return needs + (["transcript"] if any(c["kind"] == "communicate" for c in checks) else [])


def _draft(task: dict[str, Any], domain: str, split: str, user_engine: str | None) -> TaskDraft:
    criteria = task.get("evaluation_criteria") or {}
    basis = [str(b) for b in criteria.get("reward_basis") or []]
    checks = _checks(criteria, set(basis), domain)
    draft = TaskDraft(
        name=f"tau2/{domain}/{task.get('id')}", instruction=_instruction(task), services=[],
        checks=checks or [{"kind": "answer", "name": "no_criteria", "equals": "<no criteria>"}],
        source="tau2", split=split, tags=[f"tau2:{domain}", *[f"basis:{b}" for b in basis]],
        extra_files={"tests/tau2_criteria.json": json.dumps(criteria, indent=1),
                     "tests/tau2_gold_actions.json": json.dumps(criteria.get("actions") or [], indent=1)})
    draft.extra_meta = {"requires_llm_judge": "NL_ASSERTION" in basis,
                        "unsupported": [f"tau2_domain:{domain}"], "needs": _needs(task, checks, user_engine),
                        "no_oracle": f"the gold actions use tau2's {domain} tools (tests/tau2_gold_actions.json)"}
    return draft


def convert_tau2(tasks_json: Path, domain: str | None = None, user_engine: str | None = None) -> list[TaskDraft]:
    domain = domain or tasks_json.parent.name
    splits = load_splits(tasks_json)
    return [_draft(t, domain, splits.get(str(t.get("id")), "test"), user_engine)
            for t in json.loads(tasks_json.read_text())]
