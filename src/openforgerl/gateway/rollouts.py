"""Rollout bookkeeping for the gateway: open, authorize, close, reward, taint.

Rollout state lives in the call store (`put_rollout`); this module keeps only a small cache of what
the hot path needs (closed flag, leased call indices, deadline, policy versions seen, the calls
in flight). Per-rollout keys are HMAC(secret, rollout_id), so any gateway replica holding the same
secret can check a key without shared state, and no key is ever written to the log. A key
authorises model calls of its own rollout only (checked in constant time); admin routes take the
admin token instead (admin.py).

Call indices are leased from the store in blocks (`CallStore.lease_indices`), never counted: after
a restart, or with several gateway processes on one store, the next index is past every index
stored or handed out, so a finished call can never be overwritten.

The record has one writer, this registry: reward, outcome, close and taint are read-modify-writes
under the rollout's lock. Ending a rollout (close, outcome) cuts its calls still in flight: their
deadline guards fire, the engine request is closed, so the engine stops generating.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from openforgerl.gateway.deadlines import DeadlineGuard
from openforgerl.gateway.errors import GatewayError
from openforgerl.gateway.verbatim import EchoMemory
from openforgerl.records import CallErrorKind, RolloutOutcome, RolloutRecord, RolloutStatus
from openforgerl.store.base import CallStore

_LEASE_BLOCK = 32  # indices leased per store transaction (a rollout rarely needs a second block)
# A replica reserves a rollout's shared log bytes in chunks of 1/64 of its quota, not per call: one
# reservation costs the calling gateway 180-250 us CPU (benchmarks/log_quota_cost.py), 30-40% of a
# call's on a PostgreSQL log; a chunk makes that one call's in a rollout's first on each replica, for
# at most (replicas - 1) chunks of quota held unused by the others.
_LOG_CHUNKS = 64


@dataclass
class RolloutState:
    """What the hot path keeps per rollout (everything else is in the store)."""

    rollout_id: str
    api_key: str
    closed: bool = False
    tainted: bool = False
    deadline_at: float | None = None  # epoch seconds; engine calls end before it (minus a margin)
    next_index: int = 0
    lease_stop: int = 0  # next_index < lease_stop: an index of this process's lease
    versions: set[int] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    lease_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    inflight: set[DeadlineGuard] = field(default_factory=set)
    echo: EchoMemory = field(default_factory=EchoMemory)  # raw text of its completions (verbatim.py)
    task_id: str | None = (
        None  # handed to the engine with each call (the scripted oracle picks its task by it)
    )
    # Set once the taint is stored (or the rollout closes): wakes `GET /rollouts/{id}/taint` long-polls.
    ended_or_tainted: asyncio.Event = field(default_factory=asyncio.Event)

    # Its fair share of the gateway (calls.serve_call): model calls it has in flight, bytes it has
    # added to the call log (records and image blobs; a call's body is reserved when it arrives),
    # and whether its first refusal over that quota is recorded (later ones are not: bounded).
    calls_in_flight: int = 0
    log_bytes: int = 0
    quota_noted: bool = False
    log_allowance: int = 0  # on a shared store: bytes this replica reserved there and has not used yet

    def reserve_log(self, nbytes: int, quota: int) -> bool:
        """Reserve `nbytes` of the call log for a call; False (nothing reserved) past `quota`."""
        if self.log_bytes + nbytes > quota:
            return False
        self.log_bytes += nbytes
        return True

    def cut_inflight(self) -> None:
        """End every engine call of this rollout still running (their guards raise TimeoutError)."""
        for guard in list(self.inflight):
            guard.expire()


def _set_fields(record: RolloutRecord, changes: dict[str, Any]) -> RolloutRecord:
    """`record` with `changes`; a name that is not (yet) a RolloutRecord field goes to metadata."""
    fields = RolloutRecord.model_fields
    typed = {k: v for k, v in changes.items() if k in fields}
    extra = {k: v for k, v in changes.items() if k not in fields}
    if extra:
        typed["metadata"] = {**typed.get("metadata", record.metadata), **extra}
    return record.model_copy(update=typed)


def _stored(record: RolloutRecord, name: str) -> Any:
    """A field of `record`, or its metadata fallback (see `_set_fields`)."""
    return getattr(record, name) if name in RolloutRecord.model_fields else record.metadata.get(name)


def taint_status(kind: CallErrorKind) -> RolloutStatus:
    """Which infra bucket an infra call error puts its rollout in (the one table: records.py)."""
    return kind.rollout_status or RolloutStatus.INFRA_GATEWAY


class RolloutRegistry:
    """Opens rollouts and answers "may this key call this rollout, and with which index"."""

    def __init__(
        self, store: CallStore, secret: str | None = None, *, deadline_margin_s: float = 2.0
    ) -> None:
        self.store = store
        self.deadline_margin_s = deadline_margin_s
        self._secret = (secret or secrets.token_hex(32)).encode()
        self._cache: dict[str, RolloutState] = {}
        self._following: set[asyncio.Future[None]] = set()  # re-reads of rollouts other replicas ended
        # A rollout's call log bytes, counted by every replica where the store keeps the count (PostgreSQL)
        self._reserve_shared = getattr(store, "reserve_log_bytes", None)
        self._charge_shared = getattr(store, "charge_log_bytes", None)
        self._note_shared = getattr(store, "note_log_refusal", None)

    def key_for(self, rollout_id: str) -> str:
        return "ofr-" + hmac.new(self._secret, rollout_id.encode(), hashlib.sha256).hexdigest()[:40]

    async def open(
        self, spec: dict[str, Any], *, deadline_at: float | None = None
    ) -> tuple[RolloutRecord, str]:
        rollout_id = str(spec.get("rollout_id") or uuid.uuid4().hex)
        record = RolloutRecord(
            rollout_id=rollout_id,
            task_id=spec.get("task_id"),
            harness=spec.get("harness"),
            group_id=spec.get("group_id"),
            sample_index=int(spec.get("sample_index") or 0),
            metadata=dict(spec.get("metadata") or {}),
            started_at=time.time(),
        )
        if deadline_at is not None:
            record = _set_fields(record, {"deadline_at": deadline_at})
        if await self.store.get_rollout(rollout_id) is not None:
            raise GatewayError(409, f"rollout {rollout_id!r} already exists")
        await self.store.put_rollout(record)
        self._cache[rollout_id] = RolloutState(
            rollout_id, self.key_for(rollout_id), deadline_at=deadline_at, task_id=record.task_id
        )
        return record, self._cache[rollout_id].api_key

    async def state(self, rollout_id: str) -> RolloutState:
        """The cached state, loaded from the store on a miss (404 when unknown)."""
        state = self._cache.get(rollout_id)
        if state is not None:
            return state
        record = await self.store.get_rollout(rollout_id)
        if record is None:
            raise GatewayError(404, f"unknown rollout {rollout_id!r}", code="rollout_not_found")
        state = RolloutState(
            rollout_id,
            self.key_for(rollout_id),
            closed=record.closed,
            tainted=record.infra_tainted,
            deadline_at=_stored(record, "deadline_at"),
            versions=set(record.policy_versions),
            task_id=record.task_id,
        )
        return self._cache.setdefault(rollout_id, state)

    async def take_index(self, state: RolloutState) -> int:
        """The next call index: from this process's lease, leasing a new block when it runs out."""
        if state.next_index >= state.lease_stop:
            async with state.lease_lock:
                if state.next_index >= state.lease_stop:
                    state.next_index, state.lease_stop = await self.store.lease_indices(
                        state.rollout_id, _LEASE_BLOCK
                    )
        index = state.next_index
        state.next_index += 1
        return index

    async def authorize(self, rollout_id: str, key: str | None) -> RolloutState:
        """The rollout a model call may use, or a 4xx (unknown, wrong key, closed)."""
        state = await self.state(rollout_id)
        if not key or not hmac.compare_digest(key, state.api_key):
            raise GatewayError(401, "invalid API key for this rollout", code="invalid_api_key")
        if state.closed:
            raise GatewayError(403, f"rollout {rollout_id!r} is closed", code="rollout_closed")
        if state.deadline_at is not None and time.time() >= state.deadline_at - self.deadline_margin_s:
            raise GatewayError(403, f"rollout {rollout_id!r} is past its deadline", code="rollout_deadline")
        return state

    async def update(self, rollout_id: str, **changes: Any) -> RolloutRecord:
        """Read-modify-write of the stored rollout record (serialized per rollout)."""
        state = await self.state(rollout_id)
        async with state.lock:
            record = await self.store.get_rollout(rollout_id)
            if record is None:
                raise GatewayError(404, f"unknown rollout {rollout_id!r}")
            record = _set_fields(record, changes)
            await self.store.put_rollout(record)
        return record

    async def close(self, rollout_id: str) -> RolloutRecord:
        state = await self.state(rollout_id)
        state.closed = True
        state.cut_inflight()
        record = await self.update(rollout_id, closed=True, finished_at=time.time())
        state.ended_or_tainted.set()
        return record

    async def finish(self, rollout_id: str, outcome: RolloutOutcome) -> RolloutRecord:
        """Write the orchestrator's verdict and close the rollout. An infra taint recorded by the
        gateway wins over a scored or timed-out status: a rollout hit by an infra fault is never scored."""
        state = await self.state(rollout_id)
        state.closed = True
        state.cut_inflight()
        changes = outcome.model_dump()
        changes["finished_at"] = outcome.finished_at or time.time()
        async with state.lock:
            record = await self.store.get_rollout(rollout_id)
            if record is None:
                raise GatewayError(404, f"unknown rollout {rollout_id!r}")
            changes["metadata"] = {**record.metadata, **changes.get("metadata", {})}
            if outcome.status.is_infra:  # one flag every reader of the record can trust
                changes["infra_tainted"] = True
            # a config error (the harness's first prompt overflowed) stands: it decides the rollout
            # whatever failed after it, and a retry would fail the same way (orchestrator/classify.py)
            if record.infra_tainted and not outcome.status.is_infra and not outcome.status.is_config:
                changes["status"] = record.status or RolloutStatus.INFRA_ENGINE
                changes["in_batch"] = False
                changes["drop_reason"] = changes.get("drop_reason") or "infra fault in the call log"
            record = _set_fields(record, {**changes, "closed": True})
            await self.store.put_rollout(record)
        state.ended_or_tainted.set()
        return record

    async def taint(self, state: RolloutState, kind: CallErrorKind) -> None:
        """Mark the rollout infra-tainted (once): it must be dropped from training, not scored 0."""
        if state.tainted:
            return
        state.tainted = True
        record = await self.store.get_rollout(state.rollout_id)
        status = record.status if record and record.status else taint_status(kind)
        await self.update(state.rollout_id, infra_tainted=True, status=status)
        state.ended_or_tainted.set()  # stored first: a woken reader of the store sees it

    async def wait_taint(self, rollout_id: str, wait_s: float) -> RolloutRecord:
        """The stored record once the rollout is infra-tainted or closed, or after `wait_s` (a long-poll:
        the orchestrator ends a tainted rollout's harness at once instead of at its budget). The store is
        read at the end either way, so a taint written by another gateway process sharing the store is
        seen within one wait."""
        state = await self.state(rollout_id)
        if not (state.tainted or state.closed):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state.ended_or_tainted.wait(), wait_s)
        record = await self.store.get_rollout(rollout_id)
        if record is None:
            raise GatewayError(404, f"unknown rollout {rollout_id!r}", code="rollout_not_found")
        return record

    async def note_version(self, state: RolloutState, version: int) -> None:
        """Remember the policy versions a rollout's calls were served by (written on change only)."""
        if version in state.versions:
            return
        state.versions.add(version)
        await self.update(state.rollout_id, policy_versions=sorted(state.versions))

    async def reserve_log(self, state: RolloutState, nbytes: int, quota: int) -> bool:
        """Reserve `nbytes` of the rollout's call log quota; False (nothing reserved) past it. On a store
        the replicas share, counted across all of them (an atomic statement there: a rollout whose
        calls are spread over N replicas gets its quota once, not N times), taken in chunks
        (`_LOG_CHUNKS`); else in this process."""
        if self._reserve_shared is None:
            return state.reserve_log(nbytes, quota)
        if state.log_allowance < nbytes:
            need = nbytes - state.log_allowance
            chunk = max(need, quota // _LOG_CHUNKS)
            total = await self._reserve_shared(state.rollout_id, chunk, quota)
            if total is None and chunk > need:  # the last of the quota: exactly what this call needs
                chunk = need
                total = await self._reserve_shared(state.rollout_id, chunk, quota)
            if total is None:
                return False
            state.log_allowance += chunk
            state.log_bytes = int(total) - state.log_allowance
        state.log_allowance -= nbytes
        state.log_bytes += nbytes
        return True

    def charge_log(self, state: RolloutState, nbytes: int) -> None:
        """Charge (or, negative, give back) `nbytes` of the rollout's call log, without waiting. On a
        shared store, what this replica's allowance does not cover is added to the shared count in
        the writer's next batch (the call's own record, typically), so every replica sees it."""
        state.log_bytes += nbytes
        if self._charge_shared is None:
            return
        state.log_allowance -= nbytes
        if state.log_allowance < 0:
            self._charge_shared(state.rollout_id, -state.log_allowance)
            state.log_allowance = 0

    async def first_log_refusal(self, state: RolloutState) -> bool:
        """Whether this is the rollout's first refusal over its quota (on any replica sharing the
        store): that one is recorded, later ones are not."""
        if self._note_shared is None:
            first = not state.quota_noted
            state.quota_noted = True
            return first
        total = await self._note_shared(state.rollout_id)
        if total is None:
            return False
        state.log_bytes = int(total)
        return True

    def follow_store(self) -> None:
        """Follow the other gateway replicas sharing this store, where the store announces ended
        rollouts (PostgreSQL: `watch_rollouts`): a close or an infra taint that another replica
        stored reaches this replica's cached state, which then cuts the rollout's calls in flight
        here and refuses new ones, as the replica that closed it does. Without it a replica would
        serve a rollout closed elsewhere until its calls end (measured in
        tests/gateway/test_gateway_replicas.py)."""
        watch = getattr(self.store, "watch_rollouts", None)
        if watch is None:
            return
        loop = asyncio.get_running_loop()

        def announced(rollout_id: str | None) -> None:  # on the store's listener thread
            with contextlib.suppress(RuntimeError):  # this gateway's loop has closed
                loop.call_soon_threadsafe(self._spawn_follow, rollout_id)

        watch(announced)

    def _spawn_follow(self, rollout_id: str | None) -> None:
        """Re-read the announced rollout, or (None: announcements may have been missed) every open one."""
        ids = [rollout_id] if rollout_id is not None else [r for r, s in self._cache.items() if not s.closed]
        for rid in ids:
            if rid in self._cache:
                task = asyncio.ensure_future(self._follow(rid))
                self._following.add(task)
                task.add_done_callback(self._following.discard)

    async def _follow(self, rollout_id: str) -> None:
        state = self._cache.get(rollout_id)
        if state is None or state.closed:
            return
        record = await self.store.get_rollout(rollout_id)
        if record is None:
            return
        if record.infra_tainted and not state.tainted:
            state.tainted = True
            state.ended_or_tainted.set()
        if record.closed and not state.closed:
            state.closed = True
            state.cut_inflight()
            state.ended_or_tainted.set()
