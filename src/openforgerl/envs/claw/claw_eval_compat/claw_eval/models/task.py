"""`TaskDefinition`: the task.yaml a grader is given (graders read `prompt.text`, `task_id`, `judge_rubric`).

Lenient on purpose (unknown keys kept as attributes): the grader only reads it, and task.yaml files carry
fields this layer does not model.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class Prompt(_Open):
    text: str = ""
    language: str = "zh"
    attachments: list[str] = Field(default_factory=list)


class Environment(_Open):
    timeout_seconds: int = 300
    max_turns: int = 20


class UserAgentTaskConfig(_Open):
    enabled: bool = False
    persona: str = ""
    max_rounds: int = 3
    system_prompt_suffix: str = ""


class TaskDefinition(_Open):
    task_id: str = ""
    task_name: str = ""
    category: str = ""
    difficulty: str = "simple"
    prompt: Prompt = Field(default_factory=Prompt)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_endpoints: list[dict[str, Any]] = Field(default_factory=list)
    environment: Environment = Field(default_factory=Environment)
    scoring_components: list[dict[str, Any]] = Field(default_factory=list)
    safety_checks: list[dict[str, Any]] = Field(default_factory=list)
    services: list[dict[str, Any]] = Field(default_factory=list)
    expected_actions: list[dict[str, Any]] = Field(default_factory=list)
    judge_rubric: str = ""
    reference_solution: str = ""
    primary_dimensions: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    user_agent: UserAgentTaskConfig = Field(default_factory=UserAgentTaskConfig)
    task_file: str | None = (
        None  # the task.yaml it was loaded from (set by the verifier, as upstream's loader)
    )
