"""End to end: `run_eval` → orchestrator → real bubblewrap sandboxes → the `zero` harness → a real
gateway over the scripted engine (the only double: it replays each task's gold actions) → the Claw
service → the verifier → report. Covers the function-tool surface and the shell CLI surface."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from openforgerl.engines.scripted import ScriptedEngine
from openforgerl.envs.claw.oracle_policy import oracle_policy
from openforgerl.eval.report import build_report, write_report
from openforgerl.eval.runner import run_eval
from openforgerl.gateway.server import start_gateway
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.tasks.loader import load_runtime

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"
TASKS = ["easy-todo-add-01", "mail-reply-01-error-retry", "kb-answer-02"]

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


async def _eval(tmp_path: Path, rate: float, prefer_shell: bool = False):
    from openforgerl.sandbox.local import LocalBackend

    runtimes = [load_runtime(SUITE / t) for t in TASKS]
    store = SQLiteCallStore(tmp_path / "calls.db")
    policy = oracle_policy(runtimes, success_rate=rate, prefer_shell=prefer_shell)
    gateway = await start_gateway(ScriptedEngine(policy), store)
    backend = LocalBackend(root=tmp_path / "sbx")
    try:
        return await run_eval(
            runtimes, ["zero"], gateway=gateway.access, backend=backend, group_size=2, budget_s=120.0
        )
    finally:
        await backend.aclose()
        await gateway.aclose()
        await store.aclose()


async def test_oracle_policy_solves_every_task_through_function_tools(tmp_path: Path) -> None:
    trials = await _eval(tmp_path, 1.0)
    assert len(trials) == 6 and not any(t.infra for t in trials)
    assert [t.reward for t in trials] == [1.0] * 6
    report = build_report(trials, 2, resamples=100)
    zero = report["harnesses"]["zero"]
    assert zero["pass_at"][1]["value"] == 1.0 and zero["pass_hat"][2]["value"] == 1.0
    assert set(report["services"]["zero"]) == {"todo", "mail", "kb", "answer"}
    paths = write_report(report, tmp_path / "report")
    assert paths["png"].stat().st_size > 1000


async def test_shell_cli_surface_and_a_policy_that_gives_up(tmp_path: Path) -> None:
    solved = await _eval(tmp_path / "a", 1.0, prefer_shell=True)
    assert [t.reward for t in solved] == [1.0] * 6
    failed = await _eval(tmp_path / "b", 0.0)
    assert [t.reward for t in failed] == [0.0] * 6
    assert build_report(failed, 2, resamples=10)["harnesses"]["zero"]["pass_at"][2]["value"] == 0.0
