"""Boot-rate control: at most N Pods booting at once, and at most R creations per second.

A burst of hundreds of Pod creations is what gets an API server to answer 429 and a node's
image puller to stall; the semaphore caps work in flight, the token bucket caps the rate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager


class TokenBucket:
    """`rate` tokens per second, at most `burst` saved up; `take()` waits for one."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self._clock = rate, max(1, burst), clock
        self._tokens, self._last = float(self.burst), clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    async def take(self) -> None:
        async with self._lock:  # FIFO: waiters are served in order
            self._refill()
            while self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.rate)
                self._refill()
            self._tokens -= 1


class BootGate:
    """Semaphore + token bucket; tracks the peak number of concurrent boots (for tests/metrics)."""

    def __init__(self, max_concurrent: int, rate: float, burst: int) -> None:
        self._sem = asyncio.Semaphore(max_concurrent)
        self._bucket = TokenBucket(rate, burst)
        self.in_flight = 0
        self.peak = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._sem:
            await self._bucket.take()
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1
