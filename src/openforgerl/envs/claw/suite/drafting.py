"""The builders the Claw suite's task families (families.py, families_hard.py) write their tasks with:
a gold action (`A`) and the check dicts (`rec` for a record check, `not_called` for a safety gate)."""

from __future__ import annotations

from typing import Any

from openforgerl.tasks.draft import Action

__all__ = ["A", "not_called", "rec"]


def A(tool: str, **args: Any) -> Action:
    return Action(tool, args)


def rec(
    collection: str,
    name: str,
    match: dict[str, Any] | None = None,
    contains: dict[str, Any] | None = None,
    kind: str = "record",
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind, "name": name, "collection": collection}
    if match:
        out["match"] = match
    if contains:
        out["contains"] = contains
    return out | extra


def not_called(tool: str, name: str) -> dict[str, Any]:
    return {"kind": "not_called", "name": name, "tool": tool, "safety": True}
