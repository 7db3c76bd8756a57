"""Shared fixtures for the attack suite: a real gateway (scripted engine: the only double), real
bubblewrap sandboxes and the real orchestrator (`run_batch`). The harness is a shell script — the
attacker — run exactly as a harness CLI would be (`attacker()` in the attack tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from openforgerl.testing.rollouts import RolloutEnv, open_rollout_env

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"


AttackEnv = RolloutEnv


@pytest.fixture
async def attack_env(tmp_path: Path) -> AsyncIterator[RolloutEnv]:
    async with open_rollout_env(tmp_path) as env:
        yield env


@pytest.fixture
def claw_task() -> Callable[[str], Any]:
    """A real task of the built-in suite, as the orchestrator runs it (service + checks verifier)."""
    from openforgerl.tasks.loader import load_runtime

    return lambda name: load_runtime(SUITE / name)
