"""A batch: one GRPO group per task, all groups concurrently, results written as they settle.

This is the orchestrator's public entry point (`run_batch`); the CLI and the trainer call it.
The harness is installed once per batch (not per rollout); a failed install fails the batch.
When a group settles, each attempt's verdict (status, reward, `in_batch`, `group_valid`) is reported
to the gateway, the record's only writer, and the records returned are the ones it stored.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from openforgerl.env.contract import TaskRuntime
from openforgerl.harness.base import HarnessAdapter
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.gateway_client import GatewayAccess, GatewayClient
from openforgerl.orchestrator.groups import GroupResult, gather_joined, run_group
from openforgerl.orchestrator.results import ResultSink
from openforgerl.orchestrator.rollout import RolloutRunner
from openforgerl.records import RolloutRecord
from openforgerl.sandbox.base import SandboxBackend

__all__ = ["BatchResult", "run_batch"]


@dataclass(frozen=True)
class BatchResult:
    groups: list[GroupResult]

    @property
    def records(self) -> list[RolloutRecord]:
        return [r for g in self.groups for r in g.records]

    def counts(self) -> Counter[str]:
        """Attempts per status, plus `in_batch` and `dropped`."""
        c: Counter[str] = Counter(str(r.status) for r in self.records)
        c["in_batch"] = sum(1 for r in self.records if r.in_batch)
        c["dropped"] = len(self.records) - c["in_batch"]
        return c


async def run_batch(
    tasks: Sequence[TaskRuntime],
    harness: HarnessAdapter,
    *,
    gateway: GatewayAccess,
    backend: SandboxBackend,
    config: OrchestratorConfig,
    sink: ResultSink | None = None,
    on_done: Callable[[RolloutRecord], None] | None = None,
) -> BatchResult:
    """Run `config.group_size` rollouts of every task with `harness`; every attempt goes to `sink`.

    `gateway`: the admin URL + token this process holds; sandbox forwarders connect to the
    gateway's model listener only (`GatewayClient.model_address`), never to the admin one."""
    await asyncio.to_thread(harness.install, config.harness_cache)
    async with GatewayClient(gateway) as client:
        runner = RolloutRunner(client, backend, config, await client.model_address(), on_done)

        async def group(task: TaskRuntime) -> GroupResult:
            result = await run_group(runner.run, task, harness, config)
            records = await gather_joined(runner.report(r) for r in result.records)
            if sink is not None:
                for record in records:
                    await sink.write(record)
            return GroupResult(result.task_id, result.group_id, records, result.valid)

        groups = await gather_joined(group(t) for t in tasks)
    return BatchResult(list(groups))
