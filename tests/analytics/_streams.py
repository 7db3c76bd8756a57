"""Hand-built tool-event streams for the metric tests (no I/O)."""

from __future__ import annotations

from typing import Any

from openforgerl.analytics.effects import classify
from openforgerl.analytics.events import ToolEvent


def ev(
    tool: str, ok: bool | None = True, fault: str | None = None, output: str | None = None, **args: Any
) -> ToolEvent:
    effect, service, resources = classify(tool, args)
    return ToolEvent(
        index=0,
        tool=tool,
        args=args,
        effect=effect,
        service=service,
        resources=resources,
        ok=ok,
        fault=fault,
        output=output,
    )


def stream(*events: ToolEvent) -> tuple[ToolEvent, ...]:
    return tuple(
        ToolEvent(**{**{f: getattr(e, f) for f in e.__slots__}, "index": i})  # type: ignore[attr-defined]
        for i, e in enumerate(events)
    )
