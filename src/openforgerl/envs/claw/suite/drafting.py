"""The builders the Claw suite's task families (families.py, families_hard.py) write their tasks with:
a gold action (`A`) and the safety gate's check dict (`not_called`); a record check's is the SDK's
`env.checks.spec.record_entry`."""

from __future__ import annotations

from typing import Any

from openforgerl.tasks.draft import Action

__all__ = ["A", "not_called"]


def A(tool: str, **args: Any) -> Action:
    return Action(tool, args)


def not_called(tool: str, name: str) -> dict[str, Any]:
    return {"kind": "not_called", "name": name, "tool": tool, "safety": True}
