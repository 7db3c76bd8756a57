"""A rollout on the podman backend: busybox image (imported locally), gateway via our netns forwarder."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from openforgerl.engines.scripted import ScriptedEngine
from openforgerl.env.contract import TaskDefaults, Verdict
from openforgerl.gateway.server import start_gateway
from openforgerl.harness.generic import CommandHarness
from openforgerl.orchestrator.batch import run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.base import Sandbox
from openforgerl.sandbox.images import BUSYBOX, ensure_busybox_image
from openforgerl.sandbox.podman import PodmanBackend
from openforgerl.store.sqlite import SQLiteCallStore

pytestmark = [
    pytest.mark.podman,
    pytest.mark.skipif(shutil.which("podman") is None, reason="podman not installed"),
    pytest.mark.skipif(not BUSYBOX.exists(), reason="apt-get install busybox-static"),
]

WGET = (
    'wget -q -O /workdir/reply.json --header "Authorization: Bearer $OPENAI_API_KEY" '
    '--header "Content-Type: application/json" '
    '--post-data \'{"model":"m","messages":[{"role":"user","content":"hi"}]}\' '
    '"$OPENAI_BASE_URL/chat/completions"'
)


class ReplyTask(TaskDefaults):
    task_id = "podman-reply"
    instruction = "say ok"
    budget_s = 120.0

    def __init__(self, image: str) -> None:
        self.image = image

    def files(self) -> Mapping[str, bytes]:
        return {}

    async def verify(self, sandbox: Sandbox) -> Verdict:
        body = json.loads(await sandbox.read_file("/workdir/reply.json"))
        ok = float(body["choices"][0]["message"]["content"] == "ok")
        return Verdict(ok, {}, "")


async def test_rollout_in_podman_reaches_gateway(tmp_path: Path) -> None:
    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(ScriptedEngine(lambda turn: "ok"), store)
    backend = PodmanBackend(root=tmp_path / "podman")
    try:
        image = await ensure_busybox_image(backend)
        result = await run_batch(
            [ReplyTask(image)],
            CommandHarness(["sh", "-c", WGET]),
            gateway=gateway.access,
            backend=backend,
            config=OrchestratorConfig(group_size=1, min_group_size=1, retries=0),
        )
    finally:
        await backend.aclose()
        await gateway.aclose()
        await store.aclose()
    (rec,) = result.records
    assert rec.status is RolloutStatus.OK and rec.reward == 1.0, rec.metadata
