"""Admission control: pause/resume for weight sync, in-flight accounting, overload.

While paused, new calls wait (up to `pause_wait_s`) and in-flight calls drain; a call that waits
longer, or arrives when `max_in_flight` calls are running, gets 503, which every real harness
retries (never 429/400, which Codex and Claude Code treat as fatal). `resume` bumps the policy
version that is stamped on every record. One rollout's own share is checked before this gate
(`calls.serve_call`): past it the 429 is meant to end that harness, whose flood is its own doing.
"""

from __future__ import annotations

import asyncio

from openforgerl.gateway.errors import GatewayError


class FlowGate:
    """Counts calls in flight and holds new ones while paused."""

    def __init__(self, *, policy_version: int = 0, pause_wait_s: float = 30.0,
                 max_in_flight: int = 4096) -> None:
        self.policy_version = policy_version
        self.pause_wait_s = pause_wait_s
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self._running = asyncio.Event()
        self._running.set()
        self._drained = asyncio.Event()
        self._drained.set()

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
        """Stop admitting calls and wait for in-flight ones; False if the drain timed out."""
        self._running.clear()
        try:
            await asyncio.wait_for(self._drained.wait(), drain_timeout_s)
        except TimeoutError:
            return False
        return True

    def resume(self) -> int:
        """Admit calls again under a new policy version."""
        self.policy_version += 1
        self._running.set()
        return self.policy_version
