"""Client of the gateway's admin API (docs/gateway-api.md).

The orchestrator talks to the gateway only over HTTP, so the gateway may be in-process, another
process, or several replicas behind one URL. It holds a `GatewayAccess`: the admin listener's URL
and bearer token (never given to a sandbox) and the model listener's URL, the only address a
sandbox's forwarder connects to (`model_address`; asked of the admin plane when not given).
Transient failures (connection errors, 5xx) are retried a few times with backoff; what still fails raises
`GatewayClientError`, which the rollout turns into `infra_error:gateway` at its boundary.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from openforgerl.gateway.access import GatewayAccess
from openforgerl.records import CallRecord, RolloutOutcome, RolloutRecord

__all__ = ["GatewayAccess", "GatewayClient", "GatewayClientError", "OpenedRollout"]


class GatewayClientError(Exception):
    """The admin API failed (after retries) or answered something unusable."""


@dataclass(frozen=True)
class OpenedRollout:
    rollout_id: str
    api_key: str
    openai_base_url: str
    anthropic_base_url: str


class GatewayClient:
    """`async with GatewayClient(access) as gw:`; one aiohttp session for all rollouts."""

    def __init__(self, access: GatewayAccess, *, attempts: int = 4, timeout_s: float = 60.0) -> None:
        if not isinstance(access, GatewayAccess):
            raise TypeError("GatewayClient needs a GatewayAccess (admin URL + admin token), not a URL")
        self.access = access
        self.base_url = access.admin_url.rstrip("/")
        self.attempts = attempts
        self._headers = {"Authorization": f"Bearer {access.admin_token}"}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._watch_session: aiohttp.ClientSession | None = None  # long-polls: never in the main pool
        self._model_url = access.model_url

    async def __aenter__(self) -> GatewayClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            conn = aiohttp.TCPConnector(limit=256)
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, connector=conn, headers=self._headers
            )
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

    async def model_url(self) -> str:
        """The model listener's root URL (from the access, else the admin plane's /healthz)."""
        if self._model_url is None:
            data = await self._request("GET", "/healthz")
            if not isinstance(data, dict) or not isinstance(data.get("model_url"), str):
                raise GatewayClientError(f"GET /healthz: no model_url in {data!r}")
            self._model_url = data["model_url"]
        return self._model_url

    async def model_address(self) -> tuple[str, int]:
        """host:port of the model listener: what a sandbox forwarder may connect to, nothing else."""
        parts = urlsplit(await self.model_url())
        return parts.hostname or "127.0.0.1", parts.port or (443 if parts.scheme == "https" else 80)

    async def open_rollout(
        self,
        *,
        task_id: str | None = None,
        harness: str | None = None,
        group_id: str | None = None,
        sample_index: int = 0,
        metadata: dict[str, Any] | None = None,
        rollout_id: str | None = None,
        deadline_at: float | None = None,
        budget_s: float | None = None,
    ) -> OpenedRollout:
        """Open a rollout; `deadline_at` (epoch s) / `budget_s` bound its engine calls."""
        body: dict[str, Any] = {
            "task_id": task_id,
            "harness": harness,
            "group_id": group_id,
            "sample_index": sample_index,
            "metadata": metadata or {},
        }
        extra = {"rollout_id": rollout_id, "deadline_at": deadline_at, "budget_s": budget_s}
        body.update({k: v for k, v in extra.items() if v is not None})
        data = await self._request("POST", "/rollouts", body)
        try:
            return OpenedRollout(
                data["rollout_id"], data["api_key"], data["openai_base_url"], data["anthropic_base_url"]
            )
        except (KeyError, TypeError) as e:
            raise GatewayClientError(f"POST /rollouts: unexpected answer {data!r}") from e

    async def get_rollout(self, rollout_id: str) -> dict[str, Any]:
        return dict(await self._request("GET", f"/rollouts/{rollout_id}"))

    async def list_calls(self, rollout_id: str) -> list[CallRecord]:
        data = await self._request("GET", f"/rollouts/{rollout_id}/calls")
        items = data.get("calls", []) if isinstance(data, dict) else data
        return [CallRecord.model_validate(c) for c in items]

    async def set_reward(
        self, rollout_id: str, reward: float, components: dict[str, float] | None = None
    ) -> None:
        await self._request(
            "POST", f"/rollouts/{rollout_id}/reward", {"reward": reward, "components": components or {}}
        )

    async def report_outcome(self, rollout_id: str, outcome: RolloutOutcome) -> RolloutRecord:
        """The orchestrator's verdict, written by the gateway under the rollout's lock; the record."""
        data = await self._request("POST", f"/rollouts/{rollout_id}/outcome", outcome.model_dump(mode="json"))
        try:
            return RolloutRecord.model_validate(data)
        except ValueError as e:
            raise GatewayClientError(f"POST /rollouts/{rollout_id}/outcome: unexpected answer") from e

    async def pause(self, timeout_s: float | None = None) -> dict[str, Any]:
        query = "" if timeout_s is None else f"?timeout={timeout_s}"
        return dict(await self._request("POST", "/admin/pause" + query))

    async def resume(self) -> int:
        return int((await self._request("POST", "/admin/resume"))["policy_version"])

    async def wait_taint(self, rollout_id: str, wait_s: float) -> dict[str, Any]:
        """The rollout's record once the gateway has tainted or closed it, or after `wait_s` (a long-poll,
        one try). Its own session without a connection cap: one is held per running rollout, and the
        main pool (256) must stay free for call logs and outcomes."""
        if self._watch_session is None:
            self._watch_session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None),
                connector=aiohttp.TCPConnector(limit=0),
                headers=self._headers,
            )
        path = f"/rollouts/{rollout_id}/taint?wait_s={wait_s:g}"
        timeout = aiohttp.ClientTimeout(total=wait_s + 30.0)
        async with self._watch_session.get(self.base_url + path, timeout=timeout) as resp:
            if resp.status >= 500:
                raise GatewayClientError(f"GET {path}: HTTP {resp.status}")
            return dict(await _json_or_raise(resp))

    async def close_rollout(self, rollout_id: str) -> None:
        await self._request("POST", f"/rollouts/{rollout_id}/close", {})

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._watch_session is not None:
            await self._watch_session.close()
            self._watch_session = None


async def _json_or_raise(resp: aiohttp.ClientResponse) -> Any:
    if resp.status >= 400:
        text = (await resp.text())[:500]
        raise GatewayClientError(f"{resp.method} {resp.url.path}: HTTP {resp.status}: {text}")
    return await resp.json(content_type=None)
