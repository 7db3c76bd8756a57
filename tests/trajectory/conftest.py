"""Fixtures for reconstruction on real gateway traffic: gateway on loopback + scripted engine + call log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from openforgerl.records import CallRecord, RolloutRecord
from openforgerl.store.sqlite import SQLiteCallStore


@dataclass
class Traffic:
    """A running gateway whose call log tests reconstruct."""

    gateway: Any
    store: SQLiteCallStore

    async def open(self, **spec: Any) -> dict[str, str]:
        return await self.gateway.open_rollout(**spec)

    async def finish(self, rollout_id: str, reward: float) -> tuple[list[CallRecord], RolloutRecord]:
        """Report the verdict (kept, in a valid group) through the admin API, then read the log back."""
        outcome = {"status": "ok", "reward": reward, "in_batch": True, "group_valid": True}
        async with aiohttp.ClientSession(headers=self.gateway.admin_headers()) as http:
            async with http.post(
                f"{self.gateway.admin_url}/rollouts/{rollout_id}/outcome", json=outcome
            ) as r:
                assert r.status == 200, await r.text()
        rollout = await self.store.get_rollout(rollout_id)
        assert rollout is not None
        return await self.store.list_calls(rollout_id), rollout


@pytest.fixture
async def traffic(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    pytest.importorskip("openforgerl.gateway.server")
    from openforgerl.engines.scripted import ScriptedEngine
    from openforgerl.gateway.server import start_gateway

    store = SQLiteCallStore(tmp_path / "calls.db")
    gateways: list[Any] = []

    async def make(policy: Callable[..., str]) -> Traffic:
        gw = await start_gateway(ScriptedEngine(policy), store)
        gateways.append(gw)
        return Traffic(gw, store)

    yield make
    for gw in gateways:
        await gw.aclose()
    await store.aclose()
