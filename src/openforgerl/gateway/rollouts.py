"""Rollout bookkeeping for the gateway: open, authorize, close, reward, taint.

Rollout state lives in the call store (`put_rollout`); this module keeps only a small cache of what
the hot path needs (closed flag, next call index, policy versions seen). Per-rollout keys are
HMAC(secret, rollout_id), so any gateway replica holding the same secret can check a key without
shared state, and no key is ever written to the log.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from openforgerl.gateway.errors import GatewayError
from openforgerl.records import CallErrorKind, RolloutRecord, RolloutStatus
from openforgerl.store.base import CallStore


@dataclass
class RolloutState:
    """What the hot path keeps per rollout (everything else is in the store)."""

    rollout_id: str
    api_key: str
    closed: bool = False
    tainted: bool = False
    next_index: int = 0
    versions: set[int] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def take_index(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index


def taint_status(kind: CallErrorKind) -> RolloutStatus:
    """Which infra bucket an infra call error puts its rollout in."""
    if kind == CallErrorKind.GATEWAY_INTERNAL:
        return RolloutStatus.INFRA_GATEWAY
    return RolloutStatus.INFRA_ENGINE


class RolloutRegistry:
    """Opens rollouts and answers "may this key call this rollout, and with which index"."""

    def __init__(self, store: CallStore, secret: str | None = None) -> None:
        self.store = store
        self._secret = (secret or secrets.token_hex(32)).encode()
        self._cache: dict[str, RolloutState] = {}

    def key_for(self, rollout_id: str) -> str:
        return "ofr-" + hmac.new(self._secret, rollout_id.encode(), hashlib.sha256).hexdigest()[:40]

    async def open(self, spec: dict[str, Any]) -> tuple[RolloutRecord, str]:
        rollout_id = str(spec.get("rollout_id") or uuid.uuid4().hex)
        record = RolloutRecord(
            rollout_id=rollout_id, task_id=spec.get("task_id"), harness=spec.get("harness"),
            group_id=spec.get("group_id"), sample_index=int(spec.get("sample_index") or 0),
            metadata=dict(spec.get("metadata") or {}), started_at=time.time(),
        )
        if await self.store.get_rollout(rollout_id) is not None:
            raise GatewayError(409, f"rollout {rollout_id!r} already exists")
        await self.store.put_rollout(record)
        self._cache[rollout_id] = RolloutState(rollout_id, self.key_for(rollout_id))
        return record, self._cache[rollout_id].api_key

    async def state(self, rollout_id: str) -> RolloutState:
        """The cached state, loaded from the store on a miss (404 when unknown)."""
        state = self._cache.get(rollout_id)
        if state is not None:
            return state
        record = await self.store.get_rollout(rollout_id)
        if record is None:
            raise GatewayError(404, f"unknown rollout {rollout_id!r}", code="rollout_not_found")
        calls = await self.store.list_calls(rollout_id)
        state = RolloutState(rollout_id, self.key_for(rollout_id), closed=record.closed,
                             tainted=record.infra_tainted, next_index=len(calls),
                             versions=set(record.policy_versions))
        return self._cache.setdefault(rollout_id, state)

    async def authorize(self, rollout_id: str, key: str | None) -> RolloutState:
        """The rollout a model call may use, or a 4xx (unknown, wrong key, closed)."""
        state = await self.state(rollout_id)
        if not key or not hmac.compare_digest(key, state.api_key):
            raise GatewayError(401, "invalid API key for this rollout", code="invalid_api_key")
        if state.closed:
            raise GatewayError(403, f"rollout {rollout_id!r} is closed", code="rollout_closed")
        return state

    async def update(self, rollout_id: str, **changes: Any) -> RolloutRecord:
        """Read-modify-write of the stored rollout record (serialized per rollout)."""
        state = await self.state(rollout_id)
        async with state.lock:
            record = await self.store.get_rollout(rollout_id)
            if record is None:
                raise GatewayError(404, f"unknown rollout {rollout_id!r}")
            record = record.model_copy(update=changes)
            await self.store.put_rollout(record)
        return record

    async def close(self, rollout_id: str) -> RolloutRecord:
        state = await self.state(rollout_id)
        state.closed = True
        return await self.update(rollout_id, closed=True, finished_at=time.time())

    async def taint(self, state: RolloutState, kind: CallErrorKind) -> None:
        """Mark the rollout infra-tainted (once): it must be dropped from training, not scored 0."""
        if state.tainted:
            return
        state.tainted = True
        record = await self.store.get_rollout(state.rollout_id)
        status = record.status if record and record.status else taint_status(kind)
        await self.update(state.rollout_id, infra_tainted=True, status=status)

    async def note_version(self, state: RolloutState, version: int) -> None:
        """Remember the policy versions a rollout's calls were served by (written on change only)."""
        if version in state.versions:
            return
        state.versions.add(version)
        await self.update(state.rollout_id, policy_versions=sorted(state.versions))
