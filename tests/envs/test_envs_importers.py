"""Importers: claw-bench (Harbor layout, run to a verified result in a real sandbox), Claw-Eval task.yaml,
QwenClawBench .md (grade() run in a sandbox), tau2 tasks.json; unrunnable tasks are flagged."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from openforgerl.envs.importers import detect_format, import_any
from openforgerl.envs.importers.harbor import HarborTaskRuntime
from openforgerl.envs.runtime import load_runtime
from openforgerl.envs.task import find_tasks, load_task
from openforgerl.envs.validate import validate_tasks
from openforgerl.envs.verify.spec import load_spec

DATA = Path(__file__).parent / "data"

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


async def _validate(runtimes, tmp_path: Path):
    from openforgerl.sandbox.local import LocalBackend

    backend = LocalBackend(root=tmp_path / "sbx")
    try:
        return await validate_tasks(runtimes, backend)
    finally:
        await backend.aclose()


def test_claw_bench_task_loads_in_place() -> None:
    [root] = find_tasks(DATA / "claw_bench")
    task = load_task(root)
    assert task.task_id == "cal-900" and task.meta.verifier == "pytest" and task.meta.source == "claw-bench"
    assert task.meta.difficulty == "easy" and task.budget_s == 60 and "domain:calendar" in task.meta.tags
    rt = load_runtime(root)
    assert isinstance(rt, HarborTaskRuntime)
    assert rt.files() == {"workspace/meetings.csv": (root / "environment/data/meetings.csv").read_bytes()}


@needs_bwrap
def test_claw_bench_task_runs_to_a_verified_result(tmp_path: Path) -> None:
    rt = load_runtime(find_tasks(DATA / "claw_bench")[0])
    [result] = asyncio.run(_validate([rt], tmp_path))
    assert (result.noop_reward, result.oracle_reward, result.error) == (0.0, 1.0, "")


@pytest.mark.skipif(not os.environ.get("CLAW_BENCH_TASKS"), reason="set CLAW_BENCH_TASKS to the claw-bench tasks dir")
def test_all_claw_bench_tasks_load() -> None:
    roots = find_tasks(os.environ["CLAW_BENCH_TASKS"])
    assert len(roots) == 222
    assert all(load_task(r).meta.verifier == "pytest" for r in roots)


@needs_bwrap
@pytest.mark.skipif(not os.environ.get("CLAW_BENCH_TASKS"), reason="set CLAW_BENCH_TASKS to the claw-bench tasks dir")
def test_a_real_claw_bench_task_runs_to_a_verified_result(tmp_path: Path) -> None:
    """One of the package's own tasks: its setup, its oracle and its pytest verifier, in a real sandbox."""
    [root] = [r for r in find_tasks(os.environ["CLAW_BENCH_TASKS"]) if r.name.startswith("doc-005")]
    [result] = asyncio.run(_validate([load_runtime(root)], tmp_path))
    assert (result.oracle_reward, result.error) == (1.0, "")


def test_claw_eval_import_maps_fixtures_and_safety_and_flags_the_judge(tmp_path: Path) -> None:
    assert detect_format(DATA / "claw_eval") == "claw-eval"
    [folder] = import_any(DATA / "claw_eval", tmp_path)
    task = load_task(folder)
    assert task.task_id == "claw-eval/T900_sample" and task.meta.services == ["mail"]
    assert task.flags == ["requires_llm_judge"]
    inbox = json.loads((folder / "environment/fixtures/mail.json").read_text())["inbox"]
    assert inbox[0]["id"] == "msg_1" and inbox[0]["from"] == "kim@corp.example" and inbox[0]["read"] is False
    checks = {c.name: c for c in load_spec(folder / "tests/checks.toml").checks}
    assert checks["safety_0"].kind == "not_called" and checks["safety_0"].tool == "mail_send"  # type: ignore[union-attr]
    assert checks["expected_0"].collection == "mail.drafts"  # type: ignore[union-attr]


@needs_bwrap
def test_qwenclawbench_import_runs_its_grade_function(tmp_path: Path) -> None:
    folders = import_any(DATA / "qwenclawbench" / "tasks", tmp_path / "out")
    tasks = {load_task(f).task_id: load_task(f) for f in folders}
    judge = tasks["qwenclawbench/task_901_judge"]
    assert set(judge.flags) == {"requires_internet", "requires_llm_judge"}
    task = tasks["qwenclawbench/task_900_sample"]
    assert task.flags == [] and task.meta.verifier == "python"
    assert (task.root / "environment/workspace/stock.txt").read_text() == "apples 3\npears 5\n"
    rt = load_runtime(task.root)

    async def run():
        from openforgerl.sandbox.base import SandboxSpec
        from openforgerl.sandbox.local import LocalBackend

        backend = LocalBackend(root=tmp_path / "sbx")
        sbx = await backend.open_sandbox(SandboxSpec(rollout_id="qcb", files=rt.files()))
        try:
            before = await rt.verify(sbx)
            await sbx.write_file("/workdir/total.txt", b"8\n")  # what a correct agent would write
            return before, await rt.verify(sbx)
        finally:
            await sbx.aclose()
            await backend.aclose()

    before, after = asyncio.run(run())
    assert before[0] == 0.0 and after[0] == 1.0
    assert after[1]["check.total_correct"] == 1.0


def test_tau2_import_is_flagged_and_keeps_criteria(tmp_path: Path) -> None:
    folders = import_any(DATA / "tau2" / "airline" / "tasks.json", tmp_path)
    first, second = (load_task(f) for f in folders)
    assert first.task_id == "tau2/airline/airline-0"
    assert "unsupported:tau2_domain:airline" in first.flags and "requires_llm_judge" not in first.flags
    assert "cancel reservation EHGLP3" in first.instruction and "emma_kim_9957" in first.instruction
    checks = load_spec(first.root / "tests/checks.toml").checks
    assert checks[0].kind == "called" and checks[0].tool == "cancel_reservation"  # type: ignore[union-attr]
    assert checks[0].match == {"reservation_id": "EHGLP3"}  # type: ignore[union-attr]
    assert "requires_llm_judge" in second.flags
    assert json.loads((first.root / "tests/tau2_criteria.json").read_text())["reward_basis"] == ["DB", "COMMUNICATE"]


@needs_bwrap
def test_harbor_script_task_runs_to_a_verified_result(tmp_path: Path) -> None:
    rt = load_runtime(DATA / "harbor" / "hello-file")
    assert isinstance(rt, HarborTaskRuntime) and rt.task.meta.verifier == "script" and not rt.task.flags
    [result] = asyncio.run(_validate([rt], tmp_path))
    assert (result.noop_reward, result.oracle_reward, result.error) == (0.0, 1.0, "")


def test_claw_bench_setup_that_ignores_its_argument_does_not_touch_the_task(tmp_path: Path) -> None:
    root = Path(shutil.copytree(find_tasks(DATA / "claw_bench")[0], tmp_path / "cal-901"))
    setup = root / "environment" / "setup.sh"
    setup.write_text(setup.read_text().replace('WORKSPACE="${1:-$TASK_DIR/workspace}"', 'WORKSPACE="$TASK_DIR/workspace"'))
    assert 'WORKSPACE="$TASK_DIR/workspace"' in setup.read_text()
    assert list(load_runtime(root).files()) == ["workspace/meetings.csv"]
    assert not (root / "workspace").exists()
