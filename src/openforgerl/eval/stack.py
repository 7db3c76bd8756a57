"""The embedded default stack for `eval` and `rollout` when no `--gateway` (and no scripted oracle) is
given: the local engine serving `--engine MODEL_OR_DIR` (default `tiny`) behind an in-process gateway
recording into `<out>/calls.db`, and the sandbox backend. The wiring is `train.stack.open_stack`'s
(the same engine process, call-deadline nesting and close order as training), called, not copied.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_ENGINE", "EmbeddedStack", "open_embedded"]

DEFAULT_ENGINE = "tiny"


@dataclass
class EmbeddedStack:
    access: Any  # openforgerl.gateway.access.GatewayAccess
    backend: Any  # a SandboxBackend
    engine_url: str


@contextlib.asynccontextmanager
async def open_embedded(model: str, tasks: Path, out: Path, *, budget_s: float | None = None,
                        backend: str = "local") -> AsyncIterator[EmbeddedStack]:
    """Engine + gateway + backend from `train.stack.open_stack`; `tasks` is only checked to be non-empty
    there (the caller picks the runtimes to run)."""
    from pydantic import ValidationError

    from openforgerl.engines.local.model import resolve_model_path
    from openforgerl.errors import UserError
    from openforgerl.sandbox.registry import BACKENDS
    from openforgerl.train.config import TaskSelection, TrainConfig
    from openforgerl.train.stack import open_stack

    if backend not in BACKENDS:  # before the config: its message would name the wrong flag
        raise UserError(f"unknown backend {backend!r} ({' | '.join(BACKENDS)})")
    try:
        resolve_model_path(model)
    except FileNotFoundError as exc:
        raise UserError(f"--engine {model}: {exc}") from None
    try:
        config = TrainConfig(model=model, tasks=TaskSelection(dir=str(tasks), split=None), eval_tasks=None,
                             backend=backend, rollout_budget_s=budget_s)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise UserError(f"--engine {model}: {exc.errors()[0].get('msg', exc)}") from None
    async with open_stack(config, out) as stack:
        yield EmbeddedStack(stack.gateway.access, stack.backend, stack.engine_url)
