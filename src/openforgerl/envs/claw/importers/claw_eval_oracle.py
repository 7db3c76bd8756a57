"""The oracle of an imported Claw-Eval task, derived from its checks: gold actions that satisfy every
completion check without tripping a safety gate (reads by fixture id, drafts whose body carries the
keywords, a final answer with them), or why there is none.
"""

from __future__ import annotations

from typing import Any

from openforgerl.tasks.draft import Action, TaskDraft

__all__ = ["oracle"]


def _ids(fixtures: dict[str, dict[str, Any]], service: str, key: str, field: str = "id") -> list[str]:
    return [str(x.get(field)) for x in fixtures.get(service, {}).get(key, []) if x.get(field)]


def _read_args(tool: str, n: int, fixtures: dict[str, dict[str, Any]]) -> list[dict[str, Any]] | None:
    """Args for `n` calls of a read tool, taken from the fixtures (None: not determined)."""
    pools = {
        "mail_read": ("id", _ids(fixtures, "mail", "inbox")),
        "kb_read": ("id", _ids(fixtures, "kb", "articles")),
        "notes_read": ("title", _ids(fixtures, "notes", "notes", "title")),
        "contacts_find": ("query", _ids(fixtures, "contacts", "contacts", "name")),
        "kb_search": ("query", [t.split()[0] for t in _ids(fixtures, "kb", "articles", "title")]),
    }
    if tool in ("mail_list", "calendar_list", "todo_list", "notes_list"):
        return [{} for _ in range(n)]
    if tool not in pools:
        return None
    field, values = pools[tool]
    return [{field: v} for v in values[:n]] if len(values) >= n else None


def _write_args(
    tool: str, n: int, fixtures: dict[str, dict[str, Any]], text: str
) -> list[dict[str, Any]] | None:
    if tool not in ("mail_draft", "mail_send"):
        return None  # e.g. calendar_create: its title and times are not in task.yaml
    inbox = fixtures.get("mail", {}).get("inbox", [])
    to = [str(m.get("from")) for m in inbox if m.get("from")] or ["user@example.com"]
    subject = [f"Re: {m.get('subject', '')}" for m in inbox] or ["Reply"]
    return [{"to": to[i % len(to)], "subject": subject[i % len(subject)], "body": text} for i in range(n)]


def oracle(draft: TaskDraft) -> tuple[list[Action], str]:
    """Gold actions that satisfy every completion check without tripping a safety gate, or why none."""
    forbidden = {c["tool"] for c in draft.checks if c.get("safety")}
    texts = [c for c in draft.checks if c["kind"] == "text"]
    words = [k for c in texts for k in c.get("contains", [])]
    longest = max([int(c.get("min_length", 0)) for c in texts] or [0])
    text = " ".join(["Done:", *words])
    text += " " + "." * max(0, longest - len(text)) if len(text) < longest else ""
    wanted: dict[str, int] = {}
    for c in draft.checks:
        if c["kind"] == "called" and not c.get("safety"):
            wanted[c["tool"]] = max(wanted.get(c["tool"], 0), int(c.get("min_count", 1)))
        elif c["kind"] == "answer":
            return [], "the task is judged by an LLM only"
        elif c["kind"] == "llm_judge":
            return [], "an llm_judge component scores part of the task (no reference answer to replay)"
        elif c["kind"] == "claw_eval_grader":
            return [], "scored by upstream's grader.py, which reads the conversation (no reference to replay)"
    actions: list[Action] = []
    for tool, n in wanted.items():
        if tool in forbidden:
            return [], f"{tool} is both required and forbidden"
        args = _read_args(tool, n, draft.fixtures) or _write_args(tool, n, draft.fixtures, text)
        if args is None:
            return [], f"the arguments of {tool} are not determined by task.yaml"
        actions += [Action(tool, a) for a in args]
    if texts:
        actions.append(Action("submit_answer", {"answer": text}))
    return actions, ""
