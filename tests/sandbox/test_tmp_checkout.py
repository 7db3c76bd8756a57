"""A checkout under /tmp. Its tools dir lies under the host's /tmp, which every sandbox
hides behind its own /tmp; before the fix `_resolve` reported the npm CLI "not found" and every npm
harness ended `infra_error:harness_start`. Here the installed tools dir is bind-mounted (not linked:
a link would resolve out of /tmp) at `/tmp/<checkout>/.tools` and a real CLI (Codex) runs from there
through the real orchestrator and gateway."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sbx_helpers import needs_bwrap, needs_root

from openforgerl.engines.scripted import MODEL_NAME, ScriptedEngine
from openforgerl.gateway.server import start_gateway
from openforgerl.harness.install import is_installed, tools_dir
from openforgerl.harness.registry import get_harness
from openforgerl.harness.scripted_policy import proof_policy
from openforgerl.orchestrator.batch import run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.local import LocalBackend
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.testing.tasks import ProofFileTask

pytestmark = [needs_bwrap, needs_root]


@pytest.fixture
def tools_under_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    adapter = get_harness("codex")
    pkg = __import__(type(adapter).__module__, fromlist=["PACKAGE"]).PACKAGE
    if not is_installed(pkg.root(tools_dir()), pkg.spec):
        pytest.skip("codex is not installed (scripts/install_harnesses.sh codex)")
    checkout = Path(tempfile.mkdtemp(prefix="ofrl-checkout-", dir="/tmp"))
    tools = checkout / ".tools"
    tools.mkdir()
    subprocess.run(["mount", "--bind", str(tools_dir()), str(tools)], check=True)
    monkeypatch.setenv("OPENFORGERL_TOOLS", str(tools))
    try:
        yield tools
    finally:
        subprocess.run(["umount", "-l", str(tools)], check=False)
        shutil.rmtree(checkout)


@pytest.mark.timeout(600)
async def test_npm_cli_from_a_checkout_under_tmp(tools_under_tmp: Path, tmp_path: Path) -> None:
    task = ProofFileTask(f"tmp-checkout-{os.getpid()}", exact=True, task_id="tmp-checkout", budget_s=240.0)
    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(ScriptedEngine(proof_policy(task.expected)), store, call_deadline_s=60.0)
    backend = LocalBackend(root=tmp_path / "sbx")
    assert any(p == tools_under_tmp for p in backend.ro_binds), backend.ro_binds
    config = OrchestratorConfig(
        group_size=1, min_group_size=1, retries=0, model=MODEL_NAME, harness_cache=tools_under_tmp
    )
    try:
        batch = await run_batch(
            [task], get_harness("codex"), gateway=gateway.access, backend=backend, config=config
        )
    finally:
        await gateway.aclose()
        await backend.aclose()
        await store.aclose()
    [record] = batch.records
    assert record.status is RolloutStatus.OK and record.reward == 1.0, record.metadata
