"""GRPO groups: n rollouts per task, refilled after infra faults, filtered by policy.

Policy (an infra fault is never the model's failure):
- an infra-failed rollout is dropped from the batch and from its group's statistics, and its slot is
  retried (a fresh rollout) while the group's retry budget lasts;
- a timed-out rollout is dropped (`timeout_policy="drop"`, the default) or kept with reward 0
  (`"zero"`); timeouts are not retried (retrying them would bias the group toward easy runs);
- a group with fewer than `min_group_size` kept rollouts is dropped whole.

Every attempt is returned (and reported to the gateway, the record's only writer), with the typed
verdict `in_batch`, `drop_reason` (when dropped) and `group_valid`. What becomes training data is then
decided by `trajectory.trainable` from exactly these fields.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from openforgerl.env.contract import TaskRuntime
from openforgerl.harness.base import HarnessAdapter
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.rollout import RolloutRequest
from openforgerl.records import RolloutRecord, RolloutStatus

__all__ = ["GroupResult", "apply_group_policy", "gather_joined", "run_group"]

T = TypeVar("T")

RunFn = Callable[[RolloutRequest], Awaitable[RolloutRecord]]


@dataclass(frozen=True)
class GroupResult:
    task_id: str
    group_id: str
    records: list[RolloutRecord]  # every attempt, in slot then attempt order
    valid: bool

    @property
    def kept(self) -> list[RolloutRecord]:
        return [r for r in self.records if r.in_batch]


def _mark(
    record: RolloutRecord, in_batch: bool, reason: str | None = None, **changes: object
) -> RolloutRecord:
    return record.model_copy(update={"in_batch": in_batch, "drop_reason": reason, **changes})


def _judge_one(record: RolloutRecord, config: OrchestratorConfig) -> RolloutRecord:
    if record.status is None or record.status.is_infra:
        return _mark(record, False, "infra")
    if record.status.is_config:  # a setup error: never trained (and never retried, see run_group)
        return _mark(record, False, record.status.value)
    if record.status is RolloutStatus.TIMEOUT:
        if config.timeout_policy == "zero":
            return _mark(record, True, reward=0.0)
        return _mark(record, False, "timeout")
    return _mark(record, True)


def apply_group_policy(
    records: Sequence[RolloutRecord], config: OrchestratorConfig
) -> tuple[list[RolloutRecord], bool]:
    """Mark each record in/out of the batch; (records, group_valid). Pure."""
    judged = [_judge_one(r, config) for r in records]
    kept = sum(1 for r in judged if r.in_batch)
    if kept >= config.min_group_size:
        return [r.model_copy(update={"group_valid": True}) for r in judged], True
    reason = f"group_below_min_size({kept}<{config.min_group_size})"
    return [_mark(r, False, r.drop_reason or reason, group_valid=False) for r in judged], False


async def run_group(
    run: RunFn,
    task: TaskRuntime,
    harness: HarnessAdapter,
    config: OrchestratorConfig,
    group_id: str | None = None,
) -> GroupResult:
    """Run `config.group_size` slots concurrently; refill infra failures from a shared retry budget."""
    gid = group_id or f"{task.task_id}-{uuid.uuid4().hex[:8]}"
    budget = [config.retry_budget]

    async def slot(index: int) -> list[RolloutRecord]:
        attempts: list[RolloutRecord] = []
        while True:
            rec = await run(RolloutRequest(task, harness, gid, index, len(attempts)))
            attempts.append(rec)
            if rec.status is None or not rec.status.is_infra or budget[0] <= 0:
                return attempts
            budget[0] -= 1

    per_slot = await gather_joined(slot(i) for i in range(config.group_size))
    records, valid = apply_group_policy([r for s in per_slot for r in s], config)
    return GroupResult(task.task_id, gid, records, valid)


async def gather_joined(coros: Iterable[Awaitable[T]]) -> list[T]:
    """`asyncio.gather`, except that nothing outlives it: when it is cancelled (Ctrl-C, SIGTERM) or one
    awaitable raises, the others are cancelled and waited for before it re-raises.

    `gather` re-raises at the first cancelled child while the others still run: a rollout still tearing
    down (closing its sandbox, then its gateway rollout) then ran after the batch had closed its gateway
    client, opened a new HTTP session on it and left it unclosed."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        pending = [t for t in tasks if not t.done()]
        for t in pending:
            if not t.cancelling():  # cancelled once already: a second cancel would cut its teardown short
                t.cancel()
        if pending:
            await asyncio.wait(pending)
