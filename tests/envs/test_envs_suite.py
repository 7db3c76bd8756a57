"""The shipped Claw suite: shape, deterministic generation, and oracle → 1 / no-op → 0 for every task
through real bubblewrap sandboxes (one sandbox per task, tasks concurrently)."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from pathlib import Path

import pytest

from openforgerl.envs.claw.suite.generate import generate
from openforgerl.tasks.format import find_tasks, load_task
from openforgerl.tasks.loader import load_runtime
from openforgerl.tasks.validate import validate_tasks

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"


def _tasks():
    return [load_task(p) for p in find_tasks(SUITE)]


def test_suite_shape() -> None:
    tasks = _tasks()
    assert len(tasks) >= 60
    meta = [t.meta for t in tasks]
    assert Counter(m.split for m in meta)["test"] >= 12
    assert set(Counter(m.difficulty for m in meta)) == {"easy", "medium", "hard"}
    services = Counter(s for m in meta for s in m.services)
    for s in ("mail", "calendar", "contacts", "kb", "todo", "notes", "files"):
        assert services[s] >= 3, s
    assert sum(1 for m in meta if len([s for s in m.services if s not in ("answer",)]) >= 2) >= 10
    assert sum(1 for m in meta if m.faults) >= 6
    sft = [t for t in tasks if "sft" in t.meta.tags]
    assert len(sft) >= 15 and all(t.meta.tools == ["write_file", "todo_add", "mail_send"] for t in sft)
    assert all((t.root / "solution" / "solve.sh").is_file() for t in tasks)


def test_committed_suite_equals_a_fresh_generation(tmp_path: Path) -> None:
    generate(tmp_path / "claw")
    fresh = {
        p.relative_to(tmp_path / "claw"): p.read_bytes()
        for p in (tmp_path / "claw").rglob("*")
        if p.is_file()
    }
    shipped = {p.relative_to(SUITE): p.read_bytes() for p in SUITE.rglob("*") if p.is_file()}
    assert fresh.keys() == shipped.keys()
    assert [k for k in fresh if fresh[k] != shipped[k]] == []


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_every_task_oracle_scores_1_and_noop_scores_0(tmp_path: Path) -> None:
    from openforgerl.sandbox.local import LocalBackend

    runtimes = [load_runtime(p) for p in find_tasks(SUITE)]

    async def run():
        backend = LocalBackend(root=tmp_path / "sbx")
        try:
            return await validate_tasks(runtimes, backend, concurrency=8)
        finally:
            await backend.aclose()

    results = asyncio.run(run())
    bad = [r for r in results if not r.ok]
    assert len(results) == len(runtimes) and bad == []
