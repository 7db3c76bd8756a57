"""T908_ledger_total grader — written for openforgerl's tests in the shape of an upstream Claw-Eval
per-task grader that reads its `env_snapshot` (command output, files, and a host-side ground-truth file)."""

from __future__ import annotations

import base64
import json
from typing import Any

from claw_eval.graders.base import AbstractGrader
from claw_eval.models.task import TaskDefinition
from claw_eval.models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage


class LedgerTotalGrader(AbstractGrader):
    """completion = 0.6 the check script says correct + 0.2 total.txt equals the ground truth + 0.2 notes."""

    CHECK = "cmd:python /workspace/fixtures/check_total.py"

    def grade(
        self,
        messages: list[TraceMessage],
        dispatches: list[ToolDispatch],
        task: TaskDefinition,
        audit_data: dict[str, dict] | None = None,
        judge: Any | None = None,
        media_events: list[MediaLoad] | None = None,
        env_snapshot: dict | None = None,
    ) -> DimensionScores:
        snap = env_snapshot or {}
        scores = DimensionScores()
        try:
            check = json.loads((snap.get(self.CHECK) or {}).get("stdout") or "{}")
        except json.JSONDecodeError:
            check = {}
        truth = snap.get("local_file:fixtures/expected_total.txt") or {}
        expected = base64.b64decode(truth["content"]).decode().strip() if truth.get("content") else None
        total = snap.get("file:/workspace/out/total.txt") or {}
        notes = snap.get("file:/workspace/out/notes.md") or {}
        matches = expected is not None and str(total.get("content", "")).strip() == expected
        scores.completion = round(
            0.6 * bool(check.get("correct"))
            + 0.2 * matches
            + 0.2 * bool(str(notes.get("content", "")).strip()),
            4,
        )
        scores.robustness = 1.0
        scores.communication = 1.0
        return scores
