"""The Claw services re-expressed in the tool-environment format of task synthesis (`openforgerl.synth`),
over the existing registry; registered as the `claw` and `claw-family` synthesis tool environments and the
`claw` task writer (pyproject.toml: `openforgerl.synth_envs`, `openforgerl.synth_writers`).

Schemas come from `env/world_tools.py` (`TOOLS`), behaviour from `env/world.py` (`OPS`, run through the
service's own `ClawApp`, so audit entries and fault injection are the real ones), fixtures from
`env/world_data.py`. This module only adds what the registry does not say: each tool's effect
and kind, the collection it acts on, value kinds for its parameters, data-flow references and
instruction templates. Nothing of the services is rewritten.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from openforgerl.env.world_tools import TOOLS, ToolSpec
from openforgerl.envs.claw.drafts import write_claw_task
from openforgerl.synth.plugins import TaskWriter
from openforgerl.synth.toolenv import Collection, Param, Tool, ToolEnv

__all__ = ["WRITER", "ClawSession", "claw_env", "claw_family_env", "shipped_tasks"]

_CONTACT_EMAIL = "contacts.contacts.email"
_BY_CONTACT = "{label} (look the address up in my contacts)"

# tool → (effect, kind, collection, extra Tool fields)
_ROLE: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "write_file": (
        "write",
        "create",
        "files",
        {
            "templates": (
                'Write the text "{content}" to the file {path}.',
                'Create the file {path} containing "{content}".',
            )
        },
    ),
    "read_file": ("read", "get", "files", {}),
    "list_files": ("read", "list", "files", {}),
    "mail_list": ("read", "list", "mail.inbox", {}),
    "mail_read": ("read", "get", "mail.inbox", {}),
    "mail_search": ("read", "search", "mail.inbox", {}),
    "mail_send": (
        "write",
        "create",
        "mail.sent",
        {
            "destructive": True,
            "templates": (
                'Send an email to {to} with subject "{subject}" and body "{body}".',
                'Email {to}: subject "{subject}", text "{body}".',
            ),
        },
    ),
    "mail_reply": (
        "write",
        "create",
        "mail.sent",
        {
            "fields": {"id": "in_reply_to"},
            "templates": ('Reply to {id} saying "{body}".', 'Answer {id} with the reply "{body}".'),
        },
    ),
    "mail_draft": (
        "write",
        "create",
        "mail.drafts",
        {
            "forbids": ("mail_send", "mail_reply"),
            "templates": (
                'Prepare an email to {to} with subject "{subject}" saying '
                '"{body}", and save it as a draft; do NOT send it.',
            ),
        },
    ),
    "mail_archive": (
        "write",
        "move",
        "mail.inbox",
        {
            "target": "mail.archive",
            "templates": (
                "Archive {id}; keep the rest of my inbox as it is.",
                "Move {id} out of my inbox into the archive.",
            ),
        },
    ),
    "calendar_list": ("read", "list", "calendar.events", {}),
    "calendar_create": (
        "write",
        "create",
        "calendar.events",
        {
            "templates": (
                'Put "{title}" on my calendar from {start} to {end}.',
                'Create a calendar event "{title}", {start} to {end}.',
            )
        },
    ),
    "calendar_update": ("write", "update", "calendar.events", {"templates": ()}),
    "calendar_delete": (
        "write",
        "delete",
        "calendar.events",
        {
            "destructive": True,
            "templates": (
                "Cancel {id}. Leave every other event alone.",
                "Delete {id} from my calendar; keep the other events.",
            ),
        },
    ),
    "contacts_find": ("read", "search", "contacts.contacts", {}),
    "contacts_add": ("write", "create", "contacts.contacts", {"templates": ()}),
    "contacts_update": ("write", "update", "contacts.contacts", {}),
    "kb_search": ("read", "search", "kb.articles", {}),
    "kb_read": ("read", "get", "kb.articles", {}),
    "todo_add": (
        "write",
        "create",
        "todo.items",
        {"sets": {"done": False}, "templates": ('Add a todo "{title}".', 'Put "{title}" on my to-do list.')},
    ),
    "todo_list": ("read", "list", "todo.items", {}),
    "todo_complete": (
        "write",
        "update",
        "todo.items",
        {
            "sets": {"done": True},
            "templates": ("I did it: mark {id} as done on my to-do list.", "Tick off {id} on my to-do list."),
        },
    ),
    "notes_write": (
        "write",
        "create",
        "notes.notes",
        {"templates": ('Write a note titled "{title}" with the text: {content}',)},
    ),
    "notes_list": ("read", "list", "notes.notes", {}),
    "notes_read": ("read", "get", "notes.notes", {"key": "title"}),
    "submit_answer": ("final", "answer", "answer.submitted", {}),
}

# (tool, param) → extra Param fields
_PARAM: dict[tuple[str, str], dict[str, Any]] = {
    ("mail_send", "to"): {"kind": "email", "ref": _CONTACT_EMAIL, "ref_phrase": _BY_CONTACT},
    ("mail_draft", "to"): {"kind": "email", "ref": _CONTACT_EMAIL, "ref_phrase": _BY_CONTACT},
    ("mail_reply", "id"): {"ref": "mail.inbox.id", "ref_phrase": 'the email "{label}"'},
    ("mail_archive", "id"): {"ref": "mail.inbox.id", "ref_phrase": 'the email "{label}"'},
    ("calendar_create", "attendees"): {
        "kind": "email",
        "ref": _CONTACT_EMAIL,
        "ref_phrase": "{label} (find the address in my contacts)",
    },
    ("calendar_update", "id"): {"ref": "calendar.events.id", "ref_phrase": 'the "{label}" event'},
    ("calendar_delete", "id"): {"ref": "calendar.events.id", "ref_phrase": 'the "{label}" event'},
    ("contacts_update", "id"): {"ref": "contacts.contacts.id", "ref_phrase": 'the contact "{label}"'},
    ("todo_complete", "id"): {"ref": "todo.items.id", "ref_phrase": '"{label}"'},
    ("write_file", "path"): {"kind": "path"},
    ("write_file", "content"): {"kind": "sentence"},
    ("mail_send", "body"): {"kind": "sentence"},
    ("mail_draft", "body"): {"kind": "sentence"},
    ("mail_reply", "body"): {"kind": "sentence"},
    ("notes_write", "content"): {"kind": "sentence"},
    ("notes_write", "title"): {"kind": "title"},
    ("todo_add", "title"): {"kind": "todo"},
    ("contacts_add", "name"): {"kind": "person"},
    ("contacts_update", "company"): {"kind": "company"},
    ("contacts_add", "company"): {"kind": "company"},
    ("calendar_update", "location"): {"kind": "place"},
    ("calendar_create", "location"): {"kind": "place"},
    ("calendar_update", "title"): {"kind": "title"},
}

# the optional params synthesis must not touch (they need a different task shape)
_SKIP_OPTIONAL = {
    ("calendar_update", "title"),
    ("calendar_update", "start"),
    ("calendar_update", "end"),
    ("calendar_create", "location"),
}


def _param(spec: ToolSpec, p: Any) -> Param:
    extra = (
        {"kind": "skip"}
        if (spec.name, p.name) in _SKIP_OPTIONAL
        else dict(_PARAM.get((spec.name, p.name), {}))
    )
    return Param(p.name, p.type, p.description, p.required, **extra)


def _tool(spec: ToolSpec) -> Tool:
    effect, kind, collection, extra = _ROLE[spec.name]
    params = tuple(_param(spec, p) for p in spec.params)
    return Tool(spec.name, spec.description, params, effect, kind, collection, **extra)  # type: ignore[arg-type]


def _collections() -> tuple[Collection, ...]:
    from openforgerl.env.world_data import ME, base_fixtures

    fx = base_fixtures()
    return (
        Collection(
            "contacts.contacts",
            "name",
            {"name": "person", "email": "email", "phone": "phone", "company": "company"},
            tuple(fx["contacts"]["contacts"]),
            id_prefix="c",
        ),
        Collection(
            "mail.inbox",
            "subject",
            {"from": "email", "subject": "subject", "body": "sentence", "date": "datetime"},
            tuple(fx["mail"]["inbox"]),
            id_prefix="m",
            defaults={"to": ME, "read": False},
            entity="email",
        ),
        Collection(
            "calendar.events",
            "title",
            {"title": "title", "start": "datetime", "end": "datetime", "location": "place"},
            tuple(fx["calendar"]["events"]),
            id_prefix="e",
            defaults={"attendees": []},
            entity="event",
        ),
        Collection(
            "todo.items",
            "title",
            {"title": "todo"},
            tuple(fx["todo"]["items"]),
            id_prefix="t",
            defaults={"due": "", "done": False},
            entity="to-do item",
        ),
        Collection(
            "notes.notes",
            "title",
            {"title": "title", "content": "sentence"},
            tuple(fx["notes"]["notes"]),
            id_prefix="n",
            entity="note",
        ),
        Collection(
            "kb.articles",
            "title",
            {"title": "title", "body": "sentence"},
            tuple(fx["kb"]["articles"]),
            id_prefix="kb",
            defaults={"tags": ""},
            entity="article",
        ),
    )


class ClawSession:
    """The real `ClawApp` (world ops, audit, faults) in this process, over a scratch workspace."""

    def __init__(
        self, env: ToolEnv, state: dict[str, Any], workspace: dict[str, str], faults: list[dict[str, Any]]
    ) -> None:
        from openforgerl.env.world import EMPTY_STATE, World
        from openforgerl.envs.claw.services.server import ClawApp

        self._dir = Path(tempfile.mkdtemp(prefix="synth-ws-"))
        for rel, text in workspace.items():
            (self._dir / rel).parent.mkdir(parents=True, exist_ok=True)
            (self._dir / rel).write_text(text)
        initial = {k: dict(v) for k, v in EMPTY_STATE.items()}
        for service, data in state.items():  # the same overlay as world.load_fixtures
            initial.setdefault(service, {}).update(data)
        # a timeout fault sleeps delay_s in the service; in-process the verdict is the same without it
        quick = [{**f, "delay_s": 0.0} for f in faults]
        self.app = ClawApp(World(initial, self._dir), None, quick)
        self.audit = self.app.audit

    def call(self, tool: str, args: dict[str, Any]) -> tuple[int, Any]:
        status, body = self.app.call(tool, args)
        return status, body.get("result") if status == 200 else body

    def state(self) -> dict[str, Any]:
        return self.app.world.state()

    def workdir(self) -> Path | None:
        return self._dir

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


def claw_env() -> ToolEnv:
    """Every Claw tool, its state model and the shared office world as fixtures."""
    from openforgerl.env.world_data import ME

    # a registry tool the adapter gives no role (e.g. `ask_user`, a message to a simulated user) is not
    # composed into tasks until it gets one: synthesis needs its effect and state to write checks
    return ToolEnv(
        "claw",
        tuple(_tool(t) for t in TOOLS if t.name in _ROLE),
        _collections(),
        fixtures={"mail": {"me": ME, "sent": [], "drafts": [], "archive": []}},
        session_factory=ClawSession,
        claw=True,
    )


# The warm-up model's own instruction templates (scripts/build_tiny_model.py `_write_file`, `_todo_add`,
# `_mail_send`; the Claw `sft` family speaks the same way): single-quoted values, the same verbs.
_FAMILY_TEMPLATES: dict[str, tuple[str, ...]] = {
    "write_file": (
        "Write the text '{content}' to the file {path}.",
        "Create the file {path} containing '{content}'.",
        "Please save '{content}' into {path}.",
    ),
    "todo_add": (
        "Add a todo '{title}'.",
        "Put '{title}' on my todo list.",
        "Add the task '{title}' to my todos.",
    ),
    "mail_send": (
        "Send an email to {to} with subject '{subject}' and body '{body}'.",
        "Email {to}: subject '{subject}', body '{body}'.",
    ),
}


def claw_family_env() -> ToolEnv:
    """`--env claw-family`: the Claw write tools the `sft` family uses, phrased as that family is (and as
    the tiny model's warm-up data is), with values from the warm-up vocabulary and the same three tools
    offered. Ordinary-English Claw tasks (`claw`) are out of the tiny model's reach (0 of 120 solved);
    these sit at its frontier: single calls it often gets right, 2–3-call compositions it rarely does."""
    from dataclasses import replace

    from openforgerl.envs.claw.suite.families import SFT_TOOLS
    from openforgerl.synth.vocab import warmup_pools

    base = claw_env()
    tools = []
    for name in SFT_TOOLS:
        tool = base.tool(name)
        assert tool is not None
        # a literal address, not a contacts lookup: the warm-up model never looked anything up
        params = tuple(replace(p, ref="") for p in tool.params)
        tools.append(replace(tool, params=params, templates=_FAMILY_TEMPLATES[name]))
    return replace(
        base, name="claw-family", tools=tuple(tools), values=warmup_pools(), offered=tuple(SFT_TOOLS)
    )


def shipped_tasks() -> tuple[set[str], set[str]]:
    """Instructions and gold calls of the shipped Claw suite (both splits): a synthesised Claw task equal to
    one of them is dropped (`shipped`), so a synthesised pool never holds a copy of a held-out task."""
    import json

    from openforgerl.envs.claw.suite.families import FAMILIES

    drafts = [d for family in FAMILIES for d in family()]
    return (
        {d.instruction.split("\n")[0] for d in drafts},
        {json.dumps([(a.tool, a.args) for a in d.actions], sort_keys=True) for d in drafts},
    )


WRITER = TaskWriter(write_claw_task, shipped_tasks)
"""Synthesised tasks are Claw task folders (`write_claw_task`: test.sh, solve.sh), whatever their tools."""
