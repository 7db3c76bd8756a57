"""Simulated rollouts for export tests (built with tests/trajectory's conversation simulator)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trajectory"))

from trajectory_sim import Simulator

from openforgerl.records import CallRecord, RolloutRecord, RolloutStatus


def simulated_rollout(seed: int, rollout_id: str, **kw: object) -> tuple[list[CallRecord], RolloutRecord]:
    """A rollout with a sub-agent and a compaction: three chains, main chain last."""
    sim = Simulator(random.Random(seed), rollout_id=rollout_id)
    main, sub = sim.new_agent("main"), sim.new_agent("sub", parent="main")
    for agent, turns in ((main, 4), (sub, 2)):
        for _ in range(turns):
            sim.answer(agent, sim.call(agent))
    sim.compact(main)
    sim.answer(main, sim.call(main, version=1))
    rec = RolloutRecord(
        rollout_id=rollout_id,
        task_id="t1",
        harness="sim",
        group_id="g1",
        status=RolloutStatus.OK,
        reward=1.0,
        in_batch=True,
        group_valid=True,
    )
    return sim.calls, rec.model_copy(update=kw)
