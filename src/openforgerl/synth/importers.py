"""Import tool lists into the format: an MCP server's `tools/list`, or an OpenAPI 3 document.

Neither source says what state its tools act on, so the importers give them state stubs: one
collection per resource (OpenAPI: the first path segment; MCP: the tool name's noun), its fields the
union of what the create tools take, three generated records as fixtures, and stub semantics by
kind (`toolenv.stub_op`). Kinds come from the HTTP method (GET = read; POST create, PUT/PATCH update,
DELETE delete) or, for MCP, from the verb in the tool's name. `list_mcp_tools` speaks the stdio
JSON-RPC handshake to any MCP server command and returns its `tools/list` result.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openforgerl.synth import vocab
from openforgerl.synth.documents import (
    DocumentError,
    as_list,
    as_object,
    as_scalar_list,
    as_text,
    read_document,
)
from openforgerl.synth.toolenv import Collection, Param, Tool, ToolEnv, _params, _schema_type

__all__ = ["DocumentError", "from_mcp_tools", "from_openapi", "list_mcp_tools", "load_document"]

_VERBS: Sequence[tuple[str, str, frozenset[str]]] = (
    ("final", "answer", frozenset({"submit", "answer", "finish", "respond"})),
    ("write", "delete", frozenset({"delete", "remove", "cancel", "destroy", "drop", "archive"})),
    (
        "write",
        "update",
        frozenset(
            {"update", "edit", "set", "modify", "complete", "mark", "rename", "patch", "change", "move"}
        ),
    ),
    (
        "write",
        "create",
        frozenset(
            {
                "add",
                "create",
                "send",
                "write",
                "post",
                "new",
                "insert",
                "reply",
                "draft",
                "book",
                "schedule",
                "save",
                "upload",
                "put",
            }
        ),
    ),
    ("read", "search", frozenset({"search", "find", "query", "lookup"})),
    ("read", "list", frozenset({"list", "all"})),
    ("read", "get", frozenset({"get", "read", "fetch", "show", "view", "describe"})),
)
_LABELS = ("name", "title", "subject", "label")


def _slug(text: str, keep: str = "") -> str:
    return re.sub(rf"[^a-z{keep}]+", "", text.lower()) or "api"


def _tokens(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [t.lower() for t in re.split(r"[^A-Za-z0-9]+", spaced) if t]


def _role(tokens: Sequence[str]) -> tuple[str, str]:
    for effect, kind, verbs in _VERBS:
        if any(t in verbs for t in tokens):
            return effect, kind
    return "read", "other"


def _is_key(name: str) -> bool:
    return (
        name.lower() in ("id", "uuid")
        or name.lower().endswith("_id")
        or re.search(r"[a-z]Id$", name) is not None
    )


def _stub_collections(tools: Sequence[Tool], rng: random.Random) -> tuple[Collection, ...]:
    fields: dict[str, dict[str, str]] = {}
    for t in tools:
        if "." in t.collection and t.effect != "final":
            fields.setdefault(t.collection, {})
            if t.kind == "create":
                for p in t.params:
                    if not _is_key(p.name) and p.type in ("string", "integer", "number"):
                        fields[t.collection][t.fields.get(p.name, p.name)] = p.kind or vocab.guess_kind(
                            p.name, p.type
                        )
    out = []
    for name, fs in fields.items():
        if not fs:
            continue
        label = next((f for f in _LABELS if f in fs), next(iter(fs)))
        prefix = name.split(".")[1][:1]
        records = tuple(
            {"id": f"{prefix}{i + 1}", **{f: vocab.value(k, rng) for f, k in fs.items()}} for i in range(3)
        )
        entity = re.sub(
            r"s$", "", name.split(".")[1] if name.split(".")[1] != "items" else name.split(".")[0]
        )
        out.append(Collection(name, label, fs, records, id_prefix=prefix, entity=entity))
    return tuple(out)


def _finish(name: str, tools: list[Tool], seed: int) -> ToolEnv:
    rng = random.Random(seed)
    return ToolEnv(name, tuple(tools), _stub_collections(tools, rng)).with_answer()


# --- MCP ------------------------------------------------------------------------------------------


def _mcp_tool(raw: Any, env: str, where: str) -> Tool:
    d = as_object(raw, where, optional=False)
    name = as_text(d.get("name"), f"{where}.name")
    if not name:
        raise DocumentError(f"{where}.name: every tool needs a name")
    tokens = _tokens(name)
    effect, kind = _role(tokens)
    verbs = {v for _, _, vs in _VERBS for v in vs}
    noun = next((t for t in tokens if t not in verbs), env)
    service = _slug(noun).rstrip("s") or _slug(env)
    field_name = "inputSchema" if d.get("inputSchema") else "input_schema"
    params = _params(d.get(field_name), {}, f"{where}.{field_name}")
    key = next((p.name for p in params if _is_key(p.name)), "")
    collection = "answer.submitted" if effect == "final" else f"{service}.items"
    fields: dict[str, str] = {}
    if kind == "create" and key:
        fields = {key: f"parent_{_slug(key, '_')}"}
        params = tuple(
            Param(
                p.name,
                p.type,
                p.description,
                p.required,
                ref=f"{collection}.id",
                ref_phrase='the {entity} "{label}"',
            )
            if p.name == key
            else p
            for p in params
        )
    if kind in ("update", "delete", "get") and not key:
        kind = "other"
    return Tool(
        name,
        as_text(d.get("description"), f"{where}.description"),
        params,
        effect,  # type: ignore[arg-type]
        kind,  # type: ignore[arg-type]
        collection,
        key or "id",
        fields=fields,
    )


def _mcp_tool_list(listing: Any) -> list[Any]:
    if isinstance(listing, list):
        return listing
    listing = as_object(listing, "the document", optional=False)
    if "tools" not in listing:
        raise DocumentError(
            "the document has no `tools` list (an MCP tools/list result) and no `openapi` key "
            "(an OpenAPI 3 document)"
        )
    return as_list(listing["tools"], "tools", optional=False)


def from_mcp_tools(
    listing: Mapping[str, Any] | Sequence[Mapping[str, Any]], name: str = "mcp", seed: int = 0
) -> ToolEnv:
    """A `tools/list` result (`{"tools": [...]}`) or its list of tools → a stub-state environment.
    A value of the wrong type anywhere is a `DocumentError` naming where (`tools[3].inputSchema`)."""
    tools = [_mcp_tool(t, name, f"tools[{i}]") for i, t in enumerate(_mcp_tool_list(listing))]
    return _finish(_slug(name), tools, seed)


def list_mcp_tools(
    argv: Sequence[str], timeout_s: float = 30.0, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Start an stdio MCP server, initialise, call `tools/list`, stop it; the result object."""
    msgs = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "openforgerl-synth", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
    ]
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=dict(env) if env is not None else None,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in msgs))
        proc.stdin.flush()
        for line in proc.stdout:  # stdin stays open until the answer is in: EOF would stop the server
            reply = _json_line(line)
            if isinstance(reply, dict) and reply.get("id") == 2:
                if "error" in reply:
                    raise RuntimeError(f"tools/list failed: {str(reply['error'])[:500]}")
                return dict(as_object(reply.get("result"), "the server's tools/list result", optional=False))
        raise RuntimeError("MCP server closed its output before answering tools/list")
    finally:
        proc.kill()
        proc.wait(timeout_s)


