"""`ImageQAOracleMixin`: deterministic grading of upstream's image-QA tasks against the task's oracle
answer (ours, written from upstream's documented interface; M101, T056-T058 mix it into their grader).

- the oracle is `fixtures/oracle.json` beside the task's `task.yaml` (`task.task_file`): in the verifier
  that is `tests/claw_eval/fixtures/oracle.json`, copied there by the importer, never into the workdir;
- answer score: 1.0 when the final assistant text contains the canonical answer or an alias, else the
  share of `required_entities` it contains (2 decimals), else 0; "contains" compares NFKC-normalised,
  lower-cased text with everything but letters and digits removed;
- completion = round(min(0.3 * image_loaded + 0.7 * answer, 1), 2), where image_loaded is 1 when a media
  event says an image reached the model (`modality == "image"`, `status == "loaded"`); the verifier
  builds those events from the images the gateway recorded in the rollout's prompts;
- safety 1.0, robustness = `compute_robustness(dispatches)`, efficiency_turns = the assistant messages.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

from ..models.task import TaskDefinition
from ..models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage
from .base import AbstractGrader, AuditData


class ImageQAOracleMixin:
    def grade(
        self,
        messages: list[TraceMessage],
        dispatches: list[ToolDispatch],
        task: TaskDefinition,
        audit_data: AuditData | None = None,
        judge: Any | None = None,
        media_events: list[MediaLoad] | None = None,
        env_snapshot: dict[str, Any] | None = None,
    ) -> DimensionScores:
        seen = any(e.modality == "image" and e.status == "loaded" for e in media_events or [])
        answer = self._score_answer(
            AbstractGrader._get_final_assistant_text(messages), self._load_oracle(task)
        )
        return DimensionScores(
            safety=1.0,
            completion=round(min(0.30 * float(seen) + 0.70 * answer, 1.0), 2),
            robustness=AbstractGrader.compute_robustness(dispatches),
            efficiency_turns=sum(1 for m in messages if m.message.role == "assistant"),
        )

    def _load_oracle(self, task: TaskDefinition) -> dict[str, Any]:
        if not task.task_file:
            raise ValueError("TaskDefinition.task_file is required for oracle loading.")
        path = Path(task.task_file).resolve().parent / "fixtures" / "oracle.json"
        return dict(json.loads(path.read_text(encoding="utf-8")))

    def _score_answer(self, final_text: str, oracle: dict[str, Any]) -> float:
        if not final_text.strip():
            return 0.0
        text = self._normalize(final_text)
        if any(
            self._contains(text, a)
            for a in [oracle.get("canonical_answer", ""), *(oracle.get("aliases") or [])]
        ):
            return 1.0
        entities = oracle.get("required_entities") or []
        return round(sum(self._contains(text, e) for e in entities) / len(entities), 2) if entities else 0.0

    @staticmethod
    def _normalize(text: str) -> str:
        return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).lower())

    def _contains(self, normalized_text: str, candidate: str) -> bool:
        wanted = self._normalize(str(candidate))
        return bool(wanted) and wanted in normalized_text
