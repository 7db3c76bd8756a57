"""Prove every task is well posed: doing nothing scores 0 and the oracle scores 1, in real sandboxes.

One sandbox per task (the no-op verdict is taken first, on the untouched world, then the oracle runs
in the same sandbox and is judged again), tasks run concurrently under a semaphore.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from openforgerl.env.contract import SERVICE_ENV
from openforgerl.sandbox.base import SandboxBackend, SandboxSpec

__all__ = ["ValidationResult", "validate_tasks"]


@dataclass(frozen=True)
class ValidationResult:
    task_id: str
    noop_reward: float | None
    oracle_reward: float | None
    seconds: float
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and self.noop_reward == 0.0 and self.oracle_reward == 1.0


async def validate_one(runtime: Any, backend: SandboxBackend, attempts: int = 3) -> ValidationResult:
    """A failure is retried (up to `attempts` in all): a genuine task bug fails every time, while a
    sandbox hiccup under heavy load (seen: bwrap mount races) does not."""
    result = await _attempt(runtime, backend)
    for _ in range(attempts - 1):
        if result.ok:
            break
        result = await _attempt(runtime, backend)
    return result


async def _attempt(runtime: Any, backend: SandboxBackend) -> ValidationResult:
    t0 = time.monotonic()
    sandbox = await backend.open_sandbox(
        SandboxSpec(rollout_id=f"validate-{runtime.task.root.name}", files=runtime.files(), lifetime_s=600)
    )
    noop = oracle = None
    try:
        argv = runtime.service_argv()
        if argv:
            await sandbox.spawn(argv, env=SERVICE_ENV)
            await runtime.service_started(sandbox)
        noop = (await runtime.verify(sandbox))[0]
        error = await runtime.run_oracle(sandbox)
        oracle = (await runtime.verify(sandbox))[0]
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        await sandbox.aclose()
    return ValidationResult(runtime.task_id, noop, oracle, time.monotonic() - t0, error)


async def validate_tasks(
    runtimes: Sequence[Any], backend: SandboxBackend | None = None, concurrency: int = 8
) -> list[ValidationResult]:
    """Validate every runtime (a local bubblewrap backend is opened when none is given)."""
    own = backend is None
    if backend is None:
        from openforgerl.sandbox.local import LocalBackend

        backend = LocalBackend()
    gate = asyncio.Semaphore(concurrency)

    async def one(rt: Any) -> ValidationResult:
        async with gate:
            return await validate_one(rt, backend)

    try:
        return list(await asyncio.gather(*(one(rt) for rt in runtimes)))
    finally:
        if own:
            await backend.aclose()
