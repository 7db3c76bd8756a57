"""Eval through two real harness CLIs (Codex, Claude Code) and `zero`: run_eval → orchestrator →
bubblewrap → the real CLI → the gateway over a scripted oracle policy (the only double: the model's
decisions) → Claw services → verifier → report files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from openforgerl.engines.scripted import ScriptedEngine
from openforgerl.envs.claw.oracle_policy import oracle_policy
from openforgerl.eval.report import build_report, write_report
from openforgerl.eval.runner import run_eval
from openforgerl.gateway.server import start_gateway
from openforgerl.harness.install import is_installed, tools_dir
from openforgerl.harness.registry import get_harness
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.tasks.loader import load_runtime

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"
TASKS = ["easy-todo-add-01", "mail-reply-01-error-retry"]
HARNESSES = ["zero", "codex", "claude_code"]

pytestmark = [
    pytest.mark.harness,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap"),
]


def _require_installed(name: str) -> None:
    module = __import__(type(get_harness(name)).__module__, fromlist=["PACKAGE"])
    pkg = getattr(module, "PACKAGE", None)
    if pkg is None or is_installed(pkg.root(tools_dir()), pkg.spec):
        return
    reason = f"{name} is not installed: run scripts/install_harnesses.sh"
    if os.environ.get("CI") or os.environ.get("OPENFORGERL_REQUIRE_HARNESSES"):
        pytest.fail(reason)
    pytest.skip(reason)


async def test_eval_report_for_real_clis(tmp_path: Path) -> None:
    from openforgerl.sandbox.local import LocalBackend

    for name in HARNESSES:
        _require_installed(name)
    runtimes = [load_runtime(SUITE / t) for t in TASKS]
    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(ScriptedEngine(oracle_policy(runtimes, success_rate=1.0)), store)
    backend = LocalBackend(root=tmp_path / "sbx")
    try:
        trials = await run_eval(
            runtimes, HARNESSES, gateway=gateway.access, backend=backend, group_size=2, budget_s=180.0
        )
    finally:
        await backend.aclose()
        await gateway.aclose()
        await store.aclose()
    assert len(trials) == len(TASKS) * len(HARNESSES) * 2
    assert not [t for t in trials if t.infra], "no trial may be lost to infrastructure"
    assert {t.harness for t in trials if t.reward == 1.0} == set(HARNESSES)
    report = build_report(trials, 2, resamples=50)
    for name in HARNESSES:
        assert report["harnesses"][name]["pass_at"][1]["value"] == 1.0
    paths = write_report(report, tmp_path / "report")
    assert all(p.stat().st_size > 0 for p in paths.values())
