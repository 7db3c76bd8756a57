"""One real GUI rollout recorded by the real gateway, into a run directory the viewer reads.

The scripted policy (the model's decisions only) replays a browser task's oracle as zero-gui
`computer_use` calls; the orchestrator runs zero-gui in a local sandbox with the task's real
browser and computer service, and the in-process gateway records every call and stores every
screenshot in `<run>/calls.db.blobs`. Shared with tests/harness/test_zero_gui.py's helpers.
"""

from __future__ import annotations

import sys
from pathlib import Path

HARNESS_TESTS = Path(__file__).resolve().parents[1] / "harness"
GUI_TESTS = Path(__file__).resolve().parents[1] / "gui"
TASK = "board-add-01"


def gui_missing() -> str:
    sys.path.insert(0, str(GUI_TESTS))
    from gui_helpers import gui_missing as missing

    return str(missing())


async def record_gui_run(run_dir: Path, task: str = TASK, *, give_up: bool = False) -> str:
    """Run one zero-gui rollout of `task` into `run_dir` (calls.db + its blobs); its rollout id.
    `give_up`: the policy ends the task at once, claiming success (an `ok` rollout the verifier scores 0)."""
    for p in (HARNESS_TESTS, GUI_TESTS):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    from test_zero_gui import GUI_SUITE, oracle_pixels, oracle_to_calls, replay_policy

    from openforgerl.engines.scripted import MODEL_NAME, ScriptedEngine
    from openforgerl.gateway.server import start_gateway
    from openforgerl.harness.registry import get_harness
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.config import OrchestratorConfig
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.store.sqlite import SQLiteCallStore
    from openforgerl.tasks.loader import load_runtime

    run_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 - once, before anything runs
    rt = load_runtime(GUI_SUITE / task)
    backend = LocalBackend(root=run_dir.parent / f"{run_dir.name}-sbx")
    store = SQLiteCallStore(run_dir / "calls.db")
    config = OrchestratorConfig(
        group_size=1,
        min_group_size=1,
        retries=0,
        model=MODEL_NAME,
        harness_cache=run_dir.parent,
        budget_s=120.0,
    )
    try:
        planned = (
            [{"action": "terminate", "status": "success"}]
            if give_up
            else oracle_to_calls(await oracle_pixels(rt, backend), *rt.screen)
        )
        gateway = await start_gateway(ScriptedEngine(replay_policy(planned)), store, call_deadline_s=60.0)
        try:
            batch = await run_batch(
                [rt],
                get_harness("zero-gui", kind="browser", wall_clock_s=100),
                gateway=gateway.access,
                backend=backend,
                config=config,
            )
        finally:
            await gateway.aclose()
    finally:
        await backend.aclose()
        await store.aclose()
    [record] = batch.records
    return str(record.rollout_id)