def _json_line(line: str) -> Any:
    """One stdout line of an MCP server: its JSON, or None for what is not (a log line, nesting past the
    parser's limit) — the server is someone else's program."""
    try:
        return json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return None


# --- OpenAPI --------------------------------------------------------------------------------------


def _resolve(doc: Mapping[str, Any], raw: Any, where: str) -> Mapping[str, Any]:
    """`raw` as an object, following one local `$ref` (`#/components/schemas/Pet`)."""
    schema = as_object(raw, where)
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = doc
        for part in ref[2:].split("/"):
            node = as_object(node, f"{where}.$ref {ref!r}").get(part.replace("~1", "/").replace("~0", "~"))
        if node is None:
            raise DocumentError(f"{where}.$ref {ref!r}: points at nothing in the document")
        return as_object(node, f"{where}.$ref {ref!r}")
    return schema


def _op_params(
    doc: Mapping[str, Any], op: Mapping[str, Any], shared: Sequence[Any], where: str
) -> tuple[Param, ...]:
    out: list[Param] = []
    own = as_list(op.get("parameters"), f"{where}.parameters")
    for i, raw in enumerate([*shared, *own]):
        at = (
            f"{where}.parameters[{i - len(shared)}]"
            if i >= len(shared)
            else f"{where} (path parameters)[{i}]"
        )
        p = _resolve(doc, raw, at)
        if p.get("in") in ("path", "query"):
            schema = _resolve(doc, p.get("schema"), f"{at}.schema")
            name = as_text(p.get("name"), f"{at}.name")
            if not name:
                raise DocumentError(f"{at}.name: every parameter needs a name")
            out.append(
                Param(
                    name,
                    _schema_type(schema.get("type"), f"{at}.schema.type"),
                    as_text(p.get("description"), f"{at}.description"),
                    bool(p.get("required", p.get("in") == "path")),
                    enum=as_scalar_list(schema.get("enum"), f"{at}.schema.enum"),
                )
            )
    body = as_object(op.get("requestBody"), f"{where}.requestBody")
    content = as_object(body.get("content"), f"{where}.requestBody.content")
    media = as_object(content.get("application/json"), f"{where}.requestBody.content.application/json")
    at = f"{where}.requestBody.content.application/json.schema"
    schema = _resolve(doc, media.get("schema"), at)
    names = {p.name for p in out}
    out += [p for p in _params(schema, {}, at) if p.name not in names and p.name != "id"]
    return tuple(out)


