"""The Claw world: in-memory state of every service, and the operations the tools perform on it.

Pure Python over plain dicts, no I/O except the workspace files, so the HTTP server stays a thin shell
and the state is trivially snapshotted for verifiers (`World.state()`). Fixtures are one JSON file per
service (`<fixtures>/<service>.json`) holding that service's initial state; missing files mean empty.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openforgerl.sandbox.base import TamperError
from openforgerl.sandbox.safefile import read_under, write_under

__all__ = ["EMPTY_STATE", "OPS", "ToolError", "World", "load_fixtures"]

EMPTY_STATE: dict[str, dict[str, Any]] = {
    "mail": {"inbox": [], "sent": [], "drafts": [], "archive": []},
    "calendar": {"events": []},
    "contacts": {"contacts": []},
    "kb": {"articles": []},
    "todo": {"items": []},
    "notes": {"notes": []},
    "answer": {"submitted": []},
}
NOW = "2026-03-02T09:00"


class ToolError(Exception):
    """The agent asked for something impossible (unknown id, bad path): a normal tool error result."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def load_fixtures(fixtures: Path | None) -> dict[str, dict[str, Any]]:
    """Initial state: the empty state overlaid with each `<service>.json` found in `fixtures`."""
    state = copy.deepcopy(EMPTY_STATE)
    if fixtures is None or not fixtures.is_dir():
        return state
    for service in state:
        path = fixtures / f"{service}.json"
        if path.is_file():
            state[service].update(json.loads(path.read_text()))
    return state


class World:
    """State of one rollout's services plus the agent's workspace folder."""

    def __init__(self, initial: dict[str, dict[str, Any]], workspace: Path) -> None:
        self._initial = copy.deepcopy(initial)
        self.workspace = workspace.resolve()
        self.data = copy.deepcopy(initial)
        self._next = 1000

    def reset(self) -> None:
        self.data = copy.deepcopy(self._initial)
        self._next = 1000

    def state(self) -> dict[str, Any]:
        return copy.deepcopy(self.data)

    def new_id(self, prefix: str) -> str:
        self._next += 1
        return f"{prefix}{self._next}"

    def find(self, items: list[dict[str, Any]], key: str, value: str, what: str) -> dict[str, Any]:
        for item in items:
            if str(item.get(key)) == value:
                return item
        raise ToolError(f"no {what} with {key} {value!r}", 404)

    def path(self, rel: str) -> Path:
        """Resolve a workspace path; refuse anything outside the workspace."""
        target = (self.workspace / rel).resolve()
        if target != self.workspace and self.workspace not in target.parents:
            raise ToolError(f"path {rel!r} is outside the workspace")
        return target


def _contains(haystack: object, needle: str) -> bool:
    return needle.lower() in str(haystack or "").lower()


# --- files ----------------------------------------------------------------------------------------


def _rel(w: World, a: dict[str, Any]) -> str:
    target = w.path(a["path"])
    if target == w.workspace:
        raise ToolError(f"{a['path']!r} is the workspace folder, not a file")
    return str(target.relative_to(w.workspace))


def write_file(w: World, a: dict[str, Any]) -> dict[str, Any]:
    data = a["content"].encode()
    try:  # no link followed, a FIFO never blocks the service (its lock would stall every tool)
        write_under(w.workspace, _rel(w, a), data)
    except TamperError as exc:
        raise ToolError(str(exc)) from None
    return {"path": a["path"], "bytes": len(data)}


def read_file(w: World, a: dict[str, Any]) -> dict[str, Any]:
    try:
        data = read_under(w.workspace, _rel(w, a))
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"no such file: {a['path']}", 404) from None
    except TamperError as exc:
        raise ToolError(str(exc)) from None
    return {"path": a["path"], "content": data.decode(errors="replace")}


def list_files(w: World, a: dict[str, Any]) -> dict[str, Any]:
    root = w.path(a.get("path") or ".")
    if not root.is_dir():
        raise ToolError(f"no such folder: {a.get('path')}", 404)
    names = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    )
    return {"files": names}


# --- mail -----------------------------------------------------------------------------------------


def _summary(m: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "from", "to", "subject", "date", "read")
    return {k: m[k] for k in keys if k in m}


def mail_list(w: World, a: dict[str, Any]) -> dict[str, Any]:
    folder = a.get("folder") or "inbox"
    if not isinstance(w.data["mail"].get(folder), list):
        raise ToolError(f"no folder {folder!r}; folders: inbox, sent, drafts, archive")
    msgs = [m for m in w.data["mail"][folder] if not (a.get("unread_only") and m.get("read"))]
    return {"folder": folder, "messages": [_summary(m) for m in reversed(msgs)]}


def _all_mail(w: World) -> list[tuple[str, dict[str, Any]]]:
    return [(f, m) for f, msgs in w.data["mail"].items() if isinstance(msgs, list) for m in msgs]


