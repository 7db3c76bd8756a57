"""Upstream's webpage grader bases, `DynamicWebpageGrader` and `ImageReproductionGrader` (ours, written from
their documented interface: a subclass sets rubrics, weights and a reference image; the vision judge scores).

Both read the screenshots the task's snapshot commands recorded (`collect_screenshots_from_snapshot`: the
`file:` entries under `/workspace/grading_frames/`, in path order) and the reference image, a
`local_file:<REFERENCE_IMAGE_PATH>` entry (none when the attribute is unset or the entry has no base64
content). No screenshot: completion 0 and no judge call.
- `DynamicWebpageGrader`: completion = VISUAL_WEIGHT (0.75) × the judge on `VISUAL_RUBRIC` + PHYSICS_WEIGHT
  (0.25) × the judge on `PHYSICS_RUBRIC`, each over every frame (an empty rubric scores 0, so does a judge
  that answers nothing), capped at 1 and rounded to 2 places;
- `ImageReproductionGrader`: completion = the judge on `VISUAL_RUBRIC` over the first frame only.
Both: safety 1, robustness = `compute_robustness`, efficiency_turns = the assistant messages.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..models.task import TaskDefinition
from ..models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage
from .base import AbstractGrader
from .multimodal_common import MultimodalGraderMixin
from .visual_grader import VisualGraderMixin

_DYNAMIC_CONTEXTS = (
    "Candidate screenshots of a generated webpage.",
    "Sequential frames captured over 5 seconds of a generated animation.",
)
_STATIC_CONTEXT = (
    "Compare the candidate webpage screenshot against the original reference image. "
    "Focus on content accuracy, not just visual similarity."
)


class _WebpageBase(AbstractGrader, MultimodalGraderMixin, VisualGraderMixin):
    VISUAL_RUBRIC: ClassVar[str] = ""
    REFERENCE_IMAGE_PATH: ClassVar[str | None] = None

    def _reference(self, env_snapshot: dict[str, Any] | None) -> list[str]:
        if not self.REFERENCE_IMAGE_PATH or not env_snapshot:
            return []
        entry = env_snapshot.get(f"local_file:{self.REFERENCE_IMAGE_PATH}") or {}
        return [entry["content"]] if entry.get("encoding") == "base64" and entry.get("content") else []

    def _judged(self, judge: Any, ref: list[str], frames: list[str], rubric: str, context: str) -> float:
        if not judge or not rubric:
            return 0.0
        result = self.judge_visual_similarity(
            judge, ref_images_b64=ref, gen_images_b64=frames, rubric=rubric, context=context
        )
        return float(result.score) if result else 0.0

    def _completion(self, judge: Any, ref: list[str], frames: list[str]) -> float:
        raise NotImplementedError

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
        scores.safety = 1.0
        frames = self.collect_screenshots_from_snapshot(env_snapshot)
        if frames:
            scores.completion = round(
                min(self._completion(judge, self._reference(env_snapshot), frames), 1.0), 2
            )
        scores.robustness = self.compute_robustness(dispatches)
        scores.efficiency_turns = sum(1 for m in messages if m.message.role == "assistant")
        return scores


class DynamicWebpageGrader(_WebpageBase):
    PHYSICS_RUBRIC: ClassVar[str] = ""
    VISUAL_WEIGHT: ClassVar[float] = 0.75
    PHYSICS_WEIGHT: ClassVar[float] = 0.25

    def _completion(self, judge: Any, ref: list[str], frames: list[str]) -> float:
        visual = self._judged(judge, ref, frames, self.VISUAL_RUBRIC, _DYNAMIC_CONTEXTS[0])
        physics = self._judged(judge, ref, frames, self.PHYSICS_RUBRIC, _DYNAMIC_CONTEXTS[1])
        return self.VISUAL_WEIGHT * visual + self.PHYSICS_WEIGHT * physics


class ImageReproductionGrader(_WebpageBase):
    REFERENCE_IMAGE_PATH: ClassVar[str | None] = ""

    def _completion(self, judge: Any, ref: list[str], frames: list[str]) -> float:
        return self._judged(judge, ref, frames[:1], self.VISUAL_RUBRIC, _STATIC_CONTEXT)
