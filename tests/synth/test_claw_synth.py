"""Claw synthesis: the filters reject what they should, kept tasks are distinct and load, and the real
sandboxed `tasks validate` agrees with the in-process validator on a sample."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from openforgerl.synth import load_env, synthesize
from openforgerl.synth.compose import Candidate
from openforgerl.synth.filters import judge
from openforgerl.tasks.draft import Action
from openforgerl.tasks.format import load_task

CLAW = load_env("claw")


def _cand(actions: list[Action], checks: list[dict], **kw: object) -> Candidate:
    from openforgerl.env.world_data import base_fixtures

    base = {
        "fixtures": base_fixtures(),
        "services": ["todo"],
        "family": "t",
        "variant": "plain",
        "n_atoms": 1,
    }
    return Candidate("claw", "claw-synth/t", "do it", actions, checks, **(base | kw))  # type: ignore[arg-type]


def _todo(title: str, **extra: object) -> dict:
    return {"kind": "record", "name": "done", "collection": "todo.items", "match": {"title": title, **extra}}


def test_each_filter_names_its_rejection() -> None:
    add = Action("todo_add", {"title": "Buy milk"})
    assert judge(CLAW, _cand([add], [_todo("Buy milk")])).ok
    assert judge(CLAW, _cand([add], [_todo("Pay rent")])).rejected_by == "noop"  # t1 exists already
    assert judge(CLAW, _cand([add], [_todo("Nope")])).rejected_by == "oracle"
    twice = [add, Action("todo_list", {}), add]
    assert judge(CLAW, _cand(twice, [_todo("Buy milk")])).rejected_by == "prefix"
    extra = [Action("todo_add", {"title": "Other"}), add]
    assert judge(CLAW, _cand(extra, [_todo("Buy milk")])).rejected_by == "drop_write"
    guard = {"kind": "not_called", "name": "no_add", "tool": "todo_add", "safety": True}
    assert judge(CLAW, _cand([add], [_todo("Buy milk"), guard])).rejected_by == "safety"
    assert judge(CLAW, _cand([add], [_todo("Buy milk")], refs=[(0, "t77")])).rejected_by == "dataflow"
    assert judge(CLAW, _cand([add], [{"kind": "bogus"}])).rejected_by == "format"


def test_a_fault_is_retried_like_solve_sh() -> None:
    add = Action("todo_add", {"title": "Buy milk"})
    fault = [{"tool": "todo_add", "call": 1, "kind": "error", "status": 503}]
    assert judge(CLAW, _cand([add], [_todo("Buy milk")], faults=fault)).ok


def test_claw_tasks_are_validated_distinct_and_load(tmp_path: Path) -> None:
    report, paths, _ = synthesize("claw", 150, tmp_path, seed=7)
    assert report.kept == len(paths) == 150
    assert report.generated == report.kept + sum(report.rejected.values())
    tasks = [load_task(p) for p in paths]
    assert len({t.instruction for t in tasks}) == len(tasks)
    variants = {t.config.metadata["synth"]["variant"] for t in tasks}
    assert variants == {"plain", "dup", "fault", "impossible"}
    assert any(t.meta.faults for t in tasks) and all(t.meta.services for t in tasks)
    impossible = [t for t in tasks if t.config.metadata["synth"]["variant"] == "impossible"]
    checks = (impossible[0].root / "tests" / "checks.toml").read_text()
    assert "NOT FOUND" in checks and 'kind = "not_called"' in checks
    assert (tmp_path / "synth_report.json").is_file()


def test_the_same_seed_gives_the_same_tasks(tmp_path: Path) -> None:
    _, a, _ = synthesize("claw", 20, tmp_path / "a", seed=5)
    _, b, _ = synthesize("claw", 20, tmp_path / "b", seed=5)
    assert [p.name for p in a] == [p.name for p in b]


@pytest.mark.slow
def test_600_on_claw_keeps_at_least_500_distinct_tasks(tmp_path: Path) -> None:
    report, paths, _ = synthesize("claw", 600, tmp_path, seed=0)
    assert report.kept >= 500 and len({p.name for p in paths}) == report.kept
    assert report.seconds < 300


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_the_sandboxed_validate_agrees_with_the_in_process_one(tmp_path: Path) -> None:
    from openforgerl.synth.agreement import sandbox_agreement

    _, paths, rejected = synthesize("claw", 40, tmp_path, seed=11, keep_rejected=2)
    result = sandbox_agreement("claw", paths, rejected, 6, seed=11)
    assert result["kept_checked"] == 6 and result["sandbox_valid_kept"] == 6
    assert result["agreed"] == result["checked"], [r for r in result["rows"] if not r["agree"]]
