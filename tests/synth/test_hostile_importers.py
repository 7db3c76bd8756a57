"""The MCP, OpenAPI and TOML importers on documents with a wrong value at any level: an environment, or a
`DocumentError` naming where; never another exception (a traceback at the CLI)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openforgerl.synth import synthesize
from openforgerl.synth.documents import MAX_DEPTH, DocumentError, depth, read_document
from openforgerl.synth.importers import from_mcp_tools, from_openapi, load_document
from openforgerl.synth.toolenv import ToolEnv, load_toml, tool_from_dict

MCP = {
    "tools": [
        {
            "name": "notes_add",
            "description": "Add a note.",
            "inputSchema": {
                "type": "object",
                "required": ["title"],
                "properties": {
                    "title": {"type": "string", "description": "Title."},
                    "tag": {"type": ["string", "null"], "enum": ["home", "work"]},
                },
            },
        },
        {
            "name": "notes_get",
            "description": "Get a note.",
            "inputSchema": {
                "type": "object",
                "properties": {"note_id": {"type": "string"}},
                "required": ["note_id"],
            },
        },
        {"name": "notes_list", "inputSchema": {"type": "object", "properties": {}}},
    ]
}
OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "Pets", "version": "1"},
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}],
            },
            "post": {
                "operationId": "createPet",
                "requestBody": {
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}
                },
            },
        },
        "/pets/{petId}": {
            "parameters": [{"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}],
            "delete": {"operationId": "deletePet", "summary": "Remove a pet"},
        },
    },
    "components": {
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "tag": {"type": "string"}},
            }
        }
    },
}
TOML_TOOL = {
    "name": "notes_add",
    "effect": "write",
    "kind": "create",
    "collection": "notes.items",
    "parameters": {"properties": {"title": {"type": "string"}}, "required": ["title"]},
    "param": {"title": {"kind": "title"}},
    "fields": {"title": "title"},
    "forbids": ["notes_delete"],
}

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document a value sits (the root included)."""
    out = [at]
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in items:
        out += _paths(child, (*at, key))
    return out


def _replaced(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def _imports_or_names_the_problem(fn: Any, doc: Any) -> ToolEnv | None:
    try:
        env = fn(doc)
    except DocumentError as exc:
        assert str(exc) and "\n" not in str(exc)
        return None
    assert isinstance(env, ToolEnv)
    return env


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_paths(MCP)), JSON)
def test_mcp_with_any_value_anywhere_imports_or_names_the_place(path: tuple[Any, ...], value: Any) -> None:
    _imports_or_names_the_problem(from_mcp_tools, _replaced(MCP, path, value))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_paths(OPENAPI)), JSON)
def test_openapi_with_any_value_anywhere_imports_or_names_the_place(
    path: tuple[Any, ...], value: Any
) -> None:
    _imports_or_names_the_problem(from_openapi, _replaced(OPENAPI, path, value))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_paths(TOML_TOOL)), JSON)
def test_a_toml_tool_with_any_value_anywhere_loads_or_names_the_place(
    path: tuple[Any, ...], value: Any
) -> None:
    try:
        tool_from_dict(_replaced(TOML_TOOL, path, value))
    except DocumentError as exc:
        assert str(exc) and "\n" not in str(exc)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.sampled_from(_paths(MCP)), JSON)
def test_what_imports_also_synthesises(tmp_path: Path, path: tuple[Any, ...], value: Any) -> None:
    """An imported environment with odd but well-typed values still goes through the whole pipeline."""
    env = _imports_or_names_the_problem(from_mcp_tools, _replaced(MCP, path, value))
    if env is not None:
        synthesize(env, 2, tmp_path / "out", seed=1)


