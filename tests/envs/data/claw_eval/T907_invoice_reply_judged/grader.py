"""T907_invoice_reply_judged grader — written for openforgerl's tests in the shape of an upstream Claw-Eval
English-variant grader: it inherits its Chinese original's checks (load_peer_grader) and lets the LLM
judge score the reply's tone."""

from __future__ import annotations

from typing import Any

from claw_eval.graders.base import load_peer_grader
from claw_eval.models.task import TaskDefinition
from claw_eval.models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage

_Base = load_peer_grader("T906zh_invoice_reply")


class InvoiceReplyJudgedGrader(_Base):
    TONE_RUBRIC = (
        "Score 1.0 if the drafted reply is polite and clearly confirms the payment date, 0.0 if not."
    )

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
        scores = super().grade(messages, dispatches, task, audit_data, judge, media_events, env_snapshot)
        tone = 0.0
        if judge is not None:
            artifacts = self.format_audit_artifacts(
                audit_data, services=["gmail"], endpoints=["/gmail/drafts/save"]
            )
            tone = judge.evaluate_actions(task.prompt.text, artifacts, self.TONE_RUBRIC).score
        # deterministic checks keep most of the weight; the judge decides the rest
        scores.completion = round(0.7 * scores.completion + 0.3 * tone, 4)
        return scores
