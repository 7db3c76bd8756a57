"""Real harnesses in podman containers of the rollout image (scripts/build_images.sh), on a Claw task of the
shipped suite, driven by the real orchestrator through the real gateway with the task's oracle as the
scripted policy: reward 1 from the verifier, which runs in its own fresh container after the agent's is
gone (`PodmanSandbox.run_verifier`). The containers reach nothing but the gateway's forwarded port.

The image is built once per test session (cached by tag); without podman or mmdebstrap the build fails
the tests in CI (`OPENFORGERL_REQUIRE_HARNESSES=1`) and skips them elsewhere."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sbx_helpers import needs_root

from openforgerl.engines.scripted import MODEL_NAME, ScriptedEngine
from openforgerl.envs.claw.oracle_policy import oracle_policy
from openforgerl.gateway.server import start_gateway
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.registry import get_harness
from openforgerl.harness.zero.adapter import ZeroHarness
from openforgerl.orchestrator.batch import run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.podman import PodmanBackend
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.tasks.loader import load_runtime

pytestmark = [pytest.mark.podman, needs_root, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "src/openforgerl/envs/claw/suite/tasks"
IMAGE_PYTHON = "/opt/openforgerl/venv/bin/python"
IMAGE_TOOLS = Path("/opt/openforgerl/tools")
TASK = "easy-todo-add-01"


def _version_tag() -> str:
    import hashlib
    import tomllib

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    lock = hashlib.sha256((REPO / "locks/project.txt").read_bytes()).hexdigest()[:12]
    return f"localhost/openforgerl/rollout:{version}-{lock}"


@pytest.fixture(scope="session")
def rollout_image() -> str:
    """scripts/build_images.sh (a no-op when the tag exists); missing tools fail in CI, skip elsewhere."""
    from openforgerl.harness.install import tools_dir

    missing = [b for b in ("podman", "mmdebstrap") if shutil.which(b) is None]
    reason = f"{' and '.join(missing)} missing: apt-get install {' '.join(missing)}"
    clis = [c for c in ("codex", "claude-code") if not (tools_dir() / "npm" / c).is_dir()]
    if clis and not missing:
        missing, reason = clis, f"the image needs {', '.join(clis)}: run scripts/install_harnesses.sh"
    if missing:
        if os.environ.get("CI") or os.environ.get("OPENFORGERL_REQUIRE_HARNESSES"):
            pytest.fail(reason)
        pytest.skip(reason)
    t0 = time.monotonic()
    done = subprocess.run(
        ["bash", str(REPO / "scripts/build_images.sh")], capture_output=True, text=True, timeout=1500
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    print(f"rollout image ready in {time.monotonic() - t0:.0f} s: {done.stdout.strip().splitlines()[-4:]}")
    return _version_tag()


class InImage:
    """A harness as the rollout image holds it: nothing installed on the host, the image's paths in its
    command line (the CLIs under /opt/openforgerl/tools, Python at /opt/openforgerl/venv)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def install(self, cache_dir: Path) -> None:
        """The image already holds the CLI."""

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        launch: HarnessLaunch = self._inner.launch(ctx, IMAGE_TOOLS)
        return launch


def _harness(name: str) -> Any:
    return InImage(ZeroHarness(python=IMAGE_PYTHON) if name == "zero" else get_harness(name))


async def _rollout(name: str, image: str, tmp_path: Path) -> Any:
    runtime = load_runtime(SUITE / TASK, python=IMAGE_PYTHON)
    runtime.image = image
    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(
        ScriptedEngine(oracle_policy([runtime], success_rate=1.0)), store, call_deadline_s=60.0
    )
    backend = PodmanBackend(root=tmp_path / "podman")
    config = OrchestratorConfig(
        group_size=1, min_group_size=1, retries=0, model=MODEL_NAME, harness_cache=tmp_path
    )
    try:
        batch = await run_batch(
            [runtime], _harness(name), gateway=gateway.access, backend=backend, config=config
        )
        [record] = batch.records
        calls = await store.list_calls(record.rollout_id)
    finally:
        await gateway.aclose()
        await backend.aclose()
        await store.aclose()
    return record, calls


@pytest.mark.parametrize(
    "name",
    [
        "zero",
        pytest.param("codex", marks=pytest.mark.harness),
        pytest.param("claude_code", marks=pytest.mark.harness),
    ],
)
async def test_harness_in_podman_scores_on_a_claw_task(name: str, rollout_image: str, tmp_path: Path) -> None:
    record, calls = await _rollout(name, rollout_image, tmp_path)
    assert record.status == RolloutStatus.OK and record.reward == 1.0, (
        record.status,
        record.metadata,
        record,
    )
    assert calls and all(c.error is None for c in calls if not c.side_call), [c.error for c in calls]
