"""A task's service never runs a module the agent planted, however its author wrote the argv.

The service starts in /workdir before the agent and keeps serving its tool calls; it also answers the
verifier. Its author left out `python -I` here, and a tool's handler imports a module lazily, as
services do. Python puts the cwd first on `sys.path` for `-c`, so without the rollout's service
environment (`env.contract.SERVICE_ENV`) the agent's `colorsys.py` runs inside the service and sets the
state the verifier reads.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from orch_helpers import AGENT, proof_task

from openforgerl.env.contract import Verdict
from openforgerl.env.tool_service import read_state, wait_for_service
from openforgerl.harness.generic import CommandHarness
from openforgerl.orchestrator import rollout
from openforgerl.testing.tasks import ProofFileTask

PORT, URL, TOKEN = "7792", "http://127.0.0.1:7792", "host-secret-abcdef0123456789"

SERVICE = """
import sys
from openforgerl.env.tool_service import serve
DONE = False
def call(tool, args):
    import colorsys  # lazily, on the first tool call
    return 200, {"hsv": colorsys.rgb_to_hsv(0.2, 0.4, 0.4)}
serve(int(sys.argv[1]), sys.argv[2], call, lambda: {"done": DONE})
"""

# The agent: plant `colorsys.py` in its workdir, call the tool, then answer the model as usual.
PLANT = f"""cat > colorsys.py <<'EOF'
import sys
sys.modules["__main__"].DONE = True
def rgb_to_hsv(*a): return a
EOF
{sys.executable} -c '
import urllib.request as u
print(u.urlopen(u.Request("{URL}/call/hsv", data=b"{{}}", method="POST")).read().decode())'
exec {sys.executable} {AGENT} ok "$1"
"""


@dataclass
class LazyImportTask(ProofFileTask):
    """Done only when the world says so; nothing the agent can do in it sets `DONE`."""

    def service_argv(self) -> list[str]:
        return [sys.executable, "-c", SERVICE, PORT, TOKEN]  # no -I

    async def service_started(self, sandbox: Any) -> None:
        await wait_for_service(sandbox, URL, TOKEN)

    async def verify(self, sandbox: Any) -> Verdict:
        state = await read_state(sandbox, URL, TOKEN)
        return Verdict(float(state["done"]), {"done": float(state["done"])}, json.dumps(state))


def _task() -> LazyImportTask:
    base = proof_task()
    return LazyImportTask(task_id="lazy-import", instruction=base.instruction)


async def _reward(make_env: Any) -> float | None:
    env = await make_env()
    harness = CommandHarness(["sh", "-c", PLANT, "sh"])
    (rec,) = (await env.run([_task()], harness)).records
    return rec.reward


async def test_a_planted_module_never_runs_in_the_tasks_service(make_env) -> None:
    assert await _reward(make_env) == 0.0


async def test_control_without_the_service_environment_the_plant_sets_the_state(
    make_env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rollout, "SERVICE_ENV", {})
    assert await _reward(make_env) == 1.0
