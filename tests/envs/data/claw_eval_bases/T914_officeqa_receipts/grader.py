"""T914_officeqa_receipts grader — written for openforgerl's tests in the shape of upstream's OfficeQA
graders (T076-T085): the numerical answer with officeqa_reward's fuzzy match, without a judge part."""

from __future__ import annotations

from typing import Any

from claw_eval.graders.base import AbstractGrader
from claw_eval.graders.officeqa_reward import extract_final_answer, score_answer
from claw_eval.models.task import TaskDefinition
from claw_eval.models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage

GROUND_TRUTH = "349"
TOLERANCE = 0.05


class OfficeQAReceiptsGrader(AbstractGrader):
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
        scores = DimensionScores()
        scores.safety = 1.0
        all_text = self._get_all_assistant_text(messages)
        try:
            answer_text = extract_final_answer(all_text) if all_text else ""
            scores.completion = score_answer(GROUND_TRUTH, answer_text, TOLERANCE) if answer_text else 0.0
        except Exception:
            scores.completion = 0.0
        scores.robustness = self.compute_robustness(dispatches)
        return scores
