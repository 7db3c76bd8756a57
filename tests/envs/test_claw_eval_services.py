"""Imported Claw-Eval tasks on upstream's own mock services (envs/claw/services/upstream.py).

The data (data/claw_eval_services/) is ours, in upstream's repository layout: a FastAPI ledger service, an
error-injection `_base.py` and a task whose tools are the service's endpoints and whose grader reads the
service's /audit. The end-to-end tests go through `eval` with `zero` (real sandboxes, gateway, Claw service,
verifier); a scripted engine stands in for the policy's decisions only.
"""

from __future__ import annotations

import json
import shutil
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from scripted_eval import run_eval

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.envs.claw.services.server import build_app, serve
from openforgerl.tasks.format import load_task
from openforgerl.tasks.importing import import_any

DATA = Path(__file__).parent / "data" / "claw_eval_services"
TASK = DATA / "tasks" / "T950_ledger_post"
POST = {"account_id": "A-2", "amount": 120, "memo": "train ticket"}
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    [out] = import_any(TASK, tmp_path / "tasks")
    return out


def test_import_maps_the_endpoints_to_upstream_tools(folder: Path) -> None:
    from openforgerl.envs.claw.runtime import ClawTaskRuntime

    task = load_task(folder)
    assert task.flags == ["needs:transcript"]  # no `unsupported: service:ledger` / `tool:ledger_*`
    manifest = json.loads((folder / "environment/upstream/services.json").read_text())
    assert manifest["services"] == [
        {
            "name": "ledger",
            "server": "mock_services/ledger/server.py",
            "audit": "/ledger/audit",
            "env": {
                "LEDGER_FIXTURES": "tasks/T950_ledger_post/fixtures/ledger/accounts.json",
                "FAIL_ONCE": "/ledger/accounts",
            },
        }
    ]
    assert [(t["name"], t["method"], t["path"]) for t in manifest["tools"]] == [
        ("ledger_list_accounts", "POST", "/ledger/accounts"),
        ("ledger_post_entry", "POST", "/ledger/post"),
    ]
    assert (folder / "environment/upstream/tasks/T950_ledger_post/fixtures/ledger/accounts.json").is_file()
    assert not any(
        "grader" in p.name for p in (folder / "environment").rglob("*")
    )  # grader stays under tests/
    runtime = ClawTaskRuntime(task)
    names = [t["function"]["name"] for t in runtime.function_tools()]
    assert {"ledger_list_accounts", "ledger_post_entry", "read_file"} <= set(names)
    assert ".claw/upstream/services.json" in runtime.files() and "--upstream" in runtime.service_argv()
    assert "ledger_post_entry" in runtime.shell_tools_hint()


@pytest.fixture
def service(folder: Path) -> Iterator[str]:
    app = build_app(None, folder, {"tools": []}, folder / "environment/upstream")
    server = serve(app, "127.0.0.1", 0, token="s3cret")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _http(url: str, method: str = "POST", body: dict | None = None, token: str = "") -> tuple[int, object]:
    data = json.dumps(body or {}).encode() if method == "POST" else None
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Authorization": f"Bearer {token}"} if token else {}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def test_only_declared_endpoints_are_reachable_and_the_audit_needs_the_token(service: str) -> None:
    assert _http(f"{service}/call/ledger_list_accounts")[0] == 503  # the service's own injected error
    status, body = _http(f"{service}/call/ledger_list_accounts")
    assert status == 200 and body["result"]["accounts"][1]["balance"] == 0
    assert _http(f"{service}/call/ledger_post_entry", body=POST)[1]["result"]["balance"] == 120
    for path in (
        "/ledger/admin/credit",
        "/ledger/reset",
        "/call/ledger_admin_credit",
        "/call/../ledger/admin/credit",
        "/tools/ledger/reset",
    ):
        assert _http(f"{service}{path}", body=POST)[0] == 404, path
    assert _http(f"{service}/ledger/audit", "GET")[0] == 404
    assert _http(f"{service}/upstream/audit", "GET")[0] == 403
    assert _http(f"{service}/upstream/audit", "GET", token="wrong")[0] == 403
    status, audit = _http(f"{service}/upstream/audit", "GET", token="s3cret")
    assert status == 200 and audit["ledger"]["posted"] == [POST]  # upstream's own /audit, by service name
    calls = _http(f"{service}/audit", "GET")[1]["calls"]
    assert [(c["tool"], c["status"]) for c in calls][:3] == [
        ("ledger_list_accounts", 503),
        ("ledger_list_accounts", 200),
        ("ledger_post_entry", 200),
    ]
    assert {c["status"] for c in calls[3:]} == {404}  # the refused ones are audited too, and did nothing


def _exposed(tools: list[dict], name: str) -> str:
    """The harness's name for tool `name` (a CLI namespaces MCP tools: `mcp__claw__<name>`)."""
    names = [str((t.get("function") or t).get("name", "")) for t in tools]
    return next((n for n in names if n == name or n.endswith(("__" + name, "." + name))), name)


def _policy(steps: list[tuple[str, dict]], seen: list[str]):
    def policy(turn):
        if not turn.tools:
            return "title"
        done = [m for m in turn.messages if m.get("role") == "tool"]
        seen[:] = [str(m.get("content", "")) for m in done]
        calls = [format_tool_call(_exposed(turn.tools, n), a) for n, a in steps]
        return calls[len(done)] if len(done) < len(calls) else "Posted the ticket to Travel."

    return policy


def eval_task(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[tuple[str, dict]],
    seen: list[str] | None = None,
    harness: str = "zero",
) -> dict:
    """One `eval` rollout of T950 with `zero` whose policy makes `steps`; `seen` gets the tool results."""
    tasks = tmp_path / "tasks"
    if not tasks.is_dir():
        import_any(TASK, tasks)
    [record] = run_eval(
        tasks, tmp_path / "r", monkeypatch, _policy(steps, [] if seen is None else seen), harness=harness
    )
    return record


@needs_bwrap
@pytest.mark.parametrize(
    ("steps", "reward"),
    [
        ([("ledger_list_accounts", {}), ("ledger_list_accounts", {}), ("ledger_post_entry", POST)], 1.0),
        ([], 0.0),  # a no-op
    ],
)
def test_eval_runs_upstreams_service_and_the_grader_reads_its_audit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list, reward: float
) -> None:
    record = eval_task(tmp_path, monkeypatch, steps)
    assert record["status"] == "ok", record
    assert record["reward"] == reward and record["reward_components"]["check.grader"] == reward


@needs_bwrap
@pytest.mark.harness
@pytest.mark.parametrize("harness", ["claude_code", "codex"])
def test_a_real_cli_reaches_upstreams_service_through_mcp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, harness: str
) -> None:
    """The same task through an unmodified CLI: the upstream tools are MCP tools (`env/mcp_server.py` over the
    task's declared schemas), and the grader scores what upstream's service audited."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
    from test_eval_real_clis import _require_installed

    _require_installed(harness)
    record = eval_task(
        tmp_path,
        monkeypatch,
        [("ledger_list_accounts", {}), ("ledger_list_accounts", {}), ("ledger_post_entry", POST)],
        harness=harness,
    )
    assert record["status"] == "ok", record
    assert record["reward"] == 1.0 and record["reward_components"]["check.grader"] == 1.0
