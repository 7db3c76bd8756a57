"""The SDK's tool service on Kubernetes (fake API server, bwrap kubelet, the real lightkube client): the
service runs in the Pod's services container, `read_state` reads it there once the agent's container
has ended, and a service the agent broke is the agent's outcome there too."""

from __future__ import annotations

import json

import pytest
from k8s_helpers import needs_bwrap

from openforgerl.env.tool_service import read_state, wait_for_service
from openforgerl.sandbox.base import SandboxError, SandboxSpec, TamperError
from openforgerl.sandbox.kubernetes import KubernetesBackend
from openforgerl.testing.fake_kube.bwrap import IMAGE_VENV

pytestmark = needs_bwrap

PORT, URL, TOKEN = "7793", "http://127.0.0.1:7793", "host-secret-k8s-0123456789"
PY = f"{IMAGE_VENV}/bin/python"  # the project's Python as the rollout image holds it
SERVICE = """
import os, sys
from openforgerl.env.tool_service import serve
items = []
def call(tool, args):
    if tool == "crash":
        os._exit(1)
    items.append(str(args.get("name")))
    return 200, {"count": len(items)}
serve(int(sys.argv[1]), sys.argv[2], call, lambda: {"items": items})
"""
CALL = """
import sys, urllib.request
req = urllib.request.Request(sys.argv[3] + "/call/" + sys.argv[1], data=sys.argv[2].encode(), method="POST")
try:
    print(urllib.request.urlopen(req, timeout=5).read().decode())
except Exception as exc:
    print("no reply:", type(exc).__name__)
"""


async def _task(backend: KubernetesBackend, name: str):  # type: ignore[no-untyped-def]
    sbx = await backend.open_sandbox(SandboxSpec(name))
    await sbx.spawn([PY, "-I", "-c", SERVICE, PORT, TOKEN])
    assert await wait_for_service(sbx, URL, TOKEN, python=PY, wait_s=30) == {"items": []}
    return sbx


async def _agent_calls(sbx, tool: str) -> str:  # type: ignore[no-untyped-def]
    res = await sbx.exec([PY, "-c", CALL, tool, json.dumps({"name": "a"}), URL])
    assert res.returncode == 0, res.stderr
    return res.stdout.decode()


async def test_the_state_is_read_in_the_services_container_after_the_agent(kube_backend: KubernetesBackend):
    sbx = await _task(kube_backend, "tool-svc-ok")
    try:
        assert '"count": 1' in await _agent_calls(sbx, "add")
        assert await read_state(sbx, URL, TOKEN, python=PY) == {"items": ["a"]}
        with pytest.raises(SandboxError, match="ended for the verifier"):
            await sbx.exec(["true"])  # the agent's container is gone
    finally:
        await sbx.aclose()


async def test_a_service_the_agent_crashed_is_the_agents_outcome(kube_backend: KubernetesBackend):
    sbx = await _task(kube_backend, "tool-svc-crash")
    try:
        assert "no reply" in await _agent_calls(sbx, "crash")
        with pytest.raises(TamperError, match="no longer answered after the agent ran"):
            await read_state(sbx, URL, TOKEN, python=PY)
    finally:
        await sbx.aclose()
