"""Per-call upstream deadlines and stall checks, enforced by one periodic sweep instead of a timer per call.

`asyncio.timeout_at` schedules and cancels a timer handle for every call (twice per stream), which
measured about 20 us per call inside the gateway; deadlines here are minutes long and need no
sub-second precision. A call registers its task and deadline on entry; a sweep every
`period_s` cancels the tasks past their deadline, and the guard turns that cancellation into
`TimeoutError` on exit, exactly as `asyncio.timeout` does (other cancellations pass through).

Why a guard fired is kept on it (`reason`), because it decides whose the outcome is:
- "rollout": the rollout's own deadline (minus the margin) came while the call ran: a `timeout`;
- "limit": the per-call limit came first: the gateway then probes the engine: healthy, it was
  answering what the client asked for (a long answer, the client's); failing, it is hung (infra);
- "stall": no progress (no byte) for the stall window, and the engine then failed its health
  probe: a hung engine, infra. A healthy engine that is merely slow (a long non-streamed answer, a
  queue) is never cut for it: the probe, not the agent's request, is the evidence;
- "cut": the rollout ended from outside (`cut_inflight`).
Progress is one attribute write per engine chunk (`moved`); the sweep reads it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import TracebackType

Probe = Callable[[], Awaitable[bool]]  # True: the engine serving the call answered its health probe


class DeadlineWatch:
    """Deadlines and stall windows of the calls in flight on one event loop."""

    def __init__(self, period_s: float = 0.25) -> None:
        self.period_s = period_s
        self._guards: dict[DeadlineGuard, None] = {}  # insertion-ordered set
        self._sweeper: asyncio.TimerHandle | None = None

    def guard(
        self,
        deadline: float | None,
        *,
        rollout_cut: bool = False,
        stall_s: float | None = None,
        probe: Probe | None = None,
    ) -> DeadlineGuard:
        """`with watch.guard(loop_time_deadline):` around one awaited engine step. `rollout_cut`: the
        deadline is the rollout's own; `stall_s` and `probe`: check the engine once no byte came for
        `stall_s` seconds, and cut the call only when the probe fails."""
        return DeadlineGuard(self, deadline, rollout_cut, stall_s, probe)

    def _add(self, guard: DeadlineGuard) -> None:
        self._guards[guard] = None
        if self._sweeper is None:
            loop = asyncio.get_running_loop()
            self._sweeper = loop.call_at(loop.time() + self.period_s, self._sweep)

    def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for guard in list(self._guards):
            if guard.deadline is not None and guard.deadline <= now:
                del self._guards[guard]
                guard.at_deadline(loop)
            elif guard.stall_s is not None:
                guard.check_stall(now, loop)
        self._sweeper = loop.call_at(now + self.period_s, self._sweep) if self._guards else None


class DeadlineGuard:
    """One call's deadline (a context manager; `deadline` is in `loop.time()` seconds)."""

    __slots__ = (
        "_cancelling",
        "_exited",
        "_expired",
        "_probing",
        "_quiet_since",
        "_task",
        "_watch",
        "deadline",
        "moved",
        "probe",
        "reason",
        "rollout_cut",
        "stall_s",
    )

    def __init__(
        self,
        watch: DeadlineWatch,
        deadline: float | None,
        rollout_cut: bool = False,
        stall_s: float | None = None,
        probe: Probe | None = None,
    ) -> None:
        self._watch = watch
        self.deadline = deadline
        self.rollout_cut = rollout_cut
        self.stall_s = stall_s if probe is not None else None
        self.probe = probe
        self.reason = ""
        self.moved = False  # set by the caller on every engine chunk (one attribute write)
        self._quiet_since = 0.0  # progress, or a passed health probe, restarts the stall window
        self._probing: asyncio.Task[None] | None = None
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False
        self._exited = False

    def __enter__(self) -> DeadlineGuard:
        if self.deadline is not None or self.stall_s is not None:
            task = asyncio.current_task()
            if task is None:
                raise RuntimeError("a deadline guard needs a running task")
            self._task, self._cancelling = task, task.cancelling()
            now = asyncio.get_running_loop().time()
            self._quiet_since = now
            if self.deadline is not None and self.deadline <= now:
                self.expire("rollout" if self.rollout_cut else "limit")
            else:
                self._watch._add(self)
        return self

    def at_deadline(self, loop: asyncio.AbstractEventLoop) -> None:
        """The rollout's deadline cuts at once; the per-call limit first probes the engine (while the
        call still holds it: a wedged engine is seen wedged), so the cut says which it was."""
        if self.rollout_cut or self.probe is None:
            self.expire("rollout" if self.rollout_cut else "limit")
        elif self._probing is None:
            self._probing = loop.create_task(self._probe(at_limit=True))
        # else: the stall probe in flight ends the step when it returns (`_probe` sees the deadline passed)

    def check_stall(self, now: float, loop: asyncio.AbstractEventLoop) -> None:
        if self.moved:
            self.moved, self._quiet_since = False, now
        elif self._probing is None and self.stall_s is not None and now - self._quiet_since >= self.stall_s:
            self._probing = loop.create_task(self._probe())

    async def _probe(self, at_limit: bool = False) -> None:
        assert self.probe is not None
        try:
            healthy = await self.probe()
        except Exception:
            healthy = False
        self._probing = None
        if self._exited:  # the step ended meanwhile
            return
        if not healthy:
            self._watch._guards.pop(self, None)
            self.expire("stall")
        elif at_limit or (self.deadline is not None and self.deadline <= asyncio.get_running_loop().time()):
            self.expire("limit")  # healthy and still answering: the long answer the client asked for
        else:  # slow, not hung: the next window starts now
            self._quiet_since = asyncio.get_running_loop().time()

    def expire(self, reason: str = "cut") -> None:
        if self._task is not None and not self._expired and not self._exited:
            self._expired, self.reason = True, reason
            self._task.cancel()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._watch._guards.pop(self, None)
        self._exited = True
        if self._probing is not None:
            self._probing.cancel()
            self._probing = None
        if (
            self._expired
            and self._task is not None
            and self._task.uncancel() <= self._cancelling
            and exc_type is asyncio.CancelledError
        ):
            raise TimeoutError("deadline exceeded") from exc
