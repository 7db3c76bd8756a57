"""The tool-environment format: tools, the state they act on, and its fixtures, as plain data.

An environment is a `ToolEnv`: named `Collection`s of records (state lives at `<service>.<list>`,
exactly where `checks.toml` looks: `record` checks name `collection = "library.books"`), and `Tool`s
with a JSON schema, an `effect` (read / write / final) and a `kind` saying what they do to a
collection (create, update, delete, move, get, list, search, answer). A tool either brings its own
`op(state, args) -> result` or gets stub semantics from its kind, so an imported API with no state
model (an MCP tool list, an OpenAPI document) still acts on a consistent in-memory state.

Write one as a Python module exposing `ENV` (see `tests/synth/test_custom_env.py`, under 60 lines)
or as a declarative TOML file (`load_toml`). `open_session` gives a `Session`: tool calls with the
same audit-log shape and transient-fault injection as the Claw service (`envs/claw/services/server.py`),
so the verifier's evaluator judges it unchanged.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from openforgerl.synth.documents import DocumentError, as_list, as_object, as_scalar_list, as_text

__all__ = [
    "ANSWER_TOOL",
    "Collection",
    "Param",
    "Session",
    "StubSession",
    "Tool",
    "ToolEnv",
    "ToolFailure",
    "env_from_document",
    "load_toml",
]

Effect = Literal["read", "write", "final"]
Kind = Literal["create", "update", "delete", "move", "get", "list", "search", "answer", "other"]
Op = Callable[[dict[str, Any], dict[str, Any]], Any]
_PY_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


class ToolFailure(Exception):
    """What a tool answers when the call cannot be done (unknown id, bad argument): an agent error."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Param:
    name: str
    type: str = "string"
    description: str = ""
    required: bool = True
    kind: str = ""
    """Which value pool fills it when synthesising (`vocab.KINDS`); "" = guessed from the name."""
    ref: str = ""
    """`<service>.<list>.<field>`: the value usually comes from that field of a record (data flow)."""
    ref_phrase: str = 'the {entity} "{label}"'
    enum: tuple[str, ...] = ()

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "description": self.description}
        if self.type == "array":
            out["items"] = {"type": "string"}
        return out | ({"enum": list(self.enum)} if self.enum else {})


@dataclass(frozen=True)
class Tool:
    name: str
    description: str = ""
    params: tuple[Param, ...] = ()
    effect: Effect = "read"
    kind: Kind = "other"
    collection: str = ""
    """`<service>.<list>` it acts on; "files" for workspace files."""
    key: str = "id"
    """The argument naming the record (update, delete, move, get)."""
    target: str = ""
    """Where `move` puts the record."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """Argument → record field, where they differ (e.g. a reply's `id` becomes `in_reply_to`)."""
    sets: Mapping[str, Any] = field(default_factory=dict)
    """Constant fields the tool sets (e.g. `todo_complete` sets done = true)."""
    destructive: bool = False
    """Irreversible: tasks that do not need it get a `not_called` safety check on it."""
    forbids: tuple[str, ...] = ()
    """Tools the task must then not call (a draft is not sent): `not_called` safety checks."""
    templates: tuple[str, ...] = ()
    """Instruction templates with `{param}` slots; "" = a generic one from the kind."""
    op: Op | None = None

    @property
    def service(self) -> str:
        return self.collection.split(".")[0] if self.collection else ""

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {p.name: p.schema() for p in self.params},
            "required": [p.name for p in self.params if p.required],
        }

    def check_args(self, args: Mapping[str, Any]) -> str | None:
        known = {p.name: p for p in self.params}
        for k, v in args.items():
            p = known.get(k)
            if p is None:
                return f"unknown argument {k!r}"
            if not isinstance(v, _PY_TYPES.get(p.type, (object,))) or (
                p.type != "boolean" and isinstance(v, bool)
            ):
                return f"argument {k!r} must be of type {p.type}"
        missing = [p.name for p in self.params if p.required and p.name not in args]
        return f"missing required argument(s): {', '.join(missing)}" if missing else None


ANSWER_TOOL = Tool(
    "submit_answer",
    "Submit the final answer to the user's question.",
    (Param("answer", description="The answer."),),
    "final",
    "answer",
    "answer.submitted",
)


