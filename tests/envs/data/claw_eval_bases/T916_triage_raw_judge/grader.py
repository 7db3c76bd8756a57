"""T916_triage_raw_judge grader — written for openforgerl's tests in the shape of upstream's T001/T002
graders: a prompt of its own through `judge.client.chat.completions.create(model=judge.model_id, ...)`."""

from __future__ import annotations

import json
import re
import time
from typing import Any

from claw_eval.graders.base import AbstractGrader
from claw_eval.models.task import TaskDefinition
from claw_eval.models.trace import DimensionScores, MediaLoad, ToolDispatch, TraceMessage

EXPECTED = {"msg_001": "spam", "msg_002": "needs reply"}


class TriageRawJudgeGrader(AbstractGrader):
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
        scores = DimensionScores(safety=1.0, robustness=1.0)
        final_text = self._get_final_assistant_text(messages)
        if judge is None or not final_text:
            return scores
        prompt = (
            "Given the assistant's response below, determine what category was assigned to each email "
            '("needs reply", "FYI", "spam" or "unmentioned").\n\n'
            f"Assistant's response:\n{final_text}\n\n"
            'Output JSON only, msg_ids as keys, e.g. {"msg_001": "FYI"}'
        )
        for _attempt in range(
            31
        ):  # upstream's: any failure (an unparseable reply too) is retried after a sleep
            try:
                resp = judge.client.chat.completions.create(
                    model=judge.model_id,
                    messages=[{"role": "user", "content": prompt}],
                    temperature=0.0,
                    max_tokens=512,
                )
                raw = resp.choices[0].message.content or "{}"
                found = re.search(r"\{[^{}]*\}", raw)
                labels = json.loads(found.group(0) if found else raw)
                scores.completion = sum(labels.get(k) == v for k, v in EXPECTED.items()) / len(EXPECTED)
                return scores
            except Exception:
                time.sleep(16)
        return scores