def mail_read(w: World, a: dict[str, Any]) -> dict[str, Any]:
    for folder, m in _all_mail(w):
        if m.get("id") == a["id"]:
            m["read"] = True
            return {"folder": folder, **m}
    raise ToolError(f"no message with id {a['id']!r}", 404)


def mail_search(w: World, a: dict[str, Any]) -> dict[str, Any]:
    q = a["query"]
    hits = [
        {"folder": f, **_summary(m)}
        for f, m in _all_mail(w)
        if any(_contains(m.get(k), q) for k in ("from", "to", "subject", "body"))
    ]
    return {"messages": hits}


def _outgoing(w: World, a: dict[str, Any], **extra: Any) -> dict[str, Any]:
    msg = {
        "id": w.new_id("m"),
        "from": w.data["mail"].get("me", "me@example.com"),
        "to": a["to"],
        "subject": a["subject"],
        "body": a["body"],
        "date": NOW,
    }
    return {**msg, "cc": a.get("cc", ""), **extra}


def mail_send(w: World, a: dict[str, Any]) -> dict[str, Any]:
    msg = _outgoing(w, a)
    w.data["mail"]["sent"].append(msg)
    return {"sent": True, "id": msg["id"]}


def mail_reply(w: World, a: dict[str, Any]) -> dict[str, Any]:
    original = mail_read(w, {"id": a["id"]})
    subject = original.get("subject", "")
    subject = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    msg = _outgoing(
        w, {"to": original.get("from", ""), "subject": subject, "body": a["body"]}, in_reply_to=a["id"]
    )
    w.data["mail"]["sent"].append(msg)
    return {"sent": True, "id": msg["id"], "to": msg["to"], "subject": subject}


def mail_draft(w: World, a: dict[str, Any]) -> dict[str, Any]:
    msg = _outgoing(w, a)
    w.data["mail"]["drafts"].append(msg)
    return {"saved": True, "id": msg["id"]}


def mail_archive(w: World, a: dict[str, Any]) -> dict[str, Any]:
    inbox = w.data["mail"]["inbox"]
    msg = w.find(inbox, "id", a["id"], "inbox message")
    inbox.remove(msg)
    w.data["mail"]["archive"].append(msg)
    return {"archived": a["id"]}


# --- calendar -------------------------------------------------------------------------------------

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$")


def _check_times(start: str, end: str) -> None:
    for value in (start, end):
        if not _TIME.match(value):
            raise ToolError(f"time {value!r} must look like 2026-03-05T14:00")
    if end <= start:
        raise ToolError("end must be after start")


def calendar_list(w: World, a: dict[str, Any]) -> dict[str, Any]:
    events = w.data["calendar"]["events"]
    day = a.get("date")
    chosen = [e for e in events if not day or str(e.get("start", "")).startswith(day)]
    return {"events": sorted(chosen, key=lambda e: str(e.get("start", "")))}


def calendar_create(w: World, a: dict[str, Any]) -> dict[str, Any]:
    _check_times(a["start"], a["end"])
    event = {
        "id": w.new_id("e"),
        "title": a["title"],
        "start": a["start"],
        "end": a["end"],
        "attendees": list(a.get("attendees") or []),
        "location": a.get("location", ""),
    }
    w.data["calendar"]["events"].append(event)
    return {"created": True, "id": event["id"]}


def calendar_update(w: World, a: dict[str, Any]) -> dict[str, Any]:
    event = w.find(w.data["calendar"]["events"], "id", a["id"], "event")
    changes = {k: v for k, v in a.items() if k != "id"}
    _check_times(changes.get("start", event["start"]), changes.get("end", event["end"]))
    event.update(changes)
    return {"updated": True, "event": event}


def calendar_delete(w: World, a: dict[str, Any]) -> dict[str, Any]:
    events = w.data["calendar"]["events"]
    events.remove(w.find(events, "id", a["id"], "event"))
    return {"deleted": a["id"]}


# --- contacts -------------------------------------------------------------------------------------


def contacts_find(w: World, a: dict[str, Any]) -> dict[str, Any]:
    q = a["query"]
    hits = [
        c
        for c in w.data["contacts"]["contacts"]
        if any(_contains(c.get(k), q) for k in ("name", "email", "company"))
    ]
    return {"contacts": hits}


def contacts_add(w: World, a: dict[str, Any]) -> dict[str, Any]:
    contact = {
        "id": w.new_id("c"),
        "name": a["name"],
        "email": a["email"],
        "phone": a.get("phone", ""),
        "company": a.get("company", ""),
    }
    w.data["contacts"]["contacts"].append(contact)
    return {"added": True, "id": contact["id"]}


def contacts_update(w: World, a: dict[str, Any]) -> dict[str, Any]:
    contact = w.find(w.data["contacts"]["contacts"], "id", a["id"], "contact")
    contact.update({k: v for k, v in a.items() if k != "id"})
    return {"updated": True, "contact": contact}


