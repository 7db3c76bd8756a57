"""A batch: one GRPO group per task, all groups concurrently, results written as they settle.

This is the orchestrator's public entry point (`run_batch`); the CLI and the trainer call it.
The harness is installed once per batch (not per rollout); a failed install fails the batch.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from openforgerl.harness.base import HarnessAdapter
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.gateway_client import GatewayClient
from openforgerl.orchestrator.groups import GroupResult, run_group
from openforgerl.orchestrator.results import ResultSink
from openforgerl.orchestrator.rollout import RolloutRunner
from openforgerl.orchestrator.task_protocol import TaskRuntime
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
        c["in_batch"] = sum(1 for r in self.records if r.metadata.get("in_batch"))
        c["dropped"] = len(self.records) - c["in_batch"]
        return c


def gateway_address(gateway_url: str) -> tuple[str, int]:
    """host:port the sandbox forwarders connect to (the gateway as seen from this host)."""
    parts = urlsplit(gateway_url)
    return parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)


async def run_batch(tasks: Sequence[TaskRuntime], harness: HarnessAdapter, *, gateway_url: str,
                    backend: SandboxBackend, config: OrchestratorConfig,
                    sink: ResultSink | None = None,
                    on_done: Callable[[RolloutRecord], None] | None = None) -> BatchResult:
    """Run `config.n` rollouts of every task with `harness`; every attempt goes to `sink`."""
    await asyncio.to_thread(harness.install, config.harness_cache)
    async with GatewayClient(gateway_url) as gateway:
        runner = RolloutRunner(gateway, backend, config, gateway_address(gateway_url), on_done)

        async def group(task: TaskRuntime) -> GroupResult:
            result = await run_group(runner.run, task, harness, config)
            if sink is not None:
                records = [await sink.write(r) for r in result.records]
                result = GroupResult(result.task_id, result.group_id, records, result.valid)
            return result

        groups = await asyncio.gather(*(group(t) for t in tasks))
    return BatchResult(list(groups))
