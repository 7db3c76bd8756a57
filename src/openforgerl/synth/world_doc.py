"""A `ToolEnv` as a JSON document (`env_document`) that `toolenv.env_from_document` reads back equal (all
but `offered`, which narrows only Claw's tasks: a tool-world task offers every tool of its world).

Why: a world's tools must run where the agent calls them, in the rollout's sandbox, and a plug-in's
own code is not importable there unless it is installed there too. A world that is all data (its
tools' semantics from their kind, effect and collection, as every world imported from an MCP tool list
or an OpenAPI document is) needs no code of its own: the document is the world, and a task synthesised
from it carries it. A world with code (a tool's `op`, a `session_factory`) has no document: None.
"""

from __future__ import annotations

from typing import Any

from openforgerl.synth.toolenv import Collection, Param, Tool, ToolEnv

__all__ = ["env_document"]

_HINTS = ("kind", "ref", "ref_phrase")  # synthesis hints a TOML `param` table sets beside the schema


def env_document(env: ToolEnv) -> dict[str, Any] | None:
    """The world as plain JSON data, or None when part of it is code."""
    if env.session_factory is not None or any(t.op is not None for t in env.tools):
        return None
    return {
        "name": env.name,
        "tools": [_tool(t) for t in env.tools],
        "collections": [_collection(c) for c in env.collections],
        "fixtures": {k: dict(v) for k, v in env.fixtures.items()},
        "values": {k: list(v) for k, v in env.values.items()},
    }


def _param_schema(p: Param) -> dict[str, Any]:
    return {"type": p.type, "description": p.description} | ({"enum": list(p.enum)} if p.enum else {})


def _hints(p: Param) -> dict[str, str]:
    default = Param(p.name)
    return {k: getattr(p, k) for k in _HINTS if getattr(p, k) != getattr(default, k)}


def _tool(t: Tool) -> dict[str, Any]:
    return {
        "name": t.name,
        "description": t.description,
        "parameters": {
            "type": "object",
            "properties": {p.name: _param_schema(p) for p in t.params},
            "required": [p.name for p in t.params if p.required],
        },
        "param": {p.name: hints for p in t.params if (hints := _hints(p))},
        "effect": t.effect,
        "kind": t.kind,
        "collection": t.collection,
        "key": t.key,
        "target": t.target,
        "fields": dict(t.fields),
        "sets": dict(t.sets),
        "destructive": t.destructive,
        "forbids": list(t.forbids),
        "templates": list(t.templates),
    }


def _collection(c: Collection) -> dict[str, Any]:
    return {
        "name": c.name,
        "label": c.label,
        "fields": dict(c.fields),
        "records": [dict(r) for r in c.records],
        "key": c.key,
        "id_prefix": c.id_prefix,
        "defaults": dict(c.defaults),
        "entity": c.entity,
    }