def _op_tool(
    doc: Mapping[str, Any],
    path: str,
    method: str,
    op: Mapping[str, Any],
    service: str,
    shared: Sequence[Any],
    where: str,
) -> Tool:
    segments = [s for s in path.strip("/").split("/") if s]
    resource = _slug(next((s for s in segments if not s.startswith("{")), service), "_")
    path_params = re.findall(r"{(\w+)}", path)
    params = _op_params(doc, op, shared, where)
    kind = {"post": "create", "put": "update", "patch": "update", "delete": "delete"}.get(method)
    if kind is None:
        search = [p for p in params if p.required and p.type == "string"]
        kind = "get" if path_params else "search" if len(search) == 1 else "list"
    name = (
        as_text(op.get("operationId"), f"{where}.operationId")
        or f"{method}_{'_'.join(_slug(s, '_') for s in segments)}"
    )
    summary = as_text(op.get("summary"), f"{where}.summary") or as_text(
        op.get("description"), f"{where}.description"
    )
    return Tool(
        name,
        summary,
        params,
        "read" if method == "get" else "write",
        kind,  # type: ignore[arg-type]
        f"{service}.{resource}",
        path_params[-1] if path_params else "id",
    )


def from_openapi(doc: Mapping[str, Any], name: str | None = None, seed: int = 0) -> ToolEnv:
    """Every operation of an OpenAPI 3 document → a tool over stub collections (one per resource).
    A value of the wrong type anywhere is a `DocumentError` naming where (`paths./pets.get.parameters[0]`)."""
    doc = as_object(doc, "the document", optional=False)
    title = name or as_text(as_object(doc.get("info"), "info").get("title"), "info.title", "api")
    service = _slug(title)
    tools = []
    for path, raw in as_object(doc.get("paths"), "paths").items():
        item = as_object(raw, f"paths.{path}", optional=False)
        shared = as_list(item.get("parameters"), f"paths.{path}.parameters")
        for method in ("get", "post", "put", "patch", "delete"):
            if method in item:
                where = f"paths.{path}.{method}"
                op = as_object(item[method], where, optional=False)
                tools.append(_op_tool(doc, str(path), method, op, service, shared, where))
    return _finish(service, tools, seed)


def load_document(path: Path) -> ToolEnv:
    """A `.json` / `.yaml` file: an OpenAPI document (`openapi` key) or an MCP `tools/list` result (bare, or
    a whole JSON-RPC response). Anything else, too large, too deep or of the wrong type at any level is a
    `DocumentError` whose one line names the file, the place and the fix."""
    data = read_document(path)
    try:
        if isinstance(data, Mapping) and "openapi" in data:
            return from_openapi(data, None)
        if isinstance(data, Mapping) and "result" in data:  # a whole JSON-RPC response
            data = data["result"]
        return from_mcp_tools(data, path.stem)
    except DocumentError as exc:
        raise DocumentError(f"{path}: {exc}") from None
