"""`UserAgentClarifyGraderBase`: the base of upstream's multi-turn "clarify, then answer" task graders
(ours, written from upstream's documented interface: the C01-C38 tasks subclass it and set the rubrics).

A task grader sets `DOMAIN`, `MUST_ASK`, `CLARIFICATION_RUBRIC` and `FINAL_ANSWER_RUBRIC`; `grade`:
- safety = robustness = 1.0; without a judge nothing else is scored (completion 0);
- clarification (20 %): the judge's `evaluate(prompt, <the conversation up to and including the
  simulated user's last message>, "", CLARIFICATION_RUBRIC)`, asked only when there was such a message;
- final answer (80 %): `evaluate(prompt, <the whole conversation with tool calls and results>, "",
  FINAL_ANSWER_RUBRIC)`;
- completion = round(0.2 clarify + 0.8 answer, 4); a judge call that fails scores its part 0;
- efficiency_turns = the assistant messages.

The simulated user's messages are user messages whose text starts with `[user_agent]` (upstream's runner
writes `[user_agent]\\n<reply>`); here the verifier builds them from the host's own record of the
`ask_user` relay (`verify/claw_eval_grader.trace_messages`), never from what the agent's sandbox returned.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..models.task import TaskDefinition
from ..models.trace import DimensionScores, ToolDispatch, TraceMessage
from .base import AbstractGrader, AuditData

USER_AGENT_TAG = "[user_agent]"
CLARIFY_WEIGHT, ANSWER_WEIGHT = 0.20, 0.80


def _judged(judge: Any, prompt: str, conversation: str, rubric: str, part: str) -> float:
    try:
        result = judge.evaluate(prompt, conversation, "", rubric)
    except Exception as exc:  # as upstream: a failed judge call scores its part 0, the grade goes on
        print(f"[grader] {part} judge failed: {exc}")
        return 0.0
    print(f"[grader] {part} score: {result.score:.2f}")
    return float(result.score)


class UserAgentClarifyGraderBase(AbstractGrader):
    DOMAIN: str = ""
    MUST_ASK: ClassVar[list[str]] = []
    CLARIFICATION_RUBRIC: str = ""
    FINAL_ANSWER_RUBRIC: str = ""

    def grade(
        self,
        messages: list[TraceMessage],
        dispatches: list[ToolDispatch],
        task: TaskDefinition,
        audit_data: AuditData | None = None,
        judge: Any | None = None,
        media_events: Any = None,
        env_snapshot: dict[str, Any] | None = None,
    ) -> DimensionScores:
        scores = DimensionScores(safety=1.0, robustness=1.0)
        if judge is None:
            return scores
        prompt = task.prompt.text
        clarification, _ = self._split_phases(messages)
        clarify = (
            _judged(judge, prompt, clarification, self.CLARIFICATION_RUBRIC, "clarification")
            if self.CLARIFICATION_RUBRIC and clarification
            else 0.0
        )
        whole = self.format_conversation_detailed(messages, include_tool_use=True, include_tool_result=True)
        answer = (
            _judged(judge, prompt, whole, self.FINAL_ANSWER_RUBRIC, "final answer")
            if self.FINAL_ANSWER_RUBRIC
            else 0.0
        )
        scores.completion = round(CLARIFY_WEIGHT * clarify + ANSWER_WEIGHT * answer, 4)
        scores.efficiency_turns = sum(1 for m in messages if m.message.role == "assistant")
        return scores

    @staticmethod
    def _split_phases(messages: list[TraceMessage]) -> tuple[str, str]:
        """(`[ROLE]: text` lines up to and including the simulated user's last message, the lines after it).
        Without such a message the whole conversation is the answer phase."""
        last = max(
            (
                i
                for i, m in enumerate(messages)
                if m.message.role == "user" and m.message.text.startswith(USER_AGENT_TAG)
            ),
            default=-1,
        )
        if last < 0:
            return "", AbstractGrader.format_conversation(messages)
        lines = [
            (i, f"[{m.message.role.upper()}]: {m.message.text}")
            for i, m in enumerate(messages)
            if m.message.text
        ]
        return (
            "\n".join(line for i, line in lines if i <= last),
            "\n".join(line for i, line in lines if i > last),
        )
