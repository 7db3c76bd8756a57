"""The shipped GUI suite: generated deterministically, enough tasks of both kinds with a split, each
loads as a GUI runtime, and doing nothing fails every task (judged in-process on the untouched apps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gui_helpers import GUI_SUITE

from openforgerl.env.apps import build_apps
from openforgerl.env.checks.evaluate import Evidence, evaluate
from openforgerl.env.checks.spec import load_spec
from openforgerl.envs.gui.runtime import GuiTaskRuntime
from openforgerl.envs.gui.suite.families import generate
from openforgerl.tasks.format import find_tasks
from openforgerl.tasks.loader import load_runtime

TASKS = find_tasks(GUI_SUITE)


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_committed_suite_equals_a_fresh_generation(tmp_path):
    generate(tmp_path / "gui")
    assert _tree(tmp_path / "gui") == _tree(GUI_SUITE)


def test_suite_size_kinds_and_split():
    rts = [load_runtime(p) for p in TASKS]
    assert all(isinstance(rt, GuiTaskRuntime) for rt in rts)
    kinds = {k: sum(rt.kind == k for rt in rts) for k in ("browser", "desktop")}
    splits = {s: sum(rt.task.meta.split == s for rt in rts) for s in ("train", "test")}
    assert len(rts) >= 40 and kinds["browser"] >= 30 and kinds["desktop"] >= 6
    assert splits["test"] >= 10 and splits["train"] >= 30
    assert all(not rt.task.flags for rt in rts)


@pytest.mark.parametrize("root", TASKS, ids=[p.name for p in TASKS])
def test_noop_scores_zero(root: Path, tmp_path: Path):
    rt = load_runtime(root)
    store, server = build_apps(rt.env_config.get("apps", {}), "t", 0)
    server.server_close()
    for rel, data in rt.files().items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(data)
    outcome = evaluate(load_spec(root / "tests/checks.toml"), Evidence(store.snapshot(), [], tmp_path))
    assert outcome.reward == 0.0
    steps = json.loads((root / "solution/actions.json").read_text())
    assert steps and all(s["action"] in ("click", "type", "key", "drag", "wait") for s in steps)


def test_config_in_the_workdir_holds_no_expected_values():
    for root in TASKS:
        config = load_runtime(root).files()[".gui/config.json"].decode()
        assert "checks" not in config and "oracle" not in config


def test_environment_kinds_are_registered():
    from openforgerl.env.screens import get_environment, kinds

    assert {"browser", "desktop"} <= set(kinds())
    with pytest.raises(KeyError, match="unknown GUI environment kind 'vm'"):
        get_environment("vm")