def test_controls_the_untouched_documents_import_with_their_tools() -> None:
    assert {t.name for t in from_mcp_tools(MCP).tools} >= {"notes_add", "notes_get", "notes_list"}
    assert from_mcp_tools(MCP).tool("notes_add").param("tag").type == "string"  # ["string", "null"]
    assert {t.name for t in from_openapi(OPENAPI).tools} >= {"listPets", "createPet", "deletePet"}
    assert tool_from_dict(TOML_TOOL).param("title").kind == "title"


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        (
            {
                "tools": [
                    {"name": "a_get", "inputSchema": {"properties": {"x": {"type": "string"}}, "required": 5}}
                ]
            },
            "tools[0].inputSchema.required: expected a list, got a number",
        ),
        (
            {"tools": [{"name": "a_get", "inputSchema": {"properties": {"x": []}}}]},
            "tools[0].inputSchema.properties.x: expected an object, got a list",
        ),
        ({"tools": [{"name": {"a": 1}}]}, "tools[0].name: expected a string, got an object"),
        ({"tools": [7]}, "tools[0]: expected an object, got a number"),
        ({"tool": []}, "no `tools` list"),
        ("tools", "the document: expected an object, got a string"),
    ],
)
def test_a_wrong_type_at_each_mcp_level_names_its_place(doc: Any, where: str) -> None:
    with pytest.raises(DocumentError) as err:
        from_mcp_tools(doc)
    assert where in str(err.value)


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"paths": []}, "paths: expected an object, got a list"),
        ({"paths": {"/pets": []}}, "paths./pets: expected an object, got a list"),
        (
            {"paths": {"/pets": {"get": {"parameters": {"a": 1}}}}},
            "paths./pets.get.parameters: expected a list",
        ),
        (
            {
                "paths": {
                    "/pets": {"get": {"parameters": [{"in": "query", "name": "q", "schema": {"enum": 3}}]}}
                }
            },
            "paths./pets.get.parameters[0].schema.enum: expected a list, got a number",
        ),
        (
            {
                "paths": {
                    "/pets": {
                        "post": {
                            "requestBody": {
                                "content": {"application/json": {"schema": {"$ref": "#/components/nothing"}}}
                            }
                        }
                    }
                }
            },
            "schema.$ref '#/components/nothing': points at nothing in the document",
        ),
        ({"info": "Pets"}, "info: expected an object, got a string"),
    ],
)
def test_a_wrong_type_at_each_openapi_level_names_its_place(patch: dict[str, Any], where: str) -> None:
    with pytest.raises(DocumentError) as err:
        from_openapi({**OPENAPI, **patch})
    assert where in str(err.value)


def test_depth_is_counted_without_recursion_and_shared_nodes_once() -> None:
    deep: Any = []
    for _ in range(50_000):  # a recursive walk would blow Python's stack long before this
        deep = [deep]
    assert depth(deep) == MAX_DEPTH + 1
    shared: Any = [1]
    for _ in range(60):  # 2**60 paths through shared nodes ("billion laughs"): each node walked once
        shared = [shared, shared]
    assert depth(shared, limit=100) == 61


def test_a_yaml_billion_laughs_is_read_quickly(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    (tmp_path / "laughs.yaml").write_text("\n".join(lines) + "\ntools: []\n")
    assert read_document(tmp_path / "laughs.yaml")["tools"] == []
    (tmp_path / "laughs2.yaml").write_text("\n".join(lines) + "\n")
    with pytest.raises(DocumentError, match="the document has no `tools` list"):
        load_document(tmp_path / "laughs2.yaml")


@pytest.mark.parametrize(
    ("name", "text", "hint"),
    [
        ("bad.json", "{not json", "not valid JSON (line 1, column 2)"),
        ("bad.yaml", "tools: [1,\n", "not valid YAML"),
        ("bin.json", b"\xff\xfe\x00garbage", "not UTF-8 text"),
        ("bad.toml", "name = \n", "not valid TOML"),
    ],
)
def test_an_unparseable_document_is_one_line(tmp_path: Path, name: str, text: str | bytes, hint: str) -> None:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(DocumentError, match=re.escape(hint)):
        load_toml(path) if name.endswith(".toml") else load_document(path)


def test_a_document_under_the_limits_loads_by_path(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps({"jsonrpc": "2.0", "id": 2, "result": MCP}))
    assert load_document(tmp_path / "tools.json").tool("notes_get") is not None


SERVER = """
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("id") == 2:
        print("a log line, not JSON")
        print("[" * 5000 + "]" * 5000)
        print(json.dumps({"jsonrpc": "2.0", "id": 2, "result": RESULT}), flush=True)
"""


@pytest.mark.parametrize(("result", "ok"), [(MCP, True), ([MCP], False), ("tools", False)])
def test_a_hostile_mcp_server_reply_is_skipped_or_refused(tmp_path: Path, result: Any, ok: bool) -> None:
    """Log lines and 5000-deep lines on a server's stdout are skipped; a result that is not an object is a
    DocumentError; a well-formed one (the control) imports."""
    import sys

    from openforgerl.synth.importers import list_mcp_tools

    (tmp_path / "server.py").write_text(SERVER.replace("RESULT", repr(result)))
    argv = [sys.executable, str(tmp_path / "server.py")]
    if ok:
        assert {t.name for t in from_mcp_tools(list_mcp_tools(argv)).tools} >= {"notes_add"}
    else:
        with pytest.raises(DocumentError, match="tools/list result: expected an object"):
            list_mcp_tools(argv)
