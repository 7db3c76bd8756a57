"""A real gateway (scripted engine: the only double) + real bubblewrap sandboxes + run_batch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from orch_helpers import AGENT

from openforgerl.engines.scripted import Faults, Turn
from openforgerl.testing.rollouts import RolloutEnv, open_rollout_env

Env = RolloutEnv


def magic_policy(turn: Turn) -> str:
    return "The magic word is abracadabra."


@pytest.fixture
async def make_env(tmp_path: Path) -> AsyncIterator[Callable[..., Any]]:
    async with AsyncExitStack() as stack:

        async def make(
            policy: Callable[[Turn], str] = magic_policy, faults: Faults | None = None, **gw_kw: Any
        ) -> RolloutEnv:
            # the test harness (agents/) is bound in read-only
            return await stack.enter_async_context(
                open_rollout_env(tmp_path, policy, faults=faults, ro_binds=[AGENT.parent], **gw_kw)
            )

        yield make