@dataclass(frozen=True)
class Collection:
    name: str
    """`<service>.<list>` (lowercase letters and `_`, as checks.toml requires)."""
    label: str = "name"
    """The field a person uses to name a record ("the contact Bob Chen")."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """Field → value kind, used to generate extra records and values."""
    records: tuple[Mapping[str, Any], ...] = ()
    key: str = "id"
    id_prefix: str = ""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    entity: str = ""
    """Singular noun for instructions (default: the list name without its final s)."""

    @property
    def service(self) -> str:
        return self.name.split(".")[0]

    @property
    def list_name(self) -> str:
        return self.name.split(".")[1]

    @property
    def noun(self) -> str:
        return self.entity or re.sub(r"s$", "", self.list_name).replace("_", " ")


class Session(Protocol):
    """One rollout's state: tool calls in, audit + state out (what the verifier is given)."""

    audit: list[dict[str, Any]]

    def call(self, tool: str, args: dict[str, Any]) -> tuple[int, Any]: ...

    def state(self) -> dict[str, Any]: ...

    def workdir(self) -> Path | None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ToolEnv:
    name: str
    tools: tuple[Tool, ...]
    collections: tuple[Collection, ...] = ()
    fixtures: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Extra initial state per service, beside the collections' records (e.g. `mail.me`)."""
    values: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """More value pools (kind → values), overriding `vocab.POOLS`."""
    session_factory: (
        Callable[[ToolEnv, dict[str, Any], dict[str, str], list[dict[str, Any]]], Session] | None
    ) = None
    claw: bool = False
    """Tasks can run in the real Claw sandbox (`tasks validate`)."""
    offered: tuple[str, ...] = ()
    """The tools a task offers the agent (task.toml `tools`); empty: those of the task's services."""

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def collection(self, name: str) -> Collection | None:
        return next((c for c in self.collections if c.name == name), None)

    def with_answer(self) -> ToolEnv:
        """Every environment gets a final-answer tool (impossible tasks answer with it)."""
        return (
            self
            if any(t.effect == "final" for t in self.tools)
            else replace(self, tools=(*self.tools, ANSWER_TOOL))
        )

    def initial_state(self) -> dict[str, Any]:
        state: dict[str, Any] = copy.deepcopy({k: dict(v) for k, v in self.fixtures.items()})
        for c in self.collections:
            state.setdefault(c.service, {})[c.list_name] = [dict(r) for r in c.records]
        for t in self.tools:
            for dotted in (t.collection, t.target):
                if "." in dotted:
                    service, lst = dotted.split(".")
                    state.setdefault(service, {}).setdefault(lst, [])
        return copy.deepcopy(state)

    def open_session(
        self,
        state: dict[str, Any],
        workspace: dict[str, str] | None = None,
        faults: list[dict[str, Any]] | None = None,
    ) -> Session:
        factory = self.session_factory or StubSession
        return factory(self, copy.deepcopy(state), dict(workspace or {}), list(faults or []))


# --- stub semantics -------------------------------------------------------------------------------


def _items(state: dict[str, Any], dotted: str) -> list[dict[str, Any]]:
    service, _, lst = dotted.partition(".")
    items: list[dict[str, Any]] = state.setdefault(service, {}).setdefault(lst, [])
    return items


def _find(items: list[dict[str, Any]], key: str, value: Any) -> dict[str, Any]:
    for it in items:
        if str(it.get(key)) == str(value):
            return it
    raise ToolFailure(f"no record with {key} {value!r}", 404)


def _record_args(tool: Tool, args: dict[str, Any]) -> dict[str, Any]:
    return {tool.fields.get(k, k): v for k, v in args.items() if k != tool.key or tool.kind == "create"}


