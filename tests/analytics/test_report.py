"""`openforgerl analyze` end to end on synthetic run directories, and the capture of audit + workdir."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from analytics._rundir import ChainWriter, chat_history, record, write_run
from openforgerl.analytics.capture import capture_rollout, write_capture
from openforgerl.analytics.report import analyze, to_markdown
from openforgerl.analytics.rundir import RunDir, TaskIndex, suite_family
from openforgerl.cli import app
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.base import ExecResult

TASK = "claw/mail-reply-01"  # a builtin task: its gold actions and offered tools come from the suite


def _rollout(rid: str, version: int, verify: bool, reward: float, t: float) -> tuple[Any, list[Any]]:
    steps = [
        ("a", "mail_search", {"query": "dana "}, '{"hits": []}'),
        ("b", "mail_read", {"id": "m1"}, '{"id": "m1"}'),
        ("c", "mail_reply", {"id": "m1", "body": "ok"}, '{"id": "m9"}'),
    ]
    if verify:
        steps.append(("d", "mail_list", {"folder": "sent"}, '{"messages": [{"id": "m9"}]}'))
    w = ChainWriter(rid, t0=t)
    for req in chat_history(steps):
        w.call({"messages": req}, "x", version=version)
    return record(rid, TASK, "zero", RolloutStatus.OK, reward, version=version, t=t), w.calls


def _run(tmp: Path) -> Path:
    rollouts = [_rollout(f"v0-{i}", 0, False, float(i == 0), 100.0 + i) for i in range(3)]
    rollouts += [_rollout(f"v4-{i}", 4, True, 1.0, 200.0 + i) for i in range(3)]
    rollouts.append((record("inf", TASK, "zero", RolloutStatus.INFRA_ENGINE, None, version=4), []))
    return write_run(tmp / "quick", rollouts, jsonl="eval_rollouts.jsonl")


def test_analyze_splits_checkpoints_and_computes_metrics(tmp_path: Path) -> None:
    summary, rows = analyze([RunDir(_run(tmp_path))], TaskIndex.default(), resamples=200)
    assert summary["runs"] == ["quick@v0", "quick@v4"]
    assert len(rows) == 6  # the infra rollout is left out
    start = summary["groups"]["quick@v0"]["all"]["all"]["metrics"]
    end = summary["groups"]["quick@v4"]["zero"]["mail-reply"]["metrics"]
    assert start["sv"]["all"]["value"] == 0.0 and end["sv"]["all"]["value"] == 1.0
    assert start["pass"]["all"]["value"] == 1 / 3 and end["pass"]["all"]["value"] == 1.0
    assert start["pc"]["all"]["value"] == 1.0  # the builtin task's gold: search 'Dana', reply to m1
    assert start["sv"]["pass"]["n"] == 1 and start["sv"]["fail"]["n"] == 2
    assert "| self-verification (`sv`) |" in to_markdown(summary)


def test_analyze_command_writes_json_markdown_png(tmp_path: Path) -> None:
    run = _run(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["analyze", str(run), str(run), "--out", str(out), "--resamples", "50"])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "analytics.json").read_text())
    assert data["runs"] == ["quick#0@v0", "quick#0@v4", "quick#1@v0", "quick#1@v4"]
    assert (out / "analytics.png").read_bytes()[:4] == b"\x89PNG"
    assert len((out / "rollouts.jsonl").read_text().splitlines()) == 12
    assert "Behaviour analytics" in (out / "analytics.md").read_text()


def test_suite_family_is_the_name_up_to_its_first_number() -> None:
    assert suite_family("claw/calendar-create-01-error-retry") == "calendar-create"
    assert suite_family("claw/calendar-day-answer") == "calendar-day-answer"
    assert suite_family(None) == "?"


class _LocalSandbox:
    """Runs argv on this machine (the capture program only needs loopback and a folder)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    async def exec(self, argv: list[str], *, timeout_s: float | None = None, **_: Any) -> ExecResult:
        argv = [a.replace("/workdir", str(self.workdir)) if a == "/workdir" else a for a in argv]
        proc = await asyncio.to_thread(subprocess.run, argv, capture_output=True, timeout=timeout_s)
        return ExecResult(proc.returncode, proc.stdout, proc.stderr)


def test_capture_rollout_fetches_audit_and_workdir(tmp_path: Path) -> None:
    import sys

    from openforgerl.envs.claw.services.server import build_app, serve

    work = tmp_path / "work"
    (work / ".claw").mkdir(parents=True)
    (work / ".claw" / "config.json").write_text("{}")
    (work / "out").mkdir()
    (work / "out" / "a.txt").write_text("hello")
    (work / "link").symlink_to("/etc/passwd")
    claw = build_app(None, work, {"faults": [{"tool": "todo_add", "call": 1, "kind": "error"}]})
    server = serve(claw, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    claw.call("todo_add", {"title": "x"})
    claw.call("todo_add", {"title": "x"})

    class Task:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        python = sys.executable

    dest = tmp_path / "dest"
    assert asyncio.run(capture_rollout(_LocalSandbox(work), Task(), dest)) == ""
    server.shutdown()
    audit = json.loads((dest / "audit.json").read_text())["calls"]
    assert [(a["tool"], a["status"], a["fault"]) for a in audit] == [
        ("todo_add", 503, "error"),
        ("todo_add", 200, None),
    ]
    assert (dest / "files" / "out" / "a.txt").read_text() == "hello"
    assert not (dest / "files" / "link").exists() and not (dest / "files" / ".claw").exists()
    assert json.loads((dest / "files_skipped.json").read_text()) == ["link"]


def test_write_capture_refuses_paths_out_of_dest(tmp_path: Path) -> None:
    import base64

    b64 = base64.b64encode(b"x").decode()
    write_capture(tmp_path / "d", {"audit": [], "files": {"../evil": b64, "/abs": b64, "ok/f": b64}})
    assert (tmp_path / "d" / "files" / "ok" / "f").exists()
    assert not (tmp_path / "evil").exists() and not (tmp_path / "d" / "evil").exists()
