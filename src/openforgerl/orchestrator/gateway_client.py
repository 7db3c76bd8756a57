"""Client of the gateway's admin API (DESIGN.md, "Gateway admin API").

The orchestrator talks to the gateway only over HTTP, so the gateway may be in-process, another
process, or several replicas behind one URL. Transient failures (connection errors, 5xx) are
retried a few times with backoff; what still fails raises `GatewayClientError`, which the rollout
turns into `infra_error:gateway` at its boundary.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import aiohttp

from openforgerl.records import CallRecord

__all__ = ["GatewayClient", "GatewayClientError", "OpenedRollout"]


class GatewayClientError(Exception):
    """The admin API failed (after retries) or answered something unusable."""


@dataclass(frozen=True)
class OpenedRollout:
    rollout_id: str
    api_key: str
    openai_base_url: str
    anthropic_base_url: str


class GatewayClient:
    """`async with GatewayClient(url) as gw:`; one aiohttp session for all rollouts."""

    def __init__(self, base_url: str, *, attempts: int = 4, timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.attempts = attempts
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> GatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            conn = aiohttp.TCPConnector(limit=256)
            self._session = aiohttp.ClientSession(timeout=self._timeout, connector=conn)
        return self._session

    async def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        last: Exception | None = None
        for attempt in range(self.attempts):
            try:
                async with self._http().request(method, self.base_url + path, json=body) as resp:
                    if resp.status < 500:
                        return await _json_or_raise(resp)
                    last = GatewayClientError(f"{method} {path}: HTTP {resp.status}")
            except (aiohttp.ClientError, TimeoutError) as e:
                last = e
            await asyncio.sleep(0.2 * 2**attempt)
        raise GatewayClientError(f"{method} {path} failed: {last}") from last

    async def open_rollout(self, *, task_id: str | None = None, harness: str | None = None,
                           group_id: str | None = None, sample_index: int = 0,
                           metadata: dict[str, Any] | None = None) -> OpenedRollout:
        body = {"task_id": task_id, "harness": harness, "group_id": group_id,
                "sample_index": sample_index, "metadata": metadata or {}}
        data = await self._request("POST", "/rollouts", body)
        try:
            return OpenedRollout(data["rollout_id"], data["api_key"], data["openai_base_url"],
                                 data["anthropic_base_url"])
        except (KeyError, TypeError) as e:
            raise GatewayClientError(f"POST /rollouts: unexpected answer {data!r}") from e

    async def get_rollout(self, rollout_id: str) -> dict[str, Any]:
        return dict(await self._request("GET", f"/rollouts/{rollout_id}"))

    async def list_calls(self, rollout_id: str) -> list[CallRecord]:
        data = await self._request("GET", f"/rollouts/{rollout_id}/calls")
        items = data.get("calls", []) if isinstance(data, dict) else data
        return [CallRecord.model_validate(c) for c in items]

    async def set_reward(self, rollout_id: str, reward: float,
                         components: dict[str, float] | None = None) -> None:
        await self._request("POST", f"/rollouts/{rollout_id}/reward",
                            {"reward": reward, "components": components or {}})

    async def close_rollout(self, rollout_id: str) -> None:
        await self._request("POST", f"/rollouts/{rollout_id}/close", {})

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def _json_or_raise(resp: aiohttp.ClientResponse) -> Any:
    if resp.status >= 400:
        text = (await resp.text())[:500]
        raise GatewayClientError(f"{resp.method} {resp.url.path}: HTTP {resp.status}: {text}")
    return await resp.json(content_type=None)
