"""The one tool table of the world (`world.py`): every tool the services over it offer, described once.

The MCP server, the shell CLI and the OpenAI function-tool schemas are all generated from `TOOLS`,
so the three surfaces can never drift apart. The schemas of `write_file`, `todo_add` and
`mail_send` (names, parameters, descriptions) equal the ones the tiny model is fine-tuned on
(scripts/build_tiny_model.py `TOOLS`; a test compares them): change them only together.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "SERVICES",
    "TOOLS",
    "Param",
    "ToolSpec",
    "function_tools",
    "get_tool",
    "normalize_tool",
    "offered_tools",
    "tools_for",
]

SERVICES = ("mail", "calendar", "contacts", "kb", "todo", "notes", "files", "answer", "user")
"""Service names; `files` is the agent's workspace, `answer` collects a final answer, `user` reaches the
simulated user (`ask_user`, only in tasks run with `--user-engine`: `user_sim.py`)."""

_JSON_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list}


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # JSON-schema type: string | integer | boolean | array (of strings)
    description: str
    required: bool = True

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.type == "array":
            out["items"] = {"type": "string"}
        return out

    def accepts(self, value: object) -> bool:
        if self.type == "integer" and isinstance(value, bool):
            return False
        if not isinstance(value, _JSON_TYPES[self.type]):
            return False
        return not isinstance(value, list) or all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    service: str
    command: str  # the CLI sub-command under the service group: `openforgerl-claw <service> <command>`
    description: str
    params: tuple[Param, ...] = ()

    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
        }

    def openai_tool(self) -> dict[str, Any]:
        fn = {"name": self.name, "description": self.description, "parameters": self.input_schema()}
        return {"type": "function", "function": fn}

    def check_args(self, args: Mapping[str, Any]) -> str | None:
        """Why `args` do not fit this tool, or None. Used by the server (the single source of truth)."""
        known = {p.name: p for p in self.params}
        for key, value in args.items():
            if key not in known:
                return f"unknown argument {key!r} (expected: {', '.join(known) or 'none'})"
            if not known[key].accepts(value):
                return f"argument {key!r} must be of type {known[key].type}"
        missing = [p.name for p in self.params if p.required and p.name not in args]
        return f"missing required argument(s): {', '.join(missing)}" if missing else None


def _p(name: str, description: str, type: str = "string", required: bool = True) -> Param:
    return Param(name, type, description, required)


def _opt(name: str, description: str, type: str = "string") -> Param:
    return Param(name, type, description, required=False)


TOOLS: tuple[ToolSpec, ...] = (
    # workspace files
    ToolSpec(
        "write_file",
        "files",
        "write",
        "Write text to a file.",
        (_p("path", "File path."), _p("content", "Text to write.")),
    ),
    ToolSpec("read_file", "files", "read", "Read a file.", (_p("path", "File path."),)),
    ToolSpec(
        "list_files",
        "files",
        "list",
        "List files in a workspace folder.",
        (_opt("path", "Folder, relative to the workspace (default: the workspace root)."),),
    ),
    # mail
    ToolSpec(
        "mail_list",
        "mail",
        "list",
        "List the emails in the inbox (or another folder), newest first.",
        (
            _opt("folder", "inbox (default), sent, drafts or archive."),
            _opt("unread_only", "Only unread messages.", "boolean"),
        ),
    ),
    ToolSpec(
        "mail_read", "mail", "read", "Read one message by id (marks it read).", (_p("id", "Message id."),)
    ),
    ToolSpec(
        "mail_search",
        "mail",
        "search",
        "Search all mail folders by sender, subject or body text.",
        (_p("query", "Text to look for."),),
    ),
    ToolSpec(
        "mail_send",
        "mail",
        "send",
        "Send an email.",
        (_p("to", "Recipient address."), _p("subject", "Subject."), _p("body", "Body.")),
    ),
    ToolSpec(
        "mail_reply",
        "mail",
        "reply",
        "Reply to a message (goes to its sender, subject 'Re: ...').",
        (_p("id", "Id of the message to reply to."), _p("body", "Reply body.")),
    ),
    ToolSpec(
        "mail_draft",
        "mail",
        "draft",
        "Save an email as a draft without sending it.",
        (_p("to", "Recipient email address."), _p("subject", "Subject line."), _p("body", "Message body.")),
    ),
    ToolSpec(
        "mail_archive",
        "mail",
        "archive",
        "Move a message from the inbox to the archive.",
        (_p("id", "Message id."),),
    ),
    # calendar
    ToolSpec(
        "calendar_list",
        "calendar",
        "list",
        "List calendar events, optionally only those on one day.",
        (_opt("date", "Day as YYYY-MM-DD."),),
    ),
    ToolSpec(
        "calendar_create",
        "calendar",
        "create",
        "Create a calendar event.",
        (
            _p("title", "Event title."),
            _p("start", "Start, YYYY-MM-DDTHH:MM."),
            _p("end", "End, YYYY-MM-DDTHH:MM."),
            _opt("attendees", "Attendee email addresses.", "array"),
            _opt("location", "Where."),
        ),
    ),
    ToolSpec(
        "calendar_update",
        "calendar",
        "update",
        "Change fields of an existing event.",
        (
            _p("id", "Event id."),
            _opt("title", "New title."),
            _opt("start", "New start, YYYY-MM-DDTHH:MM."),
            _opt("end", "New end, YYYY-MM-DDTHH:MM."),
            _opt("location", "New location."),
        ),
    ),
    ToolSpec("calendar_delete", "calendar", "delete", "Delete (cancel) an event.", (_p("id", "Event id."),)),
    # contacts
    ToolSpec(
        "contacts_find",
        "contacts",
        "find",
        "Find contacts whose name, email or company contains the text.",
        (_p("query", "Text to look for."),),
    ),
    ToolSpec(
        "contacts_add",
        "contacts",
        "add",
        "Add a contact.",
        (
            _p("name", "Full name."),
            _p("email", "Email address."),
            _opt("phone", "Phone number."),
            _opt("company", "Company."),
        ),
    ),
    ToolSpec(
        "contacts_update",
        "contacts",
        "update",
        "Change fields of an existing contact.",
        (
            _p("id", "Contact id."),
            _opt("email", "New email."),
            _opt("phone", "New phone."),
            _opt("company", "New company."),
        ),
    ),
    # knowledge base
    ToolSpec(
        "kb_search",
        "kb",
        "search",
        "Search knowledge-base articles; returns ids, titles and snippets.",
        (_p("query", "Search words."),),
    ),
    ToolSpec("kb_read", "kb", "read", "Read a knowledge-base article by id.", (_p("id", "Article id."),)),
    # to-do
    ToolSpec("todo_add", "todo", "add", "Add a todo item.", (_p("title", "Todo text."),)),
    ToolSpec(
        "todo_list",
        "todo",
        "list",
        "List the todo items.",
        (_opt("include_done", "Also list completed items.", "boolean"),),
    ),
    ToolSpec("todo_complete", "todo", "complete", "Mark a to-do item as done.", (_p("id", "Item id."),)),
    # notes
    ToolSpec(
        "notes_write",
        "notes",
        "write",
        "Write a note (a note with the same title is overwritten).",
        (_p("title", "Note title."), _p("content", "Note text.")),
    ),
    ToolSpec("notes_list", "notes", "list", "List note titles."),
    ToolSpec("notes_read", "notes", "read", "Read a note by title.", (_p("title", "Note title."),)),
    # final answer
    ToolSpec(
        "submit_answer",
        "answer",
        "submit",
        "Submit the final answer to the user's question.",
        (_p("answer", "The answer."),),
    ),
    # the (simulated) user of a multi-turn task
    ToolSpec(
        "ask_user",
        "user",
        "ask",
        "Send a message to the user (a question, or your answer) and get their reply.",
        (_p("message", "What you say to the user."),),
    ),
)

_BY_NAME = {t.name: t for t in TOOLS}


def get_tool(name: str) -> ToolSpec | None:
    return _BY_NAME.get(name)


_MCP_SEPARATORS = (
    "__",
    ".",
    "/",
    "-",
    "_",
)  # how harnesses prefix an MCP server's tools: mcp__claw__x, claw.x


def normalize_tool(name: str) -> str:
    """The registry name of a Claw tool behind an MCP prefix, else `name` unchanged."""
    if get_tool(name) is not None:
        return name
    for tool in TOOLS:
        for sep in _MCP_SEPARATORS:
            if name.endswith(sep + tool.name):
                return tool.name
    return name


def tools_for(services: Iterable[str] = (), names: Sequence[str] = ()) -> tuple[ToolSpec, ...]:
    """The tools a task exposes: explicit `names` if given, else every tool of `services`."""
    if names:
        unknown = [n for n in names if n not in _BY_NAME]
        if unknown:
            raise KeyError(f"unknown tool(s): {', '.join(unknown)}")
        return tuple(_BY_NAME[n] for n in names)
    wanted = set(services)
    return tuple(t for t in TOOLS if t.service in wanted)


def offered_tools(tools: Sequence[str], services: Sequence[str]) -> list[str]:
    """The tools a task offers (its `tools` and `services` metadata): `tools` if given, else every tool of its
    services plus files and answer."""
    if tools:
        return list(tools)
    wanted = list(services)
    wanted += [s for s in ("files", "answer") if s not in wanted] if wanted else []
    return [t.name for t in tools_for(services=wanted)]


def function_tools(tools: Iterable[ToolSpec]) -> list[dict[str, Any]]:
    """OpenAI chat-completions `tools` entries."""
    return [t.openai_tool() for t in tools]
