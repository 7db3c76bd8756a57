"""Admission control: pause/resume for weight sync, in-flight accounting, overload.

While paused, new calls wait (up to `pause_wait_s`) and in-flight calls drain; a call that waits
longer, or arrives when `max_in_flight` calls are running, gets 503, which every real harness
retries (never 429/400, which Codex and Claude Code treat as fatal). `resume` bumps the policy
version that is stamped on every record. One rollout's own share is checked before this gate
(`calls.serve_call`): past it the 429 is meant to end that harness, whose flood is its own doing.

Replicas sharing a PostgreSQL call log share the pause and the policy version (`follow_store`): a
pause or resume sent to any replica is committed to the log's `gateway_flow` row and announced
(NOTIFY), and every replica applies it within milliseconds (another replica paused 2.6 ms after
the pausing one answered, tests/gateway/test_replica_state.py), so one weight sync pauses the fleet. Draining
is what one process can know: `pause` waits for the calls in flight on this replica only; the others stop
admitting but finish their own, each one's `/healthz` showing its `in_flight`. A replica that
starts joins the fleet's state (paused, if the fleet is): the pause is the log's, not a process's,
and outlives a restart of every replica until a resume. `max_in_flight` stays per replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from openforgerl.gateway.errors import GatewayError
from openforgerl.store.base import FlowState

_log = logging.getLogger(__name__)


class FlowBoard(Protocol):
    """Where replicas share their pause and policy version (`store.postgres.PostgresCallStore`)."""

    def set_flow(self, paused: bool | None, policy_version: int) -> Awaitable[FlowState]: ...

    def read_flow(self) -> Awaitable[FlowState]: ...

    def watch_flow(self, callback: Callable[[FlowState | None], None]) -> None: ...


class FlowGate:
    """Counts calls in flight and holds new ones while paused."""

    def __init__(
        self, *, policy_version: int = 0, pause_wait_s: float = 30.0, max_in_flight: int = 4096
    ) -> None:
        self.policy_version = policy_version
        self.pause_wait_s = pause_wait_s
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self._running = asyncio.Event()
        self._running.set()
        self._drained = asyncio.Event()
        self._drained.set()
        self._board: FlowBoard | None = None
        self._seq = -1  # the newest shared state applied
        self._publishing: set[asyncio.Future[None]] = set()

    @property
    def shared(self) -> bool:
        """Whether pause/resume reach every replica sharing this gateway's call log."""
        return self._board is not None

    async def follow_store(self, store: object) -> None:
        """Share pause/resume and the policy version with the replicas on `store`, where it keeps them
        (PostgreSQL); on a store that does not (SQLite: one process) this gate stays its own."""
        if not all(hasattr(store, name) for name in ("set_flow", "read_flow", "watch_flow")):
            return
        board: FlowBoard = store  # type: ignore[assignment]
        loop = asyncio.get_running_loop()

        def heard(state: FlowState | None) -> None:  # on the store's listener thread
            with contextlib.suppress(RuntimeError):  # this gateway's loop has closed
                loop.call_soon_threadsafe(self._heard, state)

        self._board = board
        board.watch_flow(heard)
        state = await board.read_flow()
        if self.policy_version > state.policy_version:  # started at a newer version: the fleet takes it
            state = await board.set_flow(None, self.policy_version)
        self.apply(state)

    def _heard(self, state: FlowState | None) -> None:
        if state is not None:
            self.apply(state)
        elif self._board is not None:  # the listener reconnected: a change may have been missed
            self._track(self._board.read_flow())

    def _track(self, pending: Awaitable[FlowState]) -> None:
        async def applied() -> None:
            try:
                self.apply(await pending)
            except Exception as exc:  # no caller to answer: the other replicas keep their state
                _log.warning("the shared pause/resume state was not updated: %s", type(exc).__name__)

        task = asyncio.ensure_future(applied())
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    def apply(self, state: FlowState) -> None:
        """Take a shared state newer than the last one applied (older ones arrive late: ignored)."""
        if state.seq <= self._seq:
            return
        self._seq = state.seq
        self.policy_version = max(self.policy_version, state.policy_version)
        if state.paused:
            self._running.clear()
        else:
            self._running.set()

    @property
    def paused(self) -> bool:
        return not self._running.is_set()

    async def enter(self) -> int:
        """Admit one call; returns the policy version it will be served by."""
        if self.in_flight >= self.max_in_flight:
            raise GatewayError(503, "gateway overloaded, retry", code="overloaded")
        if not self._running.is_set():
            try:
                await asyncio.wait_for(self._running.wait(), self.pause_wait_s)
            except TimeoutError:
                raise GatewayError(503, "paused for a weight update, retry", code="paused") from None
        self.in_flight += 1
        self._drained.clear()
        return self.policy_version

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight == 0:
            self._drained.set()

    async def pause(self, drain_timeout_s: float | None = None) -> bool:
        """Stop admitting calls (on every replica, when shared) and wait for this replica's in-flight
        ones; False if the drain timed out."""
        self._running.clear()
        if self._board is not None:  # committed before the answer: a resume after it cannot be overtaken
            await self._publish(self._board.set_flow(True, self.policy_version), "paused")
        try:
            await asyncio.wait_for(self._drained.wait(), drain_timeout_s)
        except TimeoutError:
            return False
        return True

    def resume(self) -> int:
        """Admit calls again under a new policy version. When shared, the other replicas follow once
        the store commits it (queued here, in order after any earlier pause; `resume_all` awaits it)."""
        self.policy_version += 1
        self._running.set()
        if self._board is not None:
            self._track(self._board.set_flow(False, self.policy_version))
        return self.policy_version

    async def resume_all(self) -> int:
        """`resume`, answered once every replica sharing the store can see it (the admin route)."""
        self.policy_version += 1
        self._running.set()
        if self._board is not None:
            await self._publish(self._board.set_flow(False, self.policy_version), "resumed")
        return self.policy_version

    async def _publish(self, pending: Awaitable[FlowState], done: str) -> None:
        """Apply the committed shared state, or a 503 saying only this replica changed (the store gave
        up reaching the database: it retries for 30 s first)."""
        try:
            self.apply(await pending)
        except Exception as exc:
            raise GatewayError(
                503,
                f"{done} this replica only: the shared call log did not take it "
                f"({type(exc).__name__}); retry",
                code="flow_not_shared",
            ) from None
