"""A new environment family, written here in under 60 lines (outside `openforgerl/`), run through the real
orchestrator: a task folder says `[environment] kind = "counter"`, the family gives it a runtime, and a
rollout in a real sandbox is rewarded by that runtime's own verifier."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openforgerl.envs.families import TaskFamily, environment_kind, register_family
from openforgerl.envs.runtime import load_runtime
from openforgerl.envs.task import Task
from openforgerl.harness.generic import CommandHarness
from openforgerl.orchestrator.task_protocol import TaskDefaults, Verdict
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.base import Sandbox
from openforgerl.testing.markers import needs_bwrap
from openforgerl.testing.rollouts import open_rollout_env

pytestmark = needs_bwrap


# ---- the family: 22 lines ------------------------------------------------------------------------
@dataclass
class CounterRuntime(TaskDefaults):
    """The agent must raise counter.txt from its start value to `target` (both from the task folder)."""

    task: Task

    def __post_init__(self) -> None:
        self.task_id, self.instruction, self.budget_s = self.task.task_id, self.task.instruction, 60.0

    def files(self) -> dict[str, bytes]:
        return {"counter.txt": b"0\n"}

    async def verify(self, sandbox: Sandbox) -> Verdict:
        target = (self.task.root / "target.txt").read_text().strip()  # host side: never in the sandbox
        got = (await sandbox.read_file("/workdir/counter.txt")).decode(errors="replace").strip()
        return Verdict(float(got == target), {"counter": float(got == target)}, f"counter = {got!r}")


register_family(TaskFamily("counter", lambda t: environment_kind(t) == "counter",
                           lambda task, **_: CounterRuntime(task), verifier_files=False))
# ---------------------------------------------------------------------------------------------------


def counter_task(root: Path) -> Path:
    root.mkdir()
    (root / "task.toml").write_text('[task]\nname = "counter/to-three"\n[environment]\nkind = "counter"\n')
    (root / "instruction.md").write_text("Set counter.txt to 3.\n")
    (root / "target.txt").write_text("3\n")
    return root


async def test_a_family_defined_outside_the_package_runs_through_the_orchestrator(tmp_path: Path) -> None:
    runtime = load_runtime(counter_task(tmp_path / "to-three"))
    assert isinstance(runtime, CounterRuntime)
    results: dict[str, Any] = {}
    async with open_rollout_env(tmp_path) as env:
        for name, script in {"solves": "echo 3 > counter.txt", "no-op": "true"}.items():
            (rec,) = (await env.run([runtime], CommandHarness(["sh", "-c", script]))).records
            results[name] = (rec.status, rec.reward)
    assert results == {"solves": (RolloutStatus.OK, 1.0), "no-op": (RolloutStatus.OK, 0.0)}
