"""Export test fixtures: reconstructed rollouts from the conversation simulator."""

from __future__ import annotations

import pytest
from export_sim import simulated_rollout

from openforgerl.trajectory import ReconstructionResult, reconstruct_samples


@pytest.fixture
def results() -> list[ReconstructionResult]:
    """Two kept rollouts and one infra-tainted one."""
    out = []
    for i, kw in enumerate([{}, {"reward": 0.0}, {"infra_tainted": True}]):
        calls, rollout = simulated_rollout(i, f"r{i}", **kw)
        out.append(reconstruct_samples(calls, rollout))
    return out
