"""The deadline sweep's stall checks (gateway/deadlines.py), on a real event loop: why a guard fired
is what decides whose the outcome is, so each reason is checked with the probe that leads to it."""

from __future__ import annotations

import asyncio

import pytest

from openforgerl.gateway.deadlines import DeadlineWatch


async def _run(
    after_s: float | None,
    *,
    healthy: bool,
    probe_s: float = 0.0,
    stall_s: float = 0.1,
    rollout_cut: bool = False,
    moving: bool = False,
) -> tuple[str, int]:
    """(why the guard fired, probes made) for one step that would otherwise run 5 s."""
    watch, probes = DeadlineWatch(period_s=0.02), []

    async def probe() -> bool:
        probes.append(1)
        await asyncio.sleep(probe_s)
        return healthy

    loop = asyncio.get_running_loop()
    deadline = None if after_s is None else loop.time() + after_s
    with pytest.raises(TimeoutError):
        with watch.guard(deadline, rollout_cut=rollout_cut, stall_s=stall_s, probe=probe) as guard:
            for _ in range(250):
                guard.moved = moving or guard.moved
                await asyncio.sleep(0.02)
    return guard.reason, len(probes)


async def test_a_stalled_engine_that_fails_its_probe_is_cut_as_a_stall() -> None:
    reason, probes = await _run(None, healthy=False)
    assert (reason, probes) == ("stall", 1)


async def test_a_stalled_engine_that_passes_its_probe_runs_on_to_the_limit() -> None:
    """Probed every stall window, never cut for it; the per-call limit then ends the step as "limit"."""
    reason, probes = await _run(0.5, healthy=True)
    assert reason == "limit" and probes >= 3


async def test_a_moving_engine_is_never_probed_before_its_limit() -> None:
    reason, probes = await _run(0.3, healthy=False, moving=True)
    assert reason == "stall" and probes == 1  # only at the limit: and it failed, so the engine is hung
    reason, probes = await _run(0.3, healthy=True, moving=True)
    assert (reason, probes) == ("limit", 1)


async def test_the_rollout_deadline_cuts_at_once_without_a_probe() -> None:
    reason, probes = await _run(0.3, healthy=False, moving=True, rollout_cut=True)
    assert (reason, probes) == ("rollout", 0)


async def test_a_limit_reached_during_a_slow_passing_probe_still_ends_the_step() -> None:
    """The per-call limit passes while a stall probe is in flight: the step ends when it answers
    healthy ("limit"), instead of running on with no deadline left in the sweep."""
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    reason, probes = await _run(0.2, healthy=True, probe_s=0.4, stall_s=0.1)
    assert reason == "limit" and probes == 1 and loop.time() - t0 < 1.5
