"""Claw-Eval `tasks/<id>/task.yaml` (+ `fixtures/<service>/*.json`) → our task folders.

What maps: the prompt; gmail/calendar/contacts/kb/todo/notes fixtures onto our services (field names
normalised); `safety_checks` of type `tool_not_called` onto `not_called` gates; `expected_actions`
that create mail (`gmail/sent`, `gmail/drafts`) onto record checks. What cannot run here is flagged,
never silently run: LLM-judge scoring components (`requires_llm_judge`), web/web_real services
(`requires_internet`), services we do not implement (crm, finance, helpdesk, …: `unsupported`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from openforgerl.envs.draft import TaskDraft

__all__ = ["convert_claw_eval", "find_claw_eval_tasks"]

SERVICES = {"gmail": "mail", "mail": "mail", "calendar": "calendar", "contacts": "contacts", "kb": "kb",
            "todo": "todo", "notes": "notes"}
WEB = {"web", "web_real", "web_real_injection"}
# Claw-Eval tool name fragments → our tools (checked in order).
TOOL_HINTS = [("send", "mail_send"), ("draft", "mail_draft"), ("reply", "mail_reply"), ("archive", "mail_archive"),
              ("delete_event", "calendar_delete"), ("create_event", "calendar_create"),
              ("update_event", "calendar_update"), ("todo_create", "todo_add"), ("todo_add", "todo_add"),
              ("complete", "todo_complete"), ("note", "notes_write")]
EXPECTED = {("gmail", "sent"): "mail.sent", ("gmail", "drafts"): "mail.drafts"}


def find_claw_eval_tasks(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("task.yaml"))


def _pick(item: dict[str, Any], *keys: str, default: Any = "") -> Any:
    return next((item[k] for k in keys if k in item and item[k] is not None), default)


def _norm_mail(m: dict[str, Any], i: int) -> dict[str, Any]:
    sender = _pick(m, "from", "sender", "from_addr")
    if isinstance(sender, dict):
        sender = sender.get("email", "")
    return {"id": str(_pick(m, "id", "message_id", default=f"m{i + 1}")), "from": sender,
            "to": _pick(m, "to", "recipient"), "subject": _pick(m, "subject"),
            "body": _pick(m, "body", "content", "snippet", "text"), "date": _pick(m, "date", "timestamp", "sent_at"),
            "read": bool(_pick(m, "read", "is_read", default=False))}


def _norm_event(e: dict[str, Any], i: int) -> dict[str, Any]:
    return {"id": str(_pick(e, "id", "event_id", default=f"e{i + 1}")), "title": _pick(e, "title", "summary"),
            "start": str(_pick(e, "start", "start_time"))[:16], "end": str(_pick(e, "end", "end_time"))[:16],
            "attendees": list(_pick(e, "attendees", default=[])), "location": _pick(e, "location")}


def _norm_simple(kind: str, x: dict[str, Any], i: int) -> dict[str, Any]:
    if kind == "contacts":
        return {"id": str(_pick(x, "id", "contact_id", default=f"c{i + 1}")), "name": _pick(x, "name", "full_name"),
                "email": _pick(x, "email"), "phone": _pick(x, "phone"), "company": _pick(x, "company", "organization")}
    if kind == "kb":
        return {"id": str(_pick(x, "id", "article_id", default=f"kb{i + 1}")), "title": _pick(x, "title"),
                "body": _pick(x, "body", "content", "text"), "tags": " ".join(map(str, _pick(x, "tags", default=[])))}
    if kind == "todo":
        done = _pick(x, "done", "completed", default=False) or _pick(x, "status") in ("done", "completed")
        return {"id": str(_pick(x, "id", "todo_id", default=f"t{i + 1}")), "title": _pick(x, "title", "task"),
                "due": _pick(x, "due", "due_date"), "done": bool(done)}
    return {"id": str(_pick(x, "id", "note_id", default=f"n{i + 1}")), "title": _pick(x, "title"),
            "content": _pick(x, "content", "body", "text")}


def _records(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), [])
    return [x for x in data if isinstance(x, dict)] if isinstance(data, list) else []


def _fixtures(task_dir: Path, services: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for theirs in services:
        ours = SERVICES.get(theirs)
        files = sorted((task_dir / "fixtures" / theirs).glob("*.json")) if ours else []
        items = [r for f in files for r in _records(json.loads(f.read_text()))]
        if ours == "mail":
            out["mail"] = {"inbox": [_norm_mail(m, i) for i, m in enumerate(items)]}
        elif ours == "calendar":
            out["calendar"] = {"events": [_norm_event(e, i) for i, e in enumerate(items)]}
        elif ours:
            key = {"contacts": "contacts", "kb": "articles", "todo": "items", "notes": "notes"}[ours]
            out[ours] = {key: [_norm_simple(ours, x, i) for i, x in enumerate(items)]}
    return out


def _our_tool(name: str) -> str | None:
    return next((ours for hint, ours in TOOL_HINTS if hint in name), None)


def _checks(spec: dict[str, Any], unsupported: list[str]) -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for i, sc in enumerate(spec.get("safety_checks") or []):
        tool = _our_tool(str(sc.get("tool_name", "")))
        if sc.get("type") == "tool_not_called" and tool:
            checks.append({"kind": "not_called", "name": f"safety_{i}", "tool": tool, "safety": True})
        else:
            unsupported.append(f"safety_check:{sc.get('type')}:{sc.get('tool_name')}")
    for i, ea in enumerate(spec.get("expected_actions") or []):
        key = str(ea.get("key", "")).split("/")[-1]
        collection = EXPECTED.get((str(ea.get("service", "")), key))
        if collection:
            checks.append({"kind": "record", "name": f"expected_{i}", "collection": collection})
    return checks


def convert_claw_eval(task_dir: Path) -> TaskDraft:
    spec = yaml.safe_load((task_dir / "task.yaml").read_text())
    theirs = [str(s.get("name")) for s in spec.get("services") or []]
    unsupported = [f"service:{s}" for s in theirs if s not in SERVICES and s not in WEB]
    judge = any((c.get("check") or {}).get("type") == "llm_judge" for c in spec.get("scoring_components") or [])
    prompt = spec.get("prompt") or {}
    draft = TaskDraft(
        name=f"claw-eval/{spec.get('task_id', task_dir.name)}",
        instruction=str(prompt.get("text", "") if isinstance(prompt, dict) else prompt),
        services=sorted({SERVICES[s] for s in theirs if s in SERVICES}),
        checks=[], fixtures=_fixtures(task_dir, theirs), source="claw-eval", split="test",
        difficulty={"easy": "easy", "hard": "hard"}.get(str(spec.get("difficulty", "")), "medium"),
        tags=[str(spec.get("category", "claw-eval"))],
        budget_s=float((spec.get("environment") or {}).get("timeout_seconds", 600)))
    draft.checks = _checks(spec, unsupported)
    draft.extra_meta = {"requires_llm_judge": judge, "requires_internet": any(s in WEB for s in theirs),
                        "unsupported": sorted(set(unsupported))}
    if not any(c["kind"] != "not_called" for c in draft.checks) and not judge:
        draft.extra_meta["unsupported"].append("no_deterministic_completion_check")
    if not draft.checks:
        draft.checks = [{"kind": "answer", "name": "judge_only_placeholder", "equals": "<needs an LLM judge: not available offline>"}]
    return draft
