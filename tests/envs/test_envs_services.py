"""The Claw service over real loopback HTTP: tools, audit, state, reset, faults;
the CLI and the MCP server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openforgerl.env.tool_client import call_tool, get_json
from openforgerl.envs.claw import cli as claw_cli

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"


def test_tool_calls_change_state_and_are_audited(claw_service) -> None:
    svc = claw_service(SUITE / "mail-reply-01" / "environment" / "fixtures")
    status, body = call_tool("mail_search", {"query": "budget"})
    assert status == 200 and [m["id"] for m in body["result"]["messages"]] == ["m1"]
    status, body = call_tool("mail_reply", {"id": "m1", "body": "Yes, still $48,000."})
    assert status == 200 and body["result"]["to"] == "dana.w@acme.io"
    sent = get_json("/state")["mail"]["sent"]
    assert sent[0]["in_reply_to"] == "m1" and sent[0]["subject"] == "Re: Q2 budget numbers"
    status, body = call_tool("mail_read", {"id": "nope"})
    assert status == 404 and "no message" in body["error"]
    calls = get_json("/audit")["calls"]
    assert [(c["tool"], c["status"]) for c in calls] == [
        ("mail_search", 200),
        ("mail_reply", 200),
        ("mail_read", 404),
    ]
    assert calls[1]["args"] == {"id": "m1", "body": "Yes, still $48,000."}
    assert svc.app.world.state()["mail"]["sent"]


def test_bad_arguments_are_agent_errors(claw_service) -> None:
    claw_service()
    status, body = call_tool("todo_add", {"titl": "x"})
    assert status == 400 and "unknown argument 'titl'" in body["error"]
    status, body = call_tool(
        "calendar_create", {"title": "t", "start": "tomorrow", "end": "2026-03-05T10:00"}
    )
    assert status == 400 and "must look like" in body["error"]
    status, body = call_tool("write_file", {"path": "../escape.txt", "content": "x"})
    assert status == 400 and "outside the workspace" in body["error"]


def test_exposed_tools_are_enforced(claw_service) -> None:
    claw_service(config={"tools": ["todo_add"]})
    assert call_tool("todo_add", {"title": "a"})[0] == 200
    status, body = call_tool("mail_send", {"to": "a", "subject": "s", "body": "b"})
    assert status == 404 and "available: todo_add" in body["error"]


def test_reset_restores_fixtures_and_is_audited(claw_service) -> None:
    fixtures = SUITE / "todo-complete-01" / "environment" / "fixtures"
    claw_service(fixtures)
    call_tool("todo_complete", {"id": "t1"})
    assert get_json("/state")["todo"]["items"][0]["done"] is True
    import urllib.request

    from openforgerl.env.tool_client import service_url

    urllib.request.urlopen(urllib.request.Request(service_url() + "/reset", data=b"", method="POST")).read()
    assert get_json("/state")["todo"]["items"][0]["done"] is False
    assert get_json("/audit")["calls"][-1]["tool"] == "__reset__"


def test_fault_injection_fails_the_nth_call_without_side_effects(claw_service) -> None:
    claw_service(
        config={
            "faults": [
                {"tool": "todo_add", "call": 2, "kind": "error", "status": 503},
                {"tool": "mail_send", "call": 1, "kind": "timeout", "delay_s": 0.05},
            ]
        }
    )
    assert call_tool("todo_add", {"title": "one"})[0] == 200
    status, body = call_tool("todo_add", {"title": "two"})
    assert status == 503 and "retry" in body["error"]
    assert call_tool("todo_add", {"title": "two"})[0] == 200
    assert [i["title"] for i in get_json("/state")["todo"]["items"]] == ["one", "two"]
    assert call_tool("mail_send", {"to": "a@b.c", "subject": "s", "body": "b"})[0] == 504
    assert call_tool("mail_send", {"to": "a@b.c", "subject": "s", "body": "b"})[0] == 200
    faults = [c["fault"] for c in get_json("/audit")["calls"] if c["fault"]]
    assert faults == ["error", "timeout"]


def test_workspace_files(claw_service, tmp_path: Path) -> None:
    claw_service()
    assert call_tool("write_file", {"path": "notes/a.txt", "content": "hi"})[0] == 200
    assert (tmp_path / "ws" / "notes" / "a.txt").read_text() == "hi"
    assert call_tool("read_file", {"path": "notes/a.txt"})[1]["result"]["content"] == "hi"
    assert call_tool("list_files", {})[1]["result"]["files"] == ["notes/a.txt"]


def test_cli_prints_json_and_fails_on_errors(claw_service, capsys: pytest.CaptureFixture[str]) -> None:
    claw_service(config={"faults": [{"tool": "calendar_create", "call": 1}]})
    argv = [
        "calendar",
        "create",
        "--title",
        "Sync",
        "--start",
        "2026-03-05T10:00",
        "--end",
        "2026-03-05T10:30",
        "--attendees",
        "a@x.io",
        "b@x.io",
    ]
    assert claw_cli.main(argv) == 1
    assert "error (503)" in capsys.readouterr().err
    assert claw_cli.main(argv) == 0
    assert json.loads(capsys.readouterr().out)["created"] is True
    assert get_json("/state")["calendar"]["events"][0]["attendees"] == ["a@x.io", "b@x.io"]
    assert claw_cli.main(["todo", "list", "--include-done"]) == 0


def test_service_process_starts_and_serves(tmp_path: Path) -> None:
    """`python -m openforgerl.envs.claw.services` as a real process, port chosen by the OS."""
    port_file = tmp_path / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openforgerl.envs.claw.services",
            "--port",
            "0",
            "--port-file",
            str(port_file),
            "--workspace",
            str(tmp_path),
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        assert get_json("/healthz", url=url) == {"ok": True}
        assert call_tool("notes_write", {"title": "a", "content": "b"}, url=url)[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_mcp_server_lists_and_calls_tools(claw_service) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    svc = claw_service()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "openforgerl.envs.claw.mcp_server", "--tools", "todo_add,mail_send"],
        env={"OPENFORGERL_CLAW_URL": svc.url},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = (await session.list_tools()).tools
        assert [t.name for t in tools] == ["todo_add", "mail_send"]
        assert tools[1].input_schema["required"] == ["to", "subject", "body"]
        ok = await session.call_tool("todo_add", {"title": "from mcp"})
        assert not ok.is_error and json.loads(ok.content[0].text)["added"] is True
        bad = await session.call_tool("mail_send", {"to": "x"})
        assert bad.is_error and "missing required" in bad.content[0].text
        hidden = await session.call_tool("notes_write", {"title": "a", "content": "b"})
        assert hidden.is_error
    assert svc.app.world.state()["todo"]["items"][0]["title"] == "from mcp"


def test_an_oversized_or_lying_body_is_refused_before_it_is_read(claw_service) -> None:
    """The agent reaches the service (JsonHandler, shared with tau2's): a huge Content-Length is a 413 and
    the connection closes, never an allocation; a non-JSON body is a 400; an unknown route a 404."""
    import http.client
    from urllib.parse import urlsplit

    from openforgerl.envs.claw.services.server import MAX_BODY

    service = claw_service()
    host, port = urlsplit(service.url).hostname, urlsplit(service.url).port
    for length, body, path, status in (
        (str(MAX_BODY + 1), b"", "/call/todo_list", 413),
        ("-5", b"", "/call/x", 413),
        ("abc", b"", "/call/x", 413),
        ("3", b"{x}", "/call/todo_list", 400),
        ("2", b"{}", "/nope", 404),
    ):
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.putrequest("POST", path)
        conn.putheader("Content-Length", length)
        conn.endheaders(body)
        resp = conn.getresponse()
        assert resp.status == status, (length, path, resp.read())
        conn.close()
