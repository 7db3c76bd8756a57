"""The train stage's settings: which tasks a run trains and evaluates on (`TaskSelection`), the built-in
GRPO trainer (`TrainSettings`) and its held-out evaluation (`EvalSettings`).

They are sections of the one configuration schema (`openforgerl.config.Config`: `tasks`, `train`,
`eval`) and live here, with the stage that reads them, so the trainer takes them as arguments and never
imports the schema or the composition root that build them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from openforgerl.train.update import UpdateSettings

__all__ = ["EvalSettings", "TaskSelection", "TrainSettings"]


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
    these two numbers, e.g. [0, 1]: the tasks where GRPO groups have signal. Uncalibrated tasks are
    dropped."""
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
            raise ValueError(
                f"refresh_every rewrites pass rates in task.toml: copy {self.dir} to a folder of "
                "your own and point dir at it"
            )
        return self


class TrainSettings(_Strict):
    """The built-in GRPO trainer."""

    steps: int = 20
    tasks_per_step: int = 4
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
    time_budget_s: float | None = None
    """Stop starting new steps after this many seconds (None: run all steps)."""
    checkpoint_every: int = 5
    step0_logprob_tol: float | None = 1e-2
    """At the first step (trainer and engine hold the same weights) the trainer's recomputed logprobs
    must match the engine's on the same tokens within this (max abs diff over trained tokens); the
    result is logged (`step0_logprob_*`) and a failure is printed. None: not checked."""

    def update_settings(self) -> UpdateSettings:
        from openforgerl.train.update import UpdateSettings

        return UpdateSettings(
            self.clip_low, self.clip_high, self.kl_coef, self.micro_batch, self.max_grad_norm, self.ppo_epochs
        )


class EvalSettings(_Strict):
    """Held-out evaluation: `openforgerl eval`, and `train`'s before/after/every-N evaluations."""

    tasks: TaskSelection | None = Field(default_factory=lambda: TaskSelection(split="test"))
    """`train`'s held-out tasks (None: no evaluation); `openforgerl eval` takes `--tasks DIR` instead."""
    group_size: int = Field(default=3, ge=1)
    """k: rollouts per task and harness (`eval --group-size`, alias `--trials`)."""
    every: int = 0
    """`train`: held-out evaluation every N steps (0: only before and after training)."""
    train_group_size: int = Field(default=0, ge=0)
    """`train`: also evaluate the *train* tasks before and after training, this many rollouts per task
    (0: not): the warm-up policy against the trained one on what it trained on, each measured on its own
    (`train_pass1` in metrics.jsonl), where the per-step reward mixes policies and is 16 rollouts a point."""
    threshold: float | None = None
    """Success = reward >= threshold (None: each benchmark's own)."""