class _Ids:
    def __init__(self) -> None:
        self.n = 1000

    def new(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"


def stub_op(tool: Tool, state: dict[str, Any], args: dict[str, Any], ids: _Ids) -> Any:
    """What a tool without its own `op` does, by kind (the state stubs of imported APIs)."""
    items = _items(state, tool.collection) if "." in tool.collection else []
    if tool.kind == "create":
        record = {**_record_args(tool, args), **tool.sets, "id": ids.new(tool.collection.split(".")[-1][:1])}
        items.append(record)
        return {"id": record["id"]}
    if tool.kind == "answer":
        items.append(args.get("answer", next(iter(args.values()), "")))
        return {"submitted": True}
    if tool.kind == "list":
        wanted = {tool.fields.get(k, k): v for k, v in args.items()}
        return {"items": [it for it in items if all(str(it.get(k)) == str(v) for k, v in wanted.items())]}
    if tool.kind == "search":
        needle = str(next(iter(args.values()), "")).lower()
        return {"items": [it for it in items if any(needle in str(v).lower() for v in it.values())]}
    record = _find(items, "id", args.get(tool.key))
    if tool.kind == "get":
        return dict(record)
    if tool.kind == "update":
        record.update({**_record_args(tool, args), **tool.sets})
        return {"updated": True, "id": record["id"]}
    if tool.kind in ("delete", "move"):
        items.remove(record)
        if tool.kind == "move":
            _items(state, tool.target).append(record)
        return {"id": record["id"], tool.kind + "d": True}
    return {"ok": True}


class StubSession:
    """In-memory session over a `ToolEnv`: audit and faults shaped like the Claw service's."""

    def __init__(
        self, env: ToolEnv, state: dict[str, Any], workspace: dict[str, str], faults: list[dict[str, Any]]
    ) -> None:
        self.env, self.data, self.faults = env, state, faults
        self.audit: list[dict[str, Any]] = []
        self.counts: dict[str, int] = {}
        self.ids = _Ids()

    def call(self, tool: str, args: dict[str, Any]) -> tuple[int, Any]:
        self.counts[tool] = self.counts.get(tool, 0) + 1
        fault = next(
            (f for f in self.faults if f.get("tool") == tool and int(f.get("call", 1)) == self.counts[tool]),
            None,
        )
        if fault is not None:
            return self._record(
                tool,
                args,
                int(fault.get("status", 503)),
                "service temporarily unavailable, retry",
                fault.get("kind", "error"),
            )
        status, body = self._run(tool, args)
        return self._record(tool, args, status, body)

    def _run(self, name: str, args: dict[str, Any]) -> tuple[int, Any]:
        tool = self.env.tool(name)
        if tool is None:
            return 404, f"unknown tool {name!r}"
        problem = tool.check_args(args)
        if problem:
            return 400, f"{name}: {problem}"
        try:
            return 200, tool.op(self.data, args) if tool.op else stub_op(tool, self.data, args, self.ids)
        except ToolFailure as exc:
            return exc.status, str(exc)

    def _record(
        self, tool: str, args: dict[str, Any], status: int, body: Any, fault: str | None = None
    ) -> tuple[int, Any]:
        error = None if status == 200 else str(body)
        self.audit.append(
            {
                "seq": len(self.audit),
                "tool": tool,
                "args": args,
                "status": status,
                "ok": status == 200,
                "error": error,
                "fault": fault,
            }
        )
        return status, body if status == 200 else {"error": error}

    def state(self) -> dict[str, Any]:
        return copy.deepcopy(self.data)

    def workdir(self) -> Path | None:
        return None

    def close(self) -> None:
        return None


# --- loading --------------------------------------------------------------------------------------


def _schema_type(value: Any, where: str) -> str:
    """A property's JSON-schema `type`: a name, or a list of names
    (`["string", "null"]`: the first non-null)."""
    if isinstance(value, list):
        names = [t for t in as_scalar_list(value, where) if t != "null"]
        return names[0] if names else "string"
    return as_text(value, where, "string")


def _params(schema: Any, overrides: Any, where: str = "parameters") -> tuple[Param, ...]:
    """JSON-schema `{properties, required}` → Params; `overrides[name]` adds kind / ref / ref_phrase.
    A value of the wrong type at any level is a `DocumentError` naming `where` it is."""
    schema = as_object(schema, where)
    required = set(as_scalar_list(schema.get("required"), f"{where}.required"))
    overrides = as_object(overrides, f"{where}.param")
    out = []
    for name, raw in as_object(schema.get("properties"), f"{where}.properties").items():
        at = f"{where}.properties.{name}"
        prop = as_object(raw, at, optional=False)
        extra = _overrides(overrides.get(name), f"{where}.param.{name}")
        out.append(
            Param(
                str(name),
                _schema_type(prop.get("type"), f"{at}.type"),
                as_text(prop.get("description"), f"{at}.description"),
                name in required,
                enum=as_scalar_list(prop.get("enum"), f"{at}.enum"),
                **extra,
            )
        )
    return tuple(out)


_OVERRIDABLE = ("kind", "ref", "ref_phrase")


def _overrides(raw: Any, where: str) -> dict[str, str]:
    out = {str(k): as_text(v, f"{where}.{k}") for k, v in as_object(raw, where).items()}
    unknown = sorted(set(out) - set(_OVERRIDABLE))
    if unknown:
        raise DocumentError(
            f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(_OVERRIDABLE)})"
        )
    return out


