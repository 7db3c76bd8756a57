"""WebVoyager, Online-Mind2Web and OSWorld task files (small fixtures written for these tests, in the
upstream shapes) -> task folders: what needs the live web, a VM image or a judge is flagged with the
reason; the locally runnable OSWorld task runs in a real sandbox (scripted policy -> 1, no-op -> 0)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from gui_helpers import DATA, needs_gui

from openforgerl.envs.gui.runtime import GuiTaskRuntime
from openforgerl.tasks.flags import summarize_flags
from openforgerl.tasks.format import load_task
from openforgerl.tasks.importing import import_any
from openforgerl.tasks.loader import load_runtime


def _import(tmp_path: Path, fmt: str, src: str) -> list:
    return [load_task(p) for p in import_any(DATA / src, tmp_path / fmt, fmt)]


def test_webvoyager_is_flagged_live_web_and_judge(tmp_path):
    tasks = _import(tmp_path, "webvoyager", "WebVoyager_data.jsonl")
    assert [t.task_id for t in tasks] == [
        "webvoyager/Cooking--0",
        "webvoyager/Cooking--1",
        "webvoyager/Maps--0",
    ]
    assert all(t.flags == ["requires_internet", "requires_llm_judge"] for t in tasks)
    assert "date_dependent" in tasks[1].meta.tags and "date_dependent" not in tasks[0].meta.tags
    judge = json.loads((tasks[0].root / "tests/judge.json").read_text())
    assert judge["reference"]["ans"].startswith("Red lentil") and tasks[0].meta.no_oracle
    assert (
        json.loads((tasks[0].root / "environment/gui.json").read_text())["start_url"]
        == "https://recipes.example.com/"
    )


def test_mind2web_is_flagged_and_keeps_level(tmp_path):
    tasks = _import(tmp_path, "online-mind2web", "Online_Mind2Web.json")
    assert [(t.task_id, t.meta.difficulty) for t in tasks] == [
        ("mind2web/a1b2c3", "medium"),
        ("mind2web/d4e5f6", "easy"),
    ]
    assert (
        summarize_flags(t.flags for t in tasks).line()
        == "0 runnable of 2 tasks: 2 needs internet, 2 needs judge"
    )


def test_osworld_flags_vm_internet_and_answer(tmp_path):
    tasks = {t.task_id: t for t in _import(tmp_path, "osworld", "osworld")}
    calc = tasks["osworld/libreoffice_calc-sum-col"]
    assert "requires_internet" in calc.flags and "unsupported:vm_image:libreoffice_calc" in calc.flags
    assert tasks["osworld/os-infeasible-1"].flags == ["needs:answer"]
    notes = tasks["osworld/os-notes-append"]
    assert notes.flags == [] and isinstance(load_runtime(notes.root), GuiTaskRuntime)
    gui = json.loads((notes.root / "environment/gui.json").read_text())
    assert gui["desktop"]["launch"] == [{"app": "mousepad", "file": "/workdir/notes.txt"}]


POLICY = [
    {"action": "click", "x": 640, "y": 400},
    {"action": "type", "text": "buy stamps"},
    {"action": "key", "keys": "ctrl+s"},
    {"action": "wait", "seconds": 1},
]


async def _run_imported(root: Path) -> tuple[float, float]:
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.local import LocalBackend

    rt = load_runtime(root)
    backend = LocalBackend()
    sbx = await backend.open_sandbox(
        SandboxSpec(rollout_id="osworld-local", files=rt.files(), lifetime_s=600)
    )
    try:
        await sbx.spawn(list(rt.service_argv()))
        noop = (await rt.verify(sbx)).reward
        await sbx.write_file("/tmp/policy.json", json.dumps(POLICY).encode())
        res = await sbx.exec(
            [
                sys.executable,
                "-I",
                "-m",
                "openforgerl.envs.gui.oracle",
                "--actions",
                "/tmp/policy.json",
                "--token",
                "none",
            ],
            timeout_s=180,
        )  # pixel actions only: no lookup, no token needed
        assert res.returncode == 0, res.stderr.decode()[-1500:]
        return noop, (await rt.verify(sbx)).reward
    finally:
        await sbx.aclose()
        await backend.aclose()


@pytest.mark.gui
@needs_gui
def test_runnable_osworld_task_runs_in_a_sandbox(tmp_path):
    tasks = {t.task_id: t for t in _import(tmp_path, "osworld", "osworld")}
    assert asyncio.run(_run_imported(tasks["osworld/os-notes-append"].root)) == (0.0, 1.0)
