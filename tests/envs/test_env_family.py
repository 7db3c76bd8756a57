"""A new environment family, written here in under 60 lines (outside `openforgerl/`), run through the real
orchestrator: a task folder says `[environment] kind = "counter"`, the family gives it a runtime, and a
rollout in a real sandbox is rewarded by that runtime's own verifier."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openforgerl.env.contract import TaskSpec, Verdict
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.base import Sandbox
from openforgerl.tasks import Task, TaskFamily, load_runtime, register_family
from openforgerl.testing.harnesses import after_a_model_call
from openforgerl.testing.markers import needs_bwrap
from openforgerl.testing.rollouts import open_rollout_env

pytestmark = needs_bwrap


# ---- the family: 12 lines ------------------------------------------------------------------------
def counter_runtime(task: Task, **_: Any) -> TaskSpec:
    """The agent must raise counter.txt from 0 to the target in the task folder (never shown to it)."""
    target = (task.root / "target.txt").read_text().strip()

    async def verify(sandbox: Sandbox) -> Verdict:
        got = (await sandbox.read_file("/workdir/counter.txt")).decode(errors="replace").strip()
        return Verdict(float(got == target), {"counter": float(got == target)}, f"counter = {got!r}")

    return TaskSpec(
        task.task_id, task.instruction, verify, budget_s=60.0, files=lambda: {"counter.txt": b"0\n"}
    )


register_family(TaskFamily("counter", counter_runtime, kinds=("counter",)))
# ---------------------------------------------------------------------------------------------------


def counter_task(root: Path) -> Path:
    root.mkdir()
    (root / "task.toml").write_text('[task]\nname = "counter/to-three"\n[environment]\nkind = "counter"\n')
    (root / "instruction.md").write_text("Set counter.txt to 3.\n")
    (root / "target.txt").write_text("3\n")
    return root


async def test_a_family_defined_outside_the_package_runs_through_the_orchestrator(tmp_path: Path) -> None:
    runtime = load_runtime(counter_task(tmp_path / "to-three"))
    assert isinstance(runtime, TaskSpec) and runtime.task_id == "counter/to-three"
    results: dict[str, Any] = {}
    async with open_rollout_env(tmp_path) as env:
        for name, script in {"solves": "echo 3 > counter.txt", "no-op": "true"}.items():
            (rec,) = (await env.run([runtime], after_a_model_call(script))).records
            results[name] = (rec.status, rec.reward)
    assert results == {"solves": (RolloutStatus.OK, 1.0), "no-op": (RolloutStatus.OK, 0.0)}
