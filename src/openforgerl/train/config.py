"""The training run's configuration (one YAML file -> one pydantic model)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from openforgerl.orchestrator.config import call_deadline_s, check_call_deadline


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskSelection(_Strict):
    dir: str = "builtin:claw"
    """A task folder (or `builtin:claw`, the shipped Claw suite)."""
    split: str | None = "train"
    difficulty: list[str] | None = None
    tags: list[str] | None = None
    """Keep tasks carrying any of these tags (e.g. `sft`: phrased like the tiny model's warm-up data)."""
    names: list[str] | None = None
    """Keep tasks whose folder name matches any of these glob patterns (e.g. `board-move-*`)."""
    limit: int | None = None
    pass_rate: tuple[float, float] | None = None
    """Keep only tasks whose calibrated pass rate (`openforgerl tasks calibrate`) lies strictly between
    these two numbers, e.g. [0, 1]: the tasks where GRPO groups have signal. Uncalibrated tasks are dropped."""
    refresh_every: int | None = Field(default=None, ge=1)
    """With `pass_rate`: every N training steps, run the current policy `refresh_k` times on every task of
    this selection (band ignored), rewrite their pass rates in task.toml and redraw the band, so the pool
    follows the policy as it improves (logged as `refresh_*` in metrics.jsonl)."""
    refresh_k: int = Field(default=4, ge=1)

    @model_validator(mode="after")
    def _refresh_needs_band(self) -> TaskSelection:
        if self.refresh_every is not None and self.pass_rate is None:
            raise ValueError("refresh_every re-draws a pass-rate band: give the selection a pass_rate too")
        if self.refresh_every is not None and self.dir.startswith("builtin:"):
            raise ValueError(f"refresh_every rewrites pass rates in task.toml: copy {self.dir} to a folder of "
                             "your own and point dir at it")
        return self


class EngineSettings(_Strict):
    kind: Literal["local", "remote"] = "local"
    """`local`: the embedded engine serving `model`; `remote`: vLLM/SGLang servers at `urls`."""
    urls: list[str] = Field(default_factory=list)
    dialect: Literal["vllm", "sglang"] = "vllm"
    weights_dir: str | None = None
    """Directory the engines reload weights from (default `<out_dir>/weights`)."""
    separate_process: bool = True
    """`local` only: serve the embedded engine from its own process (its own GIL and core; weights
    pushed through its vLLM-style reload route) rather than a thread of the training process."""
    max_tokens: int = 96
    temperature: float = 1.0


class TrainConfig(_Strict):
    model: str = "tiny"
    """`tiny` (the shipped warm-up model), `smollm2`, or a HF model directory."""
    engine: EngineSettings = Field(default_factory=EngineSettings)
    harness: str | dict[str, float] = "zero"
    """One harness name, or a weighted mix such as {zero: 0.5, codex: 0.5}."""
    harness_options: dict[str, dict[str, object]] = Field(default_factory=dict)
    """Constructor options per harness name, e.g. {zero: {builtins: "", max_turns: 3}}."""
    backend: Literal["local", "podman", "kubernetes"] = "local"
    tasks: TaskSelection | list[TaskSelection] = Field(default_factory=TaskSelection)
    """One selection, or several whose tasks are pooled (e.g. the Claw suite plus synthesised tasks)."""
    eval_tasks: TaskSelection | None = Field(default_factory=lambda: TaskSelection(split="test"))
    steps: int = 20
    tasks_per_step: int = 4
    group_size: int = 8
    eval_every: int = 0
    """Held-out evaluation every N steps (0: only before and after training)."""
    eval_trials: int = 1
    lr: float = 2e-4
    weight_decay: float = 0.0
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    micro_batch: int = 16
    max_grad_norm: float = 1.0
    ppo_epochs: int = Field(default=1, ge=1)
    """Optimizer steps over each step's batch, as veRL's `actor.ppo_epochs`: rollouts cost far more
    than updates here (GUI quickstart: 33 s of rollouts, 2.5 s per update), so several passes learn
    more per rollout; the clipped ratio bounds each sample's pull from the second pass on."""
    timeout_policy: Literal["drop", "zero"] = "drop"
    max_running: int = 32
    rollout_budget_s: float | None = 60.0
    call_deadline_s: float | None = None
    """Per-call engine limit; None (the default) derives it from `rollout_budget_s` (budget - margin).
    A value not shorter than the rollout budget is refused."""
    time_budget_s: float | None = None
    """Stop starting new steps after this many seconds (None: run all steps)."""
    checkpoint_every: int = 5
    step0_logprob_tol: float | None = 1e-2
    """At the first step (trainer and engine hold the same weights) the trainer's recomputed logprobs
    must match the engine's on the same tokens within this (max abs diff over trained tokens); the
    result is logged (`step0_logprob_*`) and a failure is printed. None: not checked."""
    out_dir: str = "runs/quickstart"
    seed: int = 0

    @model_validator(mode="after")
    def _nested_deadlines(self) -> TrainConfig:
        check_call_deadline(self.call_deadline_s, self.rollout_budget_s)
        return self

    @property
    def gateway_call_deadline_s(self) -> float:
        """The gateway's per-call limit: nested inside the rollout budget."""
        return call_deadline_s(self.rollout_budget_s, self.call_deadline_s)

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainConfig:
        """The config in `path`; a bad one raises `ConfigError` with one line naming every problem."""
        data = yaml.safe_load(Path(path).read_text()) or {}
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(f"{path}: {_one_line(exc)}") from None


class ConfigError(ValueError):
    """A training config that cannot run (the message is one line, for the CLI)."""


def _one_line(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts)
