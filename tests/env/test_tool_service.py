"""The SDK's tool service in a real bubblewrap sandbox: who is to blame when its state cannot be read.

The service answered before the agent started (`wait_for_service`); the agent can reach it with any
tool call it likes. A service that no longer answers when the verifier reads it is therefore the
agent's outcome (`TamperError`: reward 0, `agent_failed`), never infra the agent could choose to be
retried instead of scored. Infra is what the agent cannot produce: a service that never started, or
the reader failing on its own.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from openforgerl.env import tool_service
from openforgerl.env.contract import VerifierError
from openforgerl.env.tool_service import read_state, wait_for_service
from openforgerl.sandbox.base import SandboxSpec, TamperError
from openforgerl.sandbox.local import LocalBackend
from openforgerl.testing.markers import needs_bwrap

pytestmark = [needs_bwrap]

PORT, URL, TOKEN = "7791", "http://127.0.0.1:7791", "host-secret-0123456789"

# A world with a tool that works (`add`) and tools an agent could use to break it: `hang` never
# returns while holding the world's lock, `crash` ends the service's process, `bloat` grows the state.
SERVICE = """
import os, sys, time
from openforgerl.env.tool_service import serve
items = []
def call(tool, args):
    if tool == "add":
        items.append(str(args.get("name")))
        return 200, {"count": len(items)}
    if tool == "hang":
        time.sleep(3600)
    if tool == "crash":
        os._exit(1)
    if tool == "bloat":
        items.extend(["x" * 1000] * int(args["n"]))
        return 200, {"count": len(items)}
    return 404, {"error": "no such tool"}
serve(int(sys.argv[1]), sys.argv[2], call, lambda: {"items": items})
"""

# The agent's side: one tool call through the service's public route.
CALL = """
import json, sys, urllib.request
req = urllib.request.Request(sys.argv[4] + "/call/" + sys.argv[1], data=sys.argv[2].encode(),
                             headers={"Content-Type": "application/json"}, method="POST")
try:
    print(urllib.request.urlopen(req, timeout=float(sys.argv[3])).read().decode())
except Exception as exc:
    print("no reply:", type(exc).__name__)
"""


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[LocalBackend]:
    b = LocalBackend(root=tmp_path / "sbx")
    yield b
    await b.aclose()


async def _started(backend: LocalBackend, rid: str):  # type: ignore[no-untyped-def]
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id=rid))
    await sbx.spawn([sys.executable, "-I", "-c", SERVICE, PORT, TOKEN])
    assert await wait_for_service(sbx, URL, TOKEN, wait_s=20) == {"items": []}
    return sbx


async def _agent_calls(sbx, tool: str, args: dict[str, object], wait_s: float = 5) -> str:  # type: ignore[no-untyped-def]
    res = await sbx.exec([sys.executable, "-c", CALL, tool, json.dumps(args), str(wait_s), URL], timeout_s=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.decode()


async def test_control_the_state_is_what_the_agents_tool_calls_did(backend: LocalBackend) -> None:
    sbx = await _started(backend, "ok")
    assert '"count": 2' in (
        await _agent_calls(sbx, "add", {"name": "a"}) + await _agent_calls(sbx, "add", {"name": "b"})
    )
    assert await read_state(sbx, URL, TOKEN) == {"items": ["a", "b"]}
    await sbx.aclose()


async def test_a_service_the_agent_crashed_is_the_agents_outcome(backend: LocalBackend) -> None:
    sbx = await _started(backend, "crash")
    assert "no reply" in await _agent_calls(sbx, "crash", {})
    with pytest.raises(TamperError, match="no longer answered after the agent ran"):
        await read_state(sbx, URL, TOKEN)
    await sbx.aclose()


async def test_a_service_the_agent_left_stuck_is_the_agents_outcome(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tool_service, "ANSWER_S", 2.0)
    sbx = await _started(backend, "hang")
    assert "no reply" in await _agent_calls(sbx, "hang", {}, wait_s=1)
    with pytest.raises(TamperError, match=r"TimeoutError|timed out"):
        await read_state(sbx, URL, TOKEN)
    await sbx.aclose()


async def test_a_state_the_agent_bloated_past_the_read_limit_is_the_agents_outcome(
    backend: LocalBackend,
) -> None:
    sbx = await _started(backend, "bloat")
    await _agent_calls(sbx, "bloat", {"n": 9000}, wait_s=30)  # ~9 MB of state, over the host's 8 MiB
    with pytest.raises(TamperError, match="byte limit"):
        await read_state(sbx, URL, TOKEN)
    await sbx.aclose()


async def test_infra_a_service_that_never_started_is_a_verifier_error(backend: LocalBackend) -> None:
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="never"))
    with pytest.raises(VerifierError, match="did not answer"):
        await wait_for_service(sbx, URL, TOKEN, wait_s=1)
    await sbx.aclose()


async def test_infra_a_reader_that_cannot_run_is_a_verifier_error(backend: LocalBackend) -> None:
    """The control for the verdicts above: the same read with a Python that lacks the package fails
    before it reaches the service, and that is infra, not the agent's."""
    sbx = await _started(backend, "reader")
    with pytest.raises(VerifierError, match="ModuleNotFoundError"):
        await read_state(sbx, URL, TOKEN, python="/usr/bin/python3")
    await sbx.aclose()
