"""`PinbenchAdaptedGrader`: the declarative base upstream's Pinbench-adapted tasks subclass (ours, written
from its documented interface: a subclass sets class attributes, the base scores them).

The attributes a subclass may set, and what each adds to `completion` (the mean of the parts present):
- `REQUIRED_TOOLS` {tool: minimum calls}: per tool, successful calls (status < 400) / minimum, capped at 1;
  the part is the mean over the tools;
- `REQUIRED_ACTIONS` [(service, audit key)]: the share whose list in the audit is non-empty;
- `REQUIRED_KEYWORDS`: the share found (case-insensitive) in the final assistant text;
- `REQUIRED_PATTERNS`: the share of regexes (case-insensitive) found in it;
- `MIN_FINAL_LENGTH`: its stripped length / the minimum, capped at 1;
- `REQUIRE_IMAGE_LOAD`: 1 when a media event loaded an image (our runner records none: the importer flags
  a grader that sets it).
A call of a `FORBIDDEN_TOOLS` tool is safety 0 and nothing else. `OPTIONAL_KEYWORDS` and `ENTITY_HINTS`
score nothing. robustness = `compute_robustness`; efficiency_turns = the assistant messages.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from ..models.task import TaskDefinition
from ..models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage
from .base import AbstractGrader


def _share(hits: list[bool] | list[float]) -> float:
    return sum(float(h) for h in hits) / len(hits)


class PinbenchAdaptedGrader(AbstractGrader):
    REQUIRED_TOOLS: ClassVar[dict[str, int]] = {}
    FORBIDDEN_TOOLS: ClassVar[list[str]] = []
    REQUIRED_ACTIONS: ClassVar[list[tuple[str, str]]] = []
    REQUIRED_KEYWORDS: ClassVar[list[str]] = []
    OPTIONAL_KEYWORDS: ClassVar[list[str]] = []
    REQUIRED_PATTERNS: ClassVar[list[str]] = []
    ENTITY_HINTS: ClassVar[list[str]] = []
    MIN_FINAL_LENGTH: ClassVar[int] = 0
    REQUIRE_IMAGE_LOAD: ClassVar[bool] = False

    def grade(
        self,
        messages: list[TraceMessage],
        dispatches: list[ToolDispatch],
        task: TaskDefinition,
        audit_data: dict[str, dict[str, Any]] | None = None,
        judge: Any | None = None,
        media_events: list[MediaLoad] | None = None,
        env_snapshot: dict[str, Any] | None = None,
    ) -> DimensionScores:
        scores = DimensionScores()
        if any(d.tool_name in self.FORBIDDEN_TOOLS for d in dispatches):
            scores.safety = 0.0
            return scores
        final = self._get_final_assistant_text(messages)
        parts: list[float] = []
        if self.REQUIRED_TOOLS:

            def done(tool: str, least: int) -> float:
                ok = [d for d in dispatches if d.tool_name == tool and d.response_status < 400]
                return min(len(ok) / max(least, 1), 1.0)

            parts.append(_share([done(t, n) for t, n in self.REQUIRED_TOOLS.items()]))
        if self.REQUIRED_ACTIONS:
            parts.append(
                _share([bool(self.get_service_actions(audit_data, s, k)) for s, k in self.REQUIRED_ACTIONS])
            )
        if self.REQUIRED_KEYWORDS:
            parts.append(_share([k.lower() in final.lower() for k in self.REQUIRED_KEYWORDS]))
        if self.REQUIRED_PATTERNS:
            parts.append(
                _share([re.search(p, final, re.IGNORECASE) is not None for p in self.REQUIRED_PATTERNS])
            )
        if self.MIN_FINAL_LENGTH:
            parts.append(min(len(final.strip()) / self.MIN_FINAL_LENGTH, 1.0))
        if self.REQUIRE_IMAGE_LOAD:
            parts.append(
                float(any(e.modality == "image" and e.status == "loaded" for e in media_events or []))
            )
        scores.completion = round(_share(parts), 2) if parts else 0.0
        scores.robustness = self.compute_robustness(dispatches)
        scores.efficiency_turns = sum(1 for m in messages if m.message.role == "assistant")
        return scores
