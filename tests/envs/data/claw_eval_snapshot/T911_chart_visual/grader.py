"""T911_chart_visual grader — written for openforgerl's tests in the shape of an upstream Claw-Eval chart
grader: the multimodal and visual mixins read the env snapshot, and the vision judge compares the chart with
the task's reference image."""

from __future__ import annotations

from typing import Any

from claw_eval.graders.base import AbstractGrader
from claw_eval.graders.multimodal_common import MultimodalGraderMixin
from claw_eval.graders.visual_grader import VisualGraderMixin
from claw_eval.models.task import TaskDefinition
from claw_eval.models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage


class ChartVisualGrader(AbstractGrader, MultimodalGraderMixin, VisualGraderMixin):
    """completion = 0.2 chart.png is a PNG + 0.8 the vision judge's score against the reference."""

    RUBRIC = "The candidate must be a single red pixel; the reference shows the expected layout."

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
        scores.robustness = 1.0
        charts = self.collect_screenshots_from_snapshot(env_snapshot, pattern="/workspace/chart.png")
        if not charts:
            return scores
        ref = (env_snapshot or {}).get("local_file:fixtures/reference.png", {})
        result = self.judge_visual_similarity(
            judge,
            [ref["content"]] if ref.get("content") else [],
            charts,
            rubric=self.RUBRIC,
            context="A chart drawn by the agent.",
        )
        is_png = self.check_file_format(env_snapshot, "/workspace/chart.png", "image/png")
        scores.completion = round(0.2 * is_png + 0.8 * (result.score if result else 0.0), 4)
        return scores