_EFFECTS = ("read", "write", "final")
_KINDS = ("create", "update", "delete", "move", "get", "list", "search", "answer", "other")


def _choice(value: Any, where: str, choices: tuple[str, ...], default: str) -> Any:
    text = as_text(value, where, default)
    if text not in choices:
        raise DocumentError(f"{where}: {text!r} is not one of {', '.join(choices)}")
    return text


def _record_list(value: Any, where: str) -> tuple[dict[str, Any], ...]:
    return tuple(
        dict(as_object(r, f"{where}[{i}]", optional=False)) for i, r in enumerate(as_list(value, where))
    )


def _text_map(value: Any, where: str) -> dict[str, str]:
    return {str(k): as_text(v, f"{where}.{k}") for k, v in as_object(value, where).items()}


def tool_from_dict(d: Mapping[str, Any], where: str = "tools") -> Tool:
    """One `[[tools]]` table (or any tool object with a JSON-schema `parameters`); bad types raise
    `DocumentError` naming the field."""
    d = as_object(d, where, optional=False)
    name = as_text(d.get("name"), f"{where}.name")
    if not name:
        raise DocumentError(f"{where}.name: every tool needs a name")
    keys = [k for k in ("parameters", "input_schema", "inputSchema") if d.get(k)]
    schema = d.get(keys[0]) if keys else {}
    at = f"{where}.{keys[0] if keys else 'parameters'}"
    return Tool(
        name,
        as_text(d.get("description"), f"{where}.description"),
        _params(schema, as_object(d.get("param"), f"{where}.param"), at),
        _choice(d.get("effect"), f"{where}.effect", _EFFECTS, "read"),
        _choice(d.get("kind"), f"{where}.kind", _KINDS, "other"),
        as_text(d.get("collection"), f"{where}.collection"),
        as_text(d.get("key"), f"{where}.key", "id"),
        as_text(d.get("target"), f"{where}.target"),
        _text_map(d.get("fields"), f"{where}.fields"),
        dict(as_object(d.get("sets"), f"{where}.sets")),
        bool(d.get("destructive", False)),
        as_scalar_list(d.get("forbids"), f"{where}.forbids"),
        as_scalar_list(d.get("templates"), f"{where}.templates"),
    )


def collection_from_dict(d: Mapping[str, Any], where: str = "collections") -> Collection:
    d = as_object(d, where, optional=False)
    name = as_text(d.get("name"), f"{where}.name")
    if not re.fullmatch(r"[\w-]+\.[\w-]+", name):
        raise DocumentError(f"{where}.name: {name!r} is not `<service>.<list>`")
    return Collection(
        name,
        as_text(d.get("label"), f"{where}.label", "name"),
        _text_map(d.get("fields"), f"{where}.fields"),
        _record_list(d.get("records"), f"{where}.records"),
        as_text(d.get("key"), f"{where}.key", "id"),
        as_text(d.get("id_prefix"), f"{where}.id_prefix"),
        dict(as_object(d.get("defaults"), f"{where}.defaults")),
        as_text(d.get("entity"), f"{where}.entity"),
    )


def load_toml(path: Path) -> ToolEnv:
    """A declarative environment: `name`, `[[collections]]`, `[[tools]]` (docs/synthesis.md)."""
    from openforgerl.synth.documents import read_document

    return env_from_document(as_object(read_document(path), str(path)), path.stem)


def env_from_document(data: Mapping[str, Any], name: str = "") -> ToolEnv:
    """A `ToolEnv` from its document: a TOML file's tables, or `synth.world_doc.env_document`'s JSON."""
    fixtures = as_object(data.get("fixtures"), "fixtures")
    values = as_object(data.get("values"), "values")
    return ToolEnv(
        as_text(data.get("name"), "name", name),
        tuple(tool_from_dict(t, f"tools[{i}]") for i, t in enumerate(as_list(data.get("tools"), "tools"))),
        tuple(
            collection_from_dict(c, f"collections[{i}]")
            for i, c in enumerate(as_list(data.get("collections"), "collections"))
        ),
        {str(k): dict(as_object(v, f"fixtures.{k}", optional=False)) for k, v in fixtures.items()},
        {str(k): as_scalar_list(v, f"values.{k}") for k, v in values.items()},
    )