# --- knowledge base -------------------------------------------------------------------------------


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def kb_search(w: World, a: dict[str, Any]) -> dict[str, Any]:
    query = _words(a["query"])
    scored = []
    for art in w.data["kb"]["articles"]:
        score = len(query & _words(f"{art.get('title', '')} {art.get('body', '')} {art.get('tags', '')}"))
        if score:
            scored.append((-score, art["id"], art))
    return {
        "results": [
            {"id": art["id"], "title": art.get("title", ""), "snippet": str(art.get("body", ""))[:120]}
            for _, _, art in sorted(scored, key=lambda s: (s[0], s[1]))[:5]
        ]
    }


def kb_read(w: World, a: dict[str, Any]) -> dict[str, Any]:
    return dict(w.find(w.data["kb"]["articles"], "id", a["id"], "article"))


# --- to-do ----------------------------------------------------------------------------------------


def todo_add(w: World, a: dict[str, Any]) -> dict[str, Any]:
    item = {"id": w.new_id("t"), "title": a["title"], "due": a.get("due", ""), "done": False}
    w.data["todo"]["items"].append(item)
    return {"added": True, "id": item["id"]}


def todo_list(w: World, a: dict[str, Any]) -> dict[str, Any]:
    items = w.data["todo"]["items"]
    return {"items": [i for i in items if a.get("include_done") or not i.get("done")]}


def todo_complete(w: World, a: dict[str, Any]) -> dict[str, Any]:
    w.find(w.data["todo"]["items"], "id", a["id"], "to-do item")["done"] = True
    return {"completed": a["id"]}


# --- notes ----------------------------------------------------------------------------------------


def notes_write(w: World, a: dict[str, Any]) -> dict[str, Any]:
    notes = w.data["notes"]["notes"]
    for note in notes:
        if note.get("title") == a["title"]:
            note["content"] = a["content"]
            return {"written": True, "id": note["id"], "overwritten": True}
    note = {"id": w.new_id("n"), "title": a["title"], "content": a["content"]}
    notes.append(note)
    return {"written": True, "id": note["id"], "overwritten": False}


def notes_list(w: World, a: dict[str, Any]) -> dict[str, Any]:
    return {"notes": [{"id": n["id"], "title": n.get("title", "")} for n in w.data["notes"]["notes"]]}


def notes_read(w: World, a: dict[str, Any]) -> dict[str, Any]:
    return dict(w.find(w.data["notes"]["notes"], "title", a["title"], "note"))


def submit_answer(w: World, a: dict[str, Any]) -> dict[str, Any]:
    w.data["answer"]["submitted"].append(a["answer"])
    return {"submitted": True}


USER_DIR = ".claw/user"  # = user_sim.USER_DIR
USER_WAIT_S = 25.0  # below the MCP (30 s) and zero (60 s) tool-call timeouts
MAX_USER_MESSAGE = 8000


def ask_user(w: World, a: dict[str, Any]) -> dict[str, Any]:
    """Leave the message as `<workspace>/.claw/user/q-N.json` and wait for `a-N.json`, which the host-side
    relay (`user_sim.py`) writes after asking the simulated user: the sandbox never reaches that engine.

    A slow user engine: past `USER_WAIT_S` the call fails (504) and the question stays pending; the next
    call waits for that pending reply instead of sending a new message, and says so."""
    folder = w.workspace / USER_DIR
    folder.mkdir(parents=True, exist_ok=True)
    user = w.data.setdefault("user", {"asked": [], "delivered": 0})
    log = user["asked"]
    pending = len(log) > user["delivered"]
    if not pending:
        log.append(str(a["message"])[:MAX_USER_MESSAGE])
        (folder / f"a-{len(log)}.json").unlink(
            missing_ok=True
        )  # only an answer written after the question counts
        (folder / f"q-{len(log)}.json").write_text(json.dumps({"message": log[-1]}))
    answer = folder / f"a-{len(log)}.json"
    deadline = time.monotonic() + USER_WAIT_S
    while time.monotonic() < deadline:
        if answer.is_file():
            try:
                reply = str(json.loads(answer.read_text()).get("reply", ""))
            except (ValueError, AttributeError):
                time.sleep(0.1)
                continue
            user["delivered"] = len(log)
            if pending:
                reply = (
                    "(This is the user's reply to your previous message; yours was not sent, send it "
                    f"again if needed.) {reply}"
                )
            return {"reply": reply}
        time.sleep(0.1)
    raise ToolError("the user has not answered (yet); call ask_user again to wait for the reply", 504)


OPS: dict[str, Callable[[World, dict[str, Any]], dict[str, Any]]] = {
    fn.__name__: fn
    for fn in (
        write_file,
        read_file,
        list_files,
        mail_list,
        mail_read,
        mail_search,
        mail_send,
        mail_reply,
        mail_draft,
        mail_archive,
        calendar_list,
        calendar_create,
        calendar_update,
        calendar_delete,
        contacts_find,
        contacts_add,
        contacts_update,
        kb_search,
        kb_read,
        todo_add,
        todo_list,
        todo_complete,
        notes_write,
        notes_list,
        notes_read,
        submit_answer,
        ask_user,
    )
}
