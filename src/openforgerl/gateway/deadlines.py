"""Per-call upstream deadlines, enforced by one periodic sweep instead of a timer per call.

`asyncio.timeout_at` schedules and cancels a timer handle for every call (twice per stream), which
measured about 20 us per call inside the gateway; deadlines here are minutes long and need no
sub-second precision. A call registers its task and deadline on entry; a sweep every
`period_s` cancels the tasks past their deadline, and the guard turns that cancellation into
`TimeoutError` on exit, exactly as `asyncio.timeout` does (other cancellations pass through).
"""

from __future__ import annotations

import asyncio
from types import TracebackType


class DeadlineWatch:
    """Deadlines of the calls in flight on one event loop."""

    def __init__(self, period_s: float = 0.25) -> None:
        self.period_s = period_s
        self._guards: dict[DeadlineGuard, None] = {}  # insertion-ordered set
        self._sweeper: asyncio.TimerHandle | None = None

    def guard(self, deadline: float | None) -> DeadlineGuard:
        """`with watch.guard(loop_time_deadline):` around one awaited engine step."""
        return DeadlineGuard(self, deadline)

    def _add(self, guard: DeadlineGuard) -> None:
        self._guards[guard] = None
        if self._sweeper is None:
            loop = asyncio.get_running_loop()
            self._sweeper = loop.call_at(loop.time() + self.period_s, self._sweep)

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for guard in [g for g in self._guards if g.deadline is not None and g.deadline <= now]:
            del self._guards[guard]
            guard.expire()
        self._sweeper = loop.call_at(now + self.period_s, self._sweep) if self._guards else None


class DeadlineGuard:
    """One call's deadline (a context manager; `deadline` is in `loop.time()` seconds)."""

    __slots__ = ("_cancelling", "_expired", "_task", "_watch", "deadline")

    def __init__(self, watch: DeadlineWatch, deadline: float | None) -> None:
        self._watch = watch
        self.deadline = deadline
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False

    def __enter__(self) -> DeadlineGuard:
        if self.deadline is not None:
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("a deadline guard needs a running task")
            self._task, self._cancelling = task, task.cancelling()
            if self.deadline <= asyncio.get_running_loop().time():
                self.expire()
            else:
                self._watch._add(self)
        return self

    def expire(self) -> None:
        if self._task is not None and not self._expired:
            self._expired = True
            self._task.cancel()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._watch._guards.pop(self, None)
        if (
            self._expired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError("deadline exceeded") from exc
