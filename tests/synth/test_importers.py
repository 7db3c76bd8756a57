"""An MCP server's tool list and an OpenAPI document import into the format and synthesise tasks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from openforgerl.synth import load_env, synthesize
from openforgerl.synth.importers import from_mcp_tools, from_openapi, list_mcp_tools

PETSTORE = {
    "openapi": "3.0.3",
    "info": {"title": "Petstore", "version": "1"},
    "paths": {
        "/pets": {
            "get": {
                "operationId": "listPets",
                "summary": "List pets",
                "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}],
            },
            "post": {
                "operationId": "createPet",
                "summary": "Add a pet",
                "requestBody": {
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}
                },
            },
        },
        "/pets/{petId}": {
            "parameters": [{"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": {"operationId": "showPet", "summary": "Info for a pet"},
            "patch": {
                "operationId": "updatePet",
                "summary": "Change a pet",
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"tag": {"type": "string"}, "owner": {"type": "string"}},
                            }
                        }
                    }
                },
            },
            "delete": {"operationId": "deletePet", "summary": "Remove a pet"},
        },
    },
    "components": {
        "schemas": {
            "Pet": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "id": {"type": "string"},
                    "name": {"type": "string"},
                    "tag": {"type": "string"},
                    "owner": {"type": "string"},
                },
            }
        }
    },
}


def test_the_claw_mcp_server_tool_list_imports_and_synthesises(tmp_path: Path) -> None:
    listing = list_mcp_tools([sys.executable, "-m", "openforgerl.envs.claw.mcp_server"])
    assert {t["name"] for t in listing["tools"]} >= {"mail_send", "calendar_delete", "submit_answer"}
    env = from_mcp_tools(listing, "claw-mcp")
    roles = {t.name: (t.effect, t.kind) for t in env.tools}
    assert roles["mail_send"] == ("write", "create") and roles["calendar_delete"] == ("write", "delete")
    assert roles["contacts_find"] == ("read", "search") and roles["submit_answer"] == ("final", "answer")
    assert (
        env.tool("mail_reply").param("id").ref == "mail.items.id"
    )  # the data flow: a found id feeds a reply
    report, paths, _ = synthesize(env, 25, tmp_path, seed=2)
    assert report.kept == len(paths) == 25


def test_an_mcp_listing_file_loads_by_path(tmp_path: Path) -> None:
    from openforgerl.env.world_tools import TOOLS

    listing = {
        "tools": [
            {"name": t.name, "description": t.description, "inputSchema": t.input_schema()} for t in TOOLS
        ]
    }
    (tmp_path / "tools.json").write_text(json.dumps({"jsonrpc": "2.0", "id": 2, "result": listing}))
    report, _, _ = synthesize(load_env(tmp_path / "tools.json"), 10, tmp_path / "out")
    assert report.kept == 10


def test_an_openapi_document_imports_and_synthesises(tmp_path: Path) -> None:
    env = from_openapi(PETSTORE)
    roles = {t.name: (t.effect, t.kind, t.collection, t.key) for t in env.tools}
    assert roles["listPets"] == ("read", "list", "petstore.pets", "id")
    assert roles["createPet"][:2] == ("write", "create") and roles["showPet"][1] == "get"
    assert roles["updatePet"] == ("write", "update", "petstore.pets", "petId")
    assert roles["deletePet"][:2] == ("write", "delete")
    pets = env.collection("petstore.pets")
    assert pets is not None and pets.label == "name" and len(pets.records) == 3  # state stubs
    (tmp_path / "petstore.json").write_text(json.dumps(PETSTORE))
    report, paths, _ = synthesize(tmp_path / "petstore.json", 20, tmp_path / "out", seed=4)
    assert report.kept == len(paths) >= 15
    families = " ".join(json.loads((p / "solution" / "actions.json").read_text())[-1]["tool"] for p in paths)
    assert "deletePet" in families and "createPet" in families
